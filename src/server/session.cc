#include "server/session.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/write.hpp>
#include <charconv>
#include <memory_resource>
#include <string>

#include "base/log_format.h"
#include "base/string_pool.h"
#include "server/dispatch.h"
#include "server/replies.h"

namespace flashsale::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);

void AppendNumber(std::string& out, uint64_t value) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  out.append(digits, end);
}

// HTTP/1.x response head for a reply (the body is written after it, from the reply itself).
void SerializeHead(const Reply& reply, unsigned version, bool keep_alive, std::string& out) {
  out.clear();
  const auto code = static_cast<unsigned>(reply.status);
  const std::string_view reason = beast::http::obsolete_reason(reply.status);
  out += "HTTP/";
  AppendNumber(out, version / 10);
  out += '.';
  AppendNumber(out, version % 10);
  out += ' ';
  AppendNumber(out, code);
  out += ' ';
  out += reason;
  out += "\r\n";
  // A 204 has no content at all (RFC 9110 8.6: no Content-Length either).
  if (reply.status != http::status::no_content) {
    out += "Content-Type: ";
    out += reply.content_type;
    out += "\r\n";
  }
  // A 304 has no body, and a Content-Length would claim the representation's length.
  if (reply.status != http::status::not_modified && reply.status != http::status::no_content) {
    out += "Content-Length: ";
    AppendNumber(out, reply.body.size());
    out += "\r\n";
  }
  if (!reply.cache_control.empty()) {
    out += "Cache-Control: ";
    out += reply.cache_control;
    out += "\r\n";
  }
  if (!reply.etag.empty()) {
    out += "ETag: \"";
    out += reply.etag;
    out += "\"\r\n";
  }
  if (reply.retry_after_s >= 0) {
    out += "Retry-After: ";
    AppendNumber(out, static_cast<uint64_t>(reply.retry_after_s));
    out += "\r\n";
  }
  if (!reply.allow.empty()) {
    out += "Allow: ";
    out += reply.allow;
    out += "\r\n";
  }
  out += reply.headers;
  if (!reply.allow_origin.empty()) {
    out += "Access-Control-Allow-Origin: ";
    out += reply.allow_origin;
    // A page may read these of our answers: where a queued draw's outcome will be, and when to
    // retry.
    out += "\r\nAccess-Control-Expose-Headers: Location, Retry-After\r\n";
  }
  if (reply.vary_origin) out += "Vary: Origin\r\n";
  // A 401 names the scheme that would be accepted (RFC 9110 11.6.1): bearer tokens, the user's or
  // the admin's (in gateway mode the user comes from the gateway's header, and only admin routes
  // answer 401 for a token).
  if (reply.status == http::status::unauthorized)
    out += "WWW-Authenticate: Bearer realm=\"flashsale\"\r\n";
  // HTTP/1.1 is persistent unless closed; HTTP/1.0 only when asked.
  if (!keep_alive) {
    out += "Connection: close\r\n";
  } else if (version < 11) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
}

bool IsDisconnect(const error_code& error) {
  return error == beast::http::error::end_of_stream || error == asio::error::eof ||
         error == asio::error::operation_aborted || error == asio::error::connection_reset ||
         error == asio::error::broken_pipe || error == asio::error::bad_descriptor;
}

std::string PeerAddress(const tcp::socket& socket) {
  error_code error;
  const auto endpoint = socket.remote_endpoint(error);
  return error ? std::string() : endpoint.address().to_string();
}

// One access-log record: in text a line, with --log-format json the fields as JSON fields.
void LogAccess(std::string_view method, std::string_view target, const Reply& reply,
               std::chrono::steady_clock::time_point start) {
  base::LogFields fields;
  fields.method = method.empty() ? std::string_view("-") : method;
  fields.target = target;
  fields.status = static_cast<int>(reply.status);
  fields.outcome = WordName(reply.word);
  fields.latency_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  fields.activity = reply.activity_id;
  fields.order_id = reply.order_id();
  const base::ScopedLogFields scope(fields);
  spdlog::info("access {} {} {} activity={} order_id={} outcome={} {:.3f}ms", fields.method,
               fields.target, fields.status, fields.activity.empty() ? "-" : fields.activity,
               fields.order_id.empty() ? "-" : fields.order_id, fields.outcome, fields.latency_ms);
}

}  // namespace

Sessions::Sessions(asio::io_context& io, const ServerOptions& options, WorkerServices& services,
                   const bool& draining)
    : io_(io), options_(options), services_(services), draining_(draining) {}

void Sessions::CancelIdle() {
  error_code ignored;
  for (auto& session : entries_) {
    if (session.idle) session.socket->cancel(ignored);
  }
}

void Sessions::CloseAll() {
  error_code ignored;
  for (auto& session : entries_) session.socket->close(ignored);
}

asio::awaitable<void> Sessions::SweepDeadlines(const bool& stop) {
  asio::steady_timer timer(io_);
  while (!draining_ || !entries_.empty()) {
    timer.expires_after(std::chrono::milliseconds(100));
    auto [error] = co_await timer.async_wait(kUseTuple);
    if (error || stop) co_return;
    const auto now = std::chrono::steady_clock::now();
    error_code ignored;
    for (auto& session : entries_) {
      if (session.deadline <= now) session.socket->close(ignored);
    }
  }
}

asio::awaitable<void> Sessions::Serve(tcp::socket socket) {
  const std::string peer = PeerAddress(socket);
  beast::flat_buffer buffer;
  std::string out;  // the reply's head being written; its capacity is reused
  // Where each request's fields and body are parsed: reset after every request, so requests
  // of the usual size reuse the same bytes (a larger one takes more from the heap, freed at
  // the next reset).
  std::array<std::byte, 4096> arena_bytes;
  std::pmr::monotonic_buffer_resource arena(arena_bytes.data(), arena_bytes.size());
  auto entry = entries_.insert(entries_.end(), Entry{&socket, true, {}});
  // The clock is read three times a request: when it starts (its read deadline), before its
  // reply is written (the write's deadline) and after (its latency, and the idle deadline).
  auto now = std::chrono::steady_clock::now();
  ++count_;
  while (!draining_) {
    // Wait for the first byte of a request: an idle keep-alive connection.
    entry->idle = true;
    if (buffer.size() == 0) {
      entry->deadline = now + options_.idle_timeout;
      // The other ready connections of this thread go first (a post to the back of its
      // queue): under load, the client's next request has often come by then and the read
      // takes it at once. Read right after the reply, it would find nothing, a system call
      // that says EAGAIN before the reactor's wait (the reads per request, with and without the
      // post: bench/README.md). A lone connection loses only a trip through the queue.
      co_await asio::post(io_, asio::use_awaitable);
      auto [error, bytes] = co_await socket.async_read_some(buffer.prepare(4096), kUseTuple);
      if (error) break;
      buffer.commit(bytes);
    }
    entry->idle = false;
    const auto start = std::chrono::steady_clock::now();
    const bool sampled =
        options_.access_log_every > 0 && ++requests_seen_ % options_.access_log_every == 0;
    std::string method_text, target_text;  // for the access log
    // The rest of the request, headers then body, within read_timeout in all.
    arena.release();
    const RequestAllocator allocator(&arena);
    beast::http::request_parser<RequestBody, RequestAllocator> parser(
        std::piecewise_construct, std::make_tuple(allocator), std::make_tuple(allocator));
    parser.header_limit(static_cast<uint32_t>(options_.max_header_bytes));
    parser.body_limit(options_.max_body_bytes);
    parser.eager(true);
    entry->deadline = start + options_.read_timeout;
    // What the buffer holds is parsed in place; the socket is read only when the parser needs
    // more. A request that came whole in one read (the usual case) costs no further operation:
    // Beast's async_read_header posted its completion even then, a scheduler round trip per
    // request.
    error_code error;
    bool header_checked = false;
    for (;;) {
      size_t used = 0;
      if (buffer.size() > 0) {
        used = parser.put(buffer.data(), error);
        buffer.consume(used);
        if (error == beast::http::error::need_more) error = {};
        if (error) break;
      }
      if (!header_checked && parser.is_header_done()) {
        header_checked = true;
        // A Transfer-Encoding whose last coding is not chunked leaves the body's end unknown;
        // the parser would read the body as the next request (smuggling). RFC 9112 6.3: 400,
        // close.
        if (parser.get().count(http::field::transfer_encoding) > 0 && !parser.chunked()) {
          error = beast::http::error::bad_transfer_encoding;
          break;
        }
        if (!parser.is_done() && parser.get()[http::field::expect] == "100-continue") {
          beast::http::response<beast::http::empty_body> go_on{http::status::continue_, 11};
          std::tie(error, std::ignore) =
              co_await beast::http::async_write(socket, go_on, kUseTuple);
          if (error) break;
        }
      }
      if (parser.is_done()) break;
      if (used > 0 && buffer.size() > 0) continue;  // the parser stopped short; it goes on
      auto [read_error, bytes] = co_await socket.async_read_some(
          buffer.prepare(beast::read_size(buffer, 65536)), kUseTuple);
      if (read_error == asio::error::eof) {
        // As Beast's read: the end of a message cut short is a partial message; a connection
        // closed between requests is the end of the stream.
        if (parser.got_some()) {
          parser.put_eof(error);
        } else {
          error = beast::http::error::end_of_stream;
        }
        break;
      }
      if (read_error) {
        error = read_error;
        break;
      }
      buffer.commit(bytes);
    }
    entry->deadline =
        std::chrono::steady_clock::time_point::max();  // handlers bound their own waits
    Reply reply;
    bool keep_alive = false;
    unsigned version = 11;
    if (error) {
      if (IsDisconnect(error)) break;  // nobody to answer
      reply = ParseErrorReply(error);
    } else {
      const Request& request = parser.get();
      version = request.version();
      if (sampled) {
        method_text = std::string(request.method_string());
        target_text = std::string(request.target());
      }
      co_await Dispatch(request, peer, services_, reply);
      keep_alive = request.keep_alive() && !reply.close && !draining_;
    }

    // Our replies are a status line, four headers at most and a body: the head written straight
    // into one buffer, then head and body in one write (Beast's generic serializer cost a third
    // of the request's time).
    SerializeHead(reply, version, keep_alive, out);
    entry->deadline = std::chrono::steady_clock::now() + options_.read_timeout;
    // Written at once where the socket takes the whole reply (the usual case: a reply is far
    // smaller than the send buffer). The socket is non-blocking, so this never waits; Asio's
    // async_write would complete even an immediate send through the scheduler's queue, a
    // round trip and a coroutine resumption per request. What did not go waits for the
    // socket, asynchronously, within the write's deadline.
    const std::array<asio::const_buffer, 2> pieces{asio::buffer(out), asio::buffer(reply.body)};
    error_code write_error;
    const size_t sent = socket.write_some(pieces, write_error);
    if (write_error == asio::error::would_block) write_error = {};
    if (!write_error && sent < out.size() + reply.body.size()) {
      beast::buffers_suffix<std::array<asio::const_buffer, 2>> rest(pieces);
      rest.consume(sent);
      std::tie(write_error, std::ignore) = co_await asio::async_write(socket, rest, kUseTuple);
    }
    now = std::chrono::steady_clock::now();
    services_.metrics.Request(reply.route, reply.word, now - start);
    // The report's answers by activity (reply.activity_id points into the parser's request).
    if (reply.route == RouteId::kPurchase || reply.route == RouteId::kDraw) {
      services_.metrics.Answer(reply.activity_id, reply.word);
    }
    if (sampled) LogAccess(method_text, target_text, reply, start);
    base::GiveString(std::move(reply.body));  // for the next reply's JSON (base/string_pool.h)
    if (write_error || !keep_alive) break;
  }
  error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  socket.close(ignored);
  entries_.erase(entry);
  --count_;
}

}  // namespace flashsale::server
