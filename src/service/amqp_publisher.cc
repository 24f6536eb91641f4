#include "service/amqp_publisher.h"

#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <boost/asio/post.hpp>
#include <cctype>
#include <vector>

#include "base/json_writer.h"
#include "base/redact.h"
#include "service/blocking.h"
#include "service/events.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;
using base::Status;

namespace {

constexpr amqp_channel_t kChannel = 1;

timeval ToTimeval(std::chrono::milliseconds duration) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(duration.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((duration.count() % 1000) * 1000);
  return tv;
}

std::string BytesText(amqp_bytes_t bytes) {
  return std::string(static_cast<const char*>(bytes.bytes), bytes.len);
}

// A connection.close or channel.close method as text: "404 NOT_FOUND - no exchange ...".
std::string CloseText(const amqp_method_t& method) {
  if (method.id == AMQP_CONNECTION_CLOSE_METHOD) {
    const auto* close = static_cast<const amqp_connection_close_t*>(method.decoded);
    return fmt::format("the broker closed the connection: {} {}", close->reply_code,
                       BytesText(close->reply_text));
  }
  if (method.id == AMQP_CHANNEL_CLOSE_METHOD) {
    const auto* close = static_cast<const amqp_channel_close_t*>(method.decoded);
    return fmt::format("the broker closed the channel: {} {}", close->reply_code,
                       BytesText(close->reply_text));
  }
  return fmt::format("unexpected method 0x{:08x}", method.id);
}

// An RPC's reply as text; empty when it succeeded.
std::string ReplyText(const amqp_rpc_reply_t& reply) {
  switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return "";
    case AMQP_RESPONSE_NONE:
      return "no reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
      return amqp_error_string2(reply.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      return CloseText(reply.reply);
  }
  return "unknown reply";
}

bool ExchangeChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.' ||
         c == ':';
}

}  // namespace

// One message, owned by the job that publishes it.
struct AmqpMessage {
  std::string id;
  std::string routing_key;
  std::string type;
  int64_t timestamp_s = 0;
  std::string body;
};

class AmqpReceiver::Link {
 public:
  Link(AmqpTarget target, std::string exchange, std::string name, std::chrono::milliseconds timeout)
      : target_(std::move(target)),
        exchange_(std::move(exchange)),
        name_(std::move(name)),
        timeout_(timeout) {}
  ~Link() { Close(); }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  Status Publish(const AmqpMessage& message) {
    if (connection_ == nullptr) {
      if (auto opened = Open(); !opened.ok()) return opened;
    }
    amqp_basic_properties_t properties{};
    properties._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                        AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG |
                        AMQP_BASIC_TIMESTAMP_FLAG;
    properties.content_type = amqp_cstring_bytes("application/json");
    properties.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    properties.message_id = amqp_cstring_bytes(message.id.c_str());
    properties.type = amqp_cstring_bytes(message.type.c_str());
    properties.timestamp = static_cast<uint64_t>(message.timestamp_s);
    const amqp_bytes_t body{message.body.size(), const_cast<char*>(message.body.data())};
    const int sent =
        amqp_basic_publish(connection_, kChannel, amqp_cstring_bytes(exchange_.c_str()),
                           amqp_cstring_bytes(message.routing_key.c_str()),
                           /*mandatory=*/1, /*immediate=*/0, &properties, body);
    if (sent != AMQP_STATUS_OK) return Fail(fmt::format("publish: {}", amqp_error_string2(sent)));
    return AwaitConfirm(++published_);
  }

  // A clean close (bounded by the rpc timeout), then the connection freed.
  void Close() {
    if (connection_ == nullptr) return;
    amqp_channel_close(connection_, kChannel, AMQP_REPLY_SUCCESS);
    amqp_connection_close(connection_, AMQP_REPLY_SUCCESS);
    Drop();
  }

 private:
  Status Open() {
    connection_ = amqp_new_connection();
    if (connection_ == nullptr) return Fail("out of memory");
    amqp_socket_t* socket = amqp_tcp_socket_new(connection_);
    if (socket == nullptr) return Fail("could not make a socket");
    timeval timeout = ToTimeval(timeout_);
    const int opened =
        amqp_socket_open_noblock(socket, target_.host.c_str(), target_.port, &timeout);
    if (opened != AMQP_STATUS_OK) {
      return Fail(fmt::format("connect: {}", amqp_error_string2(opened)));
    }
    amqp_set_handshake_timeout(connection_, &timeout);
    amqp_set_rpc_timeout(connection_, &timeout);
    const amqp_rpc_reply_t login =
        amqp_login(connection_, target_.vhost.c_str(), /*channel_max=*/0,
                   /*frame_max=*/AMQP_DEFAULT_FRAME_SIZE, /*heartbeat=*/0, AMQP_SASL_METHOD_PLAIN,
                   target_.user.c_str(), target_.password.c_str());
    if (const std::string error = ReplyText(login); !error.empty()) {
      return Fail("login: " + error);
    }
    amqp_channel_open(connection_, kChannel);
    if (const std::string error = ReplyText(amqp_get_rpc_reply(connection_)); !error.empty()) {
      return Fail("channel.open: " + error);
    }
    amqp_confirm_select(connection_, kChannel);
    if (const std::string error = ReplyText(amqp_get_rpc_reply(connection_)); !error.empty()) {
      return Fail("confirm.select: " + error);
    }
    published_ = 0;  // delivery tags count from 1 on each channel
    spdlog::info("amqp: connected to {}", name_);
    return {};
  }

  // Frames until the broker's basic.ack or basic.nack for `tag`, up to the timeout.
  Status AwaitConfirm(uint64_t tag) {
    const auto until = std::chrono::steady_clock::now() + timeout_;
    std::string returned;  // a basic.return's reply: no queue took the message
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left <= std::chrono::milliseconds::zero()) {
        return Fail(fmt::format("no confirm within {} ms", timeout_.count()));
      }
      amqp_maybe_release_buffers(connection_);
      timeval wait = ToTimeval(left);
      amqp_frame_t frame{};
      const int got = amqp_simple_wait_frame_noblock(connection_, &frame, &wait);
      if (got == AMQP_STATUS_TIMEOUT) continue;
      if (got != AMQP_STATUS_OK) return Fail(fmt::format("confirm: {}", amqp_error_string2(got)));
      // The content frames of a returned message, and heartbeats, say nothing here.
      if (frame.frame_type != AMQP_FRAME_METHOD) continue;
      const amqp_method_t& method = frame.payload.method;
      switch (method.id) {
        case AMQP_BASIC_RETURN_METHOD: {
          const auto* back = static_cast<const amqp_basic_return_t*>(method.decoded);
          returned = fmt::format(
              "returned unroutable ({} {}): no queue is bound to exchange '{}' "
              "for routing key '{}'",
              back->reply_code, BytesText(back->reply_text), exchange_,
              BytesText(back->routing_key));
          break;
        }
        case AMQP_BASIC_ACK_METHOD: {
          const auto* ack = static_cast<const amqp_basic_ack_t*>(method.decoded);
          if (ack->delivery_tag == tag || (ack->multiple != 0 && ack->delivery_tag >= tag)) {
            if (!returned.empty()) return MakeError(ErrorCode::kUnavailable, "{}", returned);
            return {};
          }
          break;  // an earlier message's: none is outstanding, but harmless
        }
        case AMQP_BASIC_NACK_METHOD: {
          const auto* nack = static_cast<const amqp_basic_nack_t*>(method.decoded);
          if (nack->delivery_tag == tag || (nack->multiple != 0 && nack->delivery_tag >= tag)) {
            return MakeError(ErrorCode::kUnavailable, "the broker refused it (basic.nack)");
          }
          break;
        }
        default:
          return Fail(CloseText(method));
      }
    }
  }

  // Drops the connection (no goodbye: after an error it may be half dead) and returns `why`.
  Status Fail(const std::string& why) {
    Drop();
    return MakeError(ErrorCode::kUnavailable, "{}", why);
  }

  void Drop() {
    if (connection_ == nullptr) return;
    amqp_destroy_connection(connection_);
    connection_ = nullptr;
  }

  const AmqpTarget target_;
  const std::string exchange_;
  const std::string name_;
  const std::chrono::milliseconds timeout_;
  amqp_connection_state_t connection_ = nullptr;
  uint64_t published_ = 0;  // the last delivery tag on the channel
};

Result<AmqpTarget> ParseAmqpUrl(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return MakeError(ErrorCode::kInvalidArgument, "AMQP URL '{}': {}",
                     base::RedactUrl(url.substr(0, 100)), why);
  };
  if (url.size() > 512) return bad("over 512 bytes");
  if (url.starts_with("amqps://")) return bad("amqps:// (TLS) is not supported; use amqp://");
  if (!url.starts_with("amqp://")) return bad("must start with amqp://");
  std::string copy(url);  // amqp_parse_url writes into it; the parts point into it
  amqp_connection_info info{};
  amqp_default_connection_info(&info);
  if (amqp_parse_url(copy.data(), &info) != AMQP_STATUS_OK) {
    return bad("not amqp://[user[:password]@]host[:port][/vhost]");
  }
  if (info.port < 1 || info.port > 65535) return bad("the port must be 1..65535");
  if (info.host == nullptr || *info.host == '\0') return bad("needs a host");
  return AmqpTarget{.host = info.host,
                    .port = info.port,
                    .user = info.user,
                    .password = info.password,
                    .vhost = info.vhost};
}

Status CheckExchangeName(std::string_view exchange) {
  if (exchange.empty() || exchange.size() > 255 ||
      !std::all_of(exchange.begin(), exchange.end(), ExchangeChar)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "AMQP exchange '{}': must be 1 to 255 characters of A-Z a-z 0-9 - _ . :",
                     exchange.substr(0, 100));
  }
  return {};
}

std::string AmqpReceiverName(const AmqpTarget& target, std::string_view exchange) {
  std::string vhost;
  for (const char c : target.vhost) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.' ||
        c == '~') {
      vhost += c;
    } else {
      vhost += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return fmt::format("amqp://{}:{}/{}#{}", target.host, target.port, vhost, exchange);
}

Result<std::unique_ptr<AmqpReceiver>> AmqpReceiver::Create(const AmqpOptions& options,
                                                           std::chrono::milliseconds timeout) {
  auto target = ParseAmqpUrl(options.url);
  if (!target.ok()) return std::move(target).error();
  if (auto checked = CheckExchangeName(options.exchange); !checked.ok()) {
    return std::move(checked).error();
  }
  std::string name = AmqpReceiverName(*target, options.exchange);
  auto link = std::make_shared<Link>(std::move(*target), options.exchange, name, timeout);
  return std::unique_ptr<AmqpReceiver>(new AmqpReceiver(std::move(name), std::move(link), timeout));
}

AmqpReceiver::AmqpReceiver(std::string name, std::shared_ptr<Link> link,
                           std::chrono::milliseconds timeout)
    : name_(std::move(name)), timeout_(timeout), link_(std::move(link)) {}

AmqpReceiver::~AmqpReceiver() {
  asio::post(thread_, [link = std::move(link_)] { link->Close(); });
  thread_.join();
}

asio::awaitable<Status> AmqpReceiver::Send(const store::OrderEvent& event) {
  base::JsonWriter writer;
  WriteEventJson(writer, event);
  auto message = std::make_shared<AmqpMessage>(AmqpMessage{.id = event.event_id,
                                                           .routing_key = event.activity_id,
                                                           .type = event.state,
                                                           .timestamp_s = event.at_ms / 1000,
                                                           .body = std::move(writer).Take()});
  const auto publish = [link = link_, message] { return link->Publish(*message); };
  // Connect, login, channel.open, confirm.select and the confirm: each bounded by the timeout.
  auto done = co_await RunBlocking(thread_.get_executor(), publish, 6 * timeout_);
  if (!done) {
    co_return MakeError(ErrorCode::kUnavailable, "the broker did not answer within {} ms",
                        (6 * timeout_).count());
  }
  co_return std::move(*done);
}

}  // namespace flashsale::service
