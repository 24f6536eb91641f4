#include "redis/node_connection.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/append.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>

namespace flashsale::redis {

namespace asio = boost::asio;
using base::Error;
using base::ErrorCode;
using base::MakeError;
using base::Result;
using boost::system::error_code;
using GenericEndpoint = asio::generic::stream_protocol::endpoint;

namespace {

constexpr size_t kReadChunk = size_t{64} * 1024;

// Runs a handler through its associated executor: inline when that is the current thread (the
// common case: the caller is a coroutine or callback on this connection's thread).
void Complete(ReplyHandler handler, Result<Reply> result) {
  asio::dispatch(asio::append(std::move(handler), std::move(result)));
}

// Error replies by which Redis says it did not run the command because it cannot right now
// (loading its dataset, blocked by a long script, a replica without its master, a cluster slot
// moving). They are kUnavailable: the command did not run, a retry later is safe.
bool IsNotRunNow(std::string_view error) {
  for (std::string_view prefix : {"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"}) {
    if (error.starts_with(prefix) &&
        (error.size() == prefix.size() || error[prefix.size()] == ' ')) {
      return true;
    }
  }
  return false;
}

Result<Reply> ToResult(Reply reply, const ConnectionOptions& options) {
  if (!reply.is_error()) return reply;
  if (IsNotRunNow(reply.str()) &&
      !(options.cluster_node &&
        (reply.str().starts_with("TRYAGAIN") || reply.str().starts_with("CLUSTERDOWN")))) {
    return MakeError(ErrorCode::kUnavailable, "redis at {} did not run the command: {}",
                     options.endpoint.Describe(), reply.str());
  }
  return Error{ErrorCode::kRemote, std::string(reply.str()), ErrorDetailOf(reply.str())};
}

}  // namespace

struct NodeConnection::Tls {
  boost::asio::ssl::context context{boost::asio::ssl::context::tls_client};
  boost::asio::ssl::stream<boost::asio::generic::stream_protocol::socket&> stream;
  explicit Tls(boost::asio::generic::stream_protocol::socket& socket) : stream(socket, context) {}
};

std::shared_ptr<NodeConnection> NodeConnection::Create(asio::any_io_executor executor,
                                                       ConnectionOptions options) {
  return std::shared_ptr<NodeConnection>(
      new NodeConnection(std::move(executor), std::move(options)));
}

NodeConnection::NodeConnection(asio::any_io_executor executor, ConnectionOptions options)
    : Connection(std::move(executor), std::move(options)),
      socket_(executor_),
      resolver_(executor_),
      connect_timer_(executor_),
      deadline_timer_(executor_),
      read_buffer_(kReadChunk),
      jitter_(options_.jitter_seed != 0 ? options_.jitter_seed
                                        : static_cast<uint64_t>(std::random_device{}())) {}

NodeConnection::~NodeConnection() {
  if (reader_ != nullptr) redisReaderFree(reader_);
}

void NodeConnection::Start() {
  if (state_ != State::kIdle) return;
  Connect();
}

void NodeConnection::Stop() {
  if (state_ == State::kStopped) return;
  std::vector<Completion> done;
  FailAll("connection stopped", ErrorCode::kCancelled, done);
  CloseLink();
  state_ = State::kStopped;
  deadline_timer_.cancel();
  connect_timer_.cancel();
  Deliver(done);
}

void NodeConnection::Connect() {
  CloseLink();
  state_ = State::kConnecting;
  const uint64_t generation = generation_;
  reader_ = CreatePooledReader();  // replies from the thread's pool (redis/reply.h)
  reader_->maxbuf = 0;  // keep the reader's buffer between replies instead of reallocating
  auto self = shared_from_this();

  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait([self, generation](const error_code& error) {
    if (error || generation != self->generation_) return;
    if (self->state_ == State::kConnecting || self->state_ == State::kHandshake) {
      self->Fail(fmt::format("connect to {} timed out after {} ms",
                             self->options_.endpoint.Describe(),
                             self->options_.connect_timeout.count()));
    }
  });

  auto on_connect = [self, generation](const error_code& error) {
    if (generation != self->generation_) return;
    if (error) {
      self->Fail(fmt::format("connect to {} failed: {}", self->options_.endpoint.Describe(),
                             error.message()));
      return;
    }
    if (self->options_.endpoint.tls) {
      self->StartTls(generation);
      return;
    }
    self->OnConnected(generation);
  };

  const Endpoint& endpoint = options_.endpoint;
  if (endpoint.kind == Endpoint::Kind::kUnix) {
    socket_.async_connect(GenericEndpoint(asio::local::stream_protocol::endpoint(endpoint.path)),
                          std::move(on_connect));
    return;
  }
  resolver_.async_resolve(
      endpoint.host, std::to_string(endpoint.port),
      [self, generation, on_connect = std::move(on_connect)](
          const error_code& error, const asio::ip::tcp::resolver::results_type& results) mutable {
        if (generation != self->generation_) return;
        if (error) {
          self->Fail(
              fmt::format("resolve {} failed: {}", self->options_.endpoint.host, error.message()));
          return;
        }
        std::vector<GenericEndpoint> endpoints;
        for (const auto& entry : results) endpoints.emplace_back(entry.endpoint());
        asio::async_connect(
            self->socket_, endpoints,
            [on_connect = std::move(on_connect)](
                const error_code& error, const GenericEndpoint&) mutable { on_connect(error); });
      });
}

// TLS on the connected socket: the server's certificate must chain to the CAs given (or the
// system's) and name the host; a failure fails the link like a refused connect.
void NodeConnection::StartTls(uint64_t generation) {
  tls_ = std::make_shared<Tls>(socket_);
  const Endpoint& endpoint = options_.endpoint;
  error_code error;
  if (endpoint.ca_file.empty()) {
    tls_->context.set_default_verify_paths(error);
  } else {
    tls_->context.load_verify_file(endpoint.ca_file, error);
  }
  if (error) {
    Fail(fmt::format("TLS to {}: CA certificates {}: {}", endpoint.Describe(),
                     endpoint.ca_file.empty() ? "of the system" : endpoint.ca_file,
                     error.message()));
    return;
  }
  tls_->stream.set_verify_mode(asio::ssl::verify_peer, error);
  tls_->stream.set_verify_callback(asio::ssl::host_name_verification(endpoint.host), error);
  // SNI, for servers that pick their certificate by name (not for an address).
  error_code not_an_address;
  asio::ip::make_address(endpoint.host, not_an_address);
  if (not_an_address) SSL_set_tlsext_host_name(tls_->stream.native_handle(), endpoint.host.c_str());
  tls_->stream.async_handshake(
      asio::ssl::stream_base::client,
      [self = shared_from_this(), tls = tls_, generation](const error_code& error) {
        if (generation != self->generation_) return;
        if (error) {
          self->Fail(fmt::format("TLS handshake with {} failed: {}",
                                 self->options_.endpoint.Describe(), error.message()));
          return;
        }
        self->OnConnected(generation);
      });
}

void NodeConnection::OnConnected(uint64_t generation) {
  if (options_.endpoint.kind == Endpoint::Kind::kTcp) {
    error_code ignored;
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
    socket_.set_option(asio::socket_base::keep_alive(true), ignored);
  }
  state_ = State::kHandshake;
  StartRead(generation);

  auto self = shared_from_this();
  auto step = [self, generation](std::string what) {
    return ReplyHandler([self, generation, what = std::move(what)](Result<Reply> result) {
      if (generation != self->generation_) return;
      if (!result.ok()) {
        self->Fail(fmt::format("{} on {} failed: {}", what, self->options_.endpoint.Describe(),
                               result.error().message));
        return;
      }
      if (--self->handshake_left_ == 0) self->BecomeReady();
    });
  };
  const Endpoint& endpoint = options_.endpoint;
  if (!endpoint.password.empty()) {
    ++handshake_left_;
    if (endpoint.username.empty()) {
      SendInternal(Command{"AUTH", endpoint.password}.wire(), step("AUTH"));
    } else {
      SendInternal(Command{"AUTH", endpoint.username, endpoint.password}.wire(), step("AUTH"));
    }
  }
  if (endpoint.db != 0) {
    ++handshake_left_;
    SendInternal(Command{"SELECT", IntArg(endpoint.db)}.wire(), step("SELECT"));
  }
  if (options_.on_server) {
    ++handshake_left_;
    SendInternal(
        Command{"INFO", "server"}.wire(), ReplyHandler([self, generation](Result<Reply> result) {
          if (generation != self->generation_) return;
          if (!result.ok()) {
            self->Fail(fmt::format("INFO on {} failed: {}", self->options_.endpoint.Describe(),
                                   result.error().message));
            return;
          }
          if (!self->options_.on_server(self->NodeName(), InfoField(result->str(), "run_id"))) {
            // Queued before this link: not for a server that may have lost writes.
            std::deque<Waiting> refused;
            refused.swap(self->waiting_);
            for (auto& waiting : refused) {
              self->Post(std::move(waiting.pending.handler),
                         Error{ErrorCode::kUnavailable,
                               "redis restarted or failed over; not sent until it is repaired"});
            }
          }
          if (--self->handshake_left_ == 0) self->BecomeReady();
        }));
  }
  if (handshake_left_ == 0) BecomeReady();
}

std::string NodeConnection::NodeName() const {
  const Endpoint& endpoint = options_.endpoint;
  if (endpoint.kind == Endpoint::Kind::kUnix) return endpoint.path;
  return fmt::format("{}:{}", endpoint.host, endpoint.port);
}

void NodeConnection::SendInternal(std::string_view wire, ReplyHandler handler) {
  out_.append(wire);
  if (inflight_.empty()) last_progress_ = Clock::now();
  inflight_.push_back(Pending{std::move(handler), Deadline::max()});
  ++unhanded_;
  ScheduleFlush();
}

void NodeConnection::BecomeReady() {
  state_ = State::kReady;
  connect_timer_.cancel();
  stats_.connects.Add();
  if (backoff_attempt_ > 0) {
    spdlog::info("redis: reconnected to {}", options_.endpoint.Describe());
  }
  backoff_attempt_ = 0;
  if (!waiting_.empty() && inflight_.empty()) last_progress_ = Clock::now();
  for (auto& waiting : waiting_) {
    out_.append(waiting.wire);
    inflight_.push_back(std::move(waiting.pending));
    ++unhanded_;
  }
  waiting_.clear();
  ScheduleFlush();
}

void NodeConnection::DoSendToNodeOf(std::string_view, std::string_view wire, Deadline deadline,
                                    ReplyHandler handler) {
  DoSend(wire, deadline, std::move(handler));
}

void NodeConnection::Primaries(Deadline, NodesHandler handler) {
  std::vector<ServerNode> nodes{ServerNode{0, NodeName()}};
  asio::post(executor_,
             asio::append(std::move(handler), Result<std::vector<ServerNode>>(std::move(nodes))));
}

void NodeConnection::DoSendToNode(const ServerNode&, std::string_view wire, Deadline deadline,
                                  ReplyHandler handler) {
  DoSend(wire, deadline, std::move(handler));
}

void NodeConnection::DoSend(std::string_view wire, Deadline deadline, ReplyHandler handler) {
  switch (state_) {
    case State::kStopped:
      Post(std::move(handler), Error{ErrorCode::kCancelled, "connection stopped; not sent"});
      return;
    case State::kIdle:
      Post(std::move(handler), Error{ErrorCode::kUnavailable, "connection not started; not sent"});
      return;
    case State::kBackoff:
      // Known down: fail fast rather than queue behind a reconnect that may take a while.
      Post(std::move(handler),
           MakeError(ErrorCode::kUnavailable, "redis at {} is unavailable ({}); not sent",
                     options_.endpoint.Describe(), last_error_));
      return;
    case State::kConnecting:
    case State::kHandshake:
    case State::kReady:
      break;
  }
  if (waiting_.size() + inflight_.size() >= options_.max_queued) {
    Post(std::move(handler), MakeError(ErrorCode::kResourceExhausted,
                                       "{} commands already queued for redis at {}; not sent",
                                       options_.max_queued, options_.endpoint.Describe()));
    return;
  }
  stats_.commands.Add();
  if (state_ == State::kReady) {
    out_.append(wire);
    if (inflight_.empty()) last_progress_ = Clock::now();
    inflight_.push_back(Pending{std::move(handler), deadline, Clock::now()});
    ++unhanded_;
    ScheduleFlush();
  } else {
    waiting_.push_back(
        Waiting{std::string(wire), Pending{std::move(handler), deadline, Clock::now()}});
  }
  ArmTimer(deadline);
}

void NodeConnection::ScheduleFlush() {
  if (flush_posted_ || write_in_progress_) return;
  flush_posted_ = true;
  // Posted, not written now: every command sent by the current handler (a burst of coroutines
  // resumed by one read) goes out in the same write.
  asio::post(executor_, [self = shared_from_this()] {
    self->flush_posted_ = false;
    if (!self->write_in_progress_ &&
        (self->state_ == State::kReady || self->state_ == State::kHandshake)) {
      self->StartWrite();
    }
  });
}

void NodeConnection::StartWrite() {
  if (out_.empty()) return;
  writing_.swap(out_);
  out_.clear();
  unhanded_ = 0;
  write_in_progress_ = true;
  stats_.writes.Add();
  auto done = [self = shared_from_this(), tls = tls_, generation = generation_](
                  const error_code& error, size_t) {
    if (generation != self->generation_) return;
    self->write_in_progress_ = false;
    if (error) {
      self->Fail(fmt::format("write to {} failed: {}", self->options_.endpoint.Describe(),
                             error.message()));
      return;
    }
    self->StartWrite();
  };
  if (tls_) {
    asio::async_write(tls_->stream, asio::buffer(writing_), std::move(done));
  } else {
    asio::async_write(socket_, asio::buffer(writing_), std::move(done));
  }
}

void NodeConnection::StartRead(uint64_t generation) {
  auto done = [self = shared_from_this(), tls = tls_, generation](const error_code& error,
                                                                  size_t bytes) {
    self->OnRead(generation, error, bytes);
  };
  if (tls_) {
    tls_->stream.async_read_some(asio::buffer(read_buffer_), std::move(done));
  } else {
    socket_.async_read_some(asio::buffer(read_buffer_), std::move(done));
  }
}

void NodeConnection::OnRead(uint64_t generation, const error_code& error, size_t bytes) {
  if (generation != generation_) return;
  if (error) {
    Fail(error == asio::error::eof
             ? fmt::format("redis at {} closed the connection", options_.endpoint.Describe())
             : fmt::format("read from {} failed: {}", options_.endpoint.Describe(),
                           error.message()));
    return;
  }
  last_progress_ = Clock::now();
  if (redisReaderFeed(reader_, read_buffer_.data(), bytes) != REDIS_OK) {
    Fail(fmt::format("protocol error from {}: {}", options_.endpoint.Describe(), reader_->errstr));
    return;
  }
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
      Fail(
          fmt::format("protocol error from {}: {}", options_.endpoint.Describe(), reader_->errstr));
      return;
    }
    if (raw == nullptr) break;
    Reply reply(static_cast<redisReply*>(raw));
    stats_.replies.Add();
    if (inflight_.empty()) {
      Fail(fmt::format("protocol error from {}: a reply ({}) with no command waiting for it",
                       options_.endpoint.Describe(), reply.Describe()));
      return;
    }
    Pending pending = std::move(inflight_.front());
    inflight_.pop_front();
    if (pending.abandoned) continue;
    stats_.latency.Record(Clock::now() - pending.sent_at);
    Result<Reply> result = ToResult(std::move(reply), options_);
    if (!result.ok()) stats_.CountError(result.error().code);
    Complete(std::move(pending.handler), std::move(result));
    // The handler may have stopped or reset this connection.
    if (generation != generation_) return;
  }
  StartRead(generation);
}

void NodeConnection::ArmTimer(Deadline deadline) {
  if (deadline_timer_armed_ && deadline >= deadline_timer_at_) return;
  deadline_timer_armed_ = true;
  deadline_timer_at_ = deadline;
  deadline_timer_.expires_at(deadline);
  deadline_timer_.async_wait([self = shared_from_this()](const error_code& error) {
    if (error == asio::error::operation_aborted) return;
    self->OnTimer();
  });
}

void NodeConnection::OnTimer() {
  deadline_timer_armed_ = false;
  if (state_ == State::kStopped) return;
  const Deadline now = Clock::now();
  std::vector<Completion> done;

  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->pending.deadline > now) {
      ++it;
      continue;
    }
    stats_.timeouts.Add();
    done.emplace_back(std::move(it->pending.handler),
                      MakeError(ErrorCode::kUnavailable, base::ErrorDetail::kDeadline,
                                "no link to redis at {} before the deadline ({}); not sent",
                                options_.endpoint.Describe(), last_error_));
    it = waiting_.erase(it);
  }
  for (auto& pending : inflight_) {
    if (pending.abandoned || pending.deadline > now) continue;
    stats_.timeouts.Add();
    pending.abandoned = true;
    done.emplace_back(std::move(pending.handler),
                      MakeError(ErrorCode::kUnknownOutcome, base::ErrorDetail::kDeadline,
                                "no reply from redis at {} before the deadline; the command was "
                                "sent and may have run",
                                options_.endpoint.Describe()));
  }

  if (!inflight_.empty() && state_ == State::kReady &&
      now - last_progress_ >= options_.stall_timeout) {
    Deliver(done);
    Fail(fmt::format(
        "no byte from redis at {} for {} ms with commands in flight; link declared dead",
        options_.endpoint.Describe(), options_.stall_timeout.count()));
    return;
  }

  Deadline next = Deadline::max();
  for (const auto& waiting : waiting_) next = std::min(next, waiting.pending.deadline);
  for (const auto& pending : inflight_) {
    if (!pending.abandoned) next = std::min(next, pending.deadline);
  }
  if (!inflight_.empty()) next = std::min(next, last_progress_ + options_.stall_timeout);
  if (next != Deadline::max()) ArmTimer(next);
  Deliver(done);
}

void NodeConnection::Fail(const std::string& reason) {
  if (state_ == State::kStopped) return;
  const bool was_ready = state_ == State::kReady;
  if (was_ready) {
    stats_.disconnects.Add();
    if (options_.on_link_lost) options_.on_link_lost();
    spdlog::warn("redis: {}; reconnecting", reason);
  } else {
    stats_.connect_failures.Add();
    if (backoff_attempt_ == 0) spdlog::warn("redis: {}; retrying with backoff", reason);
  }
  last_error_ = reason;
  std::vector<Completion> done;
  FailAll(reason, ErrorCode::kUnavailable, done);
  CloseLink();
  state_ = State::kBackoff;
  connect_timer_.expires_after(NextBackoff());
  connect_timer_.async_wait(
      [self = shared_from_this(), generation = generation_](const error_code& error) {
        if (error || generation != self->generation_ || self->state_ != State::kBackoff) return;
        self->Connect();
      });
  Deliver(done);
}

void NodeConnection::CloseLink() {
  ++generation_;
  error_code ignored;
  socket_.close(ignored);
  tls_.reset();  // the handlers of its operations still in flight keep it until they run
  resolver_.cancel();
  connect_timer_.cancel();
  if (reader_ != nullptr) {
    redisReaderFree(reader_);
    reader_ = nullptr;
  }
  out_.clear();
  writing_.clear();
  write_in_progress_ = false;
  unhanded_ = 0;
  handshake_left_ = 0;
}

void NodeConnection::FailAll(std::string_view reason, ErrorCode unsent_code,
                             std::vector<Completion>& out) {
  const size_t handed = inflight_.size() - unhanded_;
  size_t index = 0;
  for (auto& pending : inflight_) {
    const bool sent = index++ < handed;
    if (pending.abandoned) continue;
    if (sent) {
      out.emplace_back(std::move(pending.handler),
                       MakeError(ErrorCode::kUnknownOutcome,
                                 "{}; the command was sent and may have run", reason));
    } else {
      out.emplace_back(std::move(pending.handler), MakeError(unsent_code, "{}; not sent", reason));
    }
  }
  inflight_.clear();
  unhanded_ = 0;
  for (auto& waiting : waiting_) {
    out.emplace_back(std::move(waiting.pending.handler),
                     MakeError(unsent_code, "{}; not sent", reason));
  }
  waiting_.clear();
}

std::chrono::milliseconds NodeConnection::NextBackoff() {
  const int shift = std::min(backoff_attempt_++, 16);
  const auto ceiling =
      std::min<int64_t>(options_.backoff_max.count(), options_.backoff_initial.count() << shift);
  // Half fixed, half random: instances that lost Redis together do not return in lockstep.
  const int64_t half = std::max<int64_t>(ceiling / 2, 1);
  return std::chrono::milliseconds(half + static_cast<int64_t>(jitter_() % half));
}

void NodeConnection::Deliver(std::vector<Completion>& completions) {
  for (auto& [handler, result] : completions) {
    if (!result.ok()) stats_.CountError(result.error().code);
    Complete(std::move(handler), std::move(result));
  }
  completions.clear();
}

void NodeConnection::Post(ReplyHandler handler, Error error) {
  stats_.CountError(error.code);
  asio::post(executor_, asio::append(std::move(handler), Result<Reply>(std::move(error))));
}

}  // namespace flashsale::redis
