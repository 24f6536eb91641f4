#include "server/http_server.h"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/write.hpp>
#include <charconv>
#include <iterator>
#include <list>
#include <memory_resource>
#include <optional>
#include <thread>

#include "base/log_format.h"
#include "base/process_stats.h"
#include "base/string_pool.h"
#include "redis/scripts.h"
#include "server/handlers.h"
#include "server/router.h"
#include "service/admin.h"

namespace flashsale::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);
using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

Reply ParseErrorReply(const error_code& error) {
  Reply reply;
  if (error == beast::http::error::header_limit) {
    reply = ErrorReply(http::status::request_header_fields_too_large, Word::kHeadersTooLarge,
                       "request headers are too large");
  } else if (error == beast::http::error::body_limit) {
    reply = ErrorReply(http::status::payload_too_large, Word::kPayloadTooLarge,
                       "request body is too large");
  } else {
    reply = ErrorReply(http::status::bad_request, Word::kBadRequest,
                       "malformed HTTP request: " + error.message());
  }
  reply.close = true;
  return reply;
}

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

// The listeners share the port through SO_REUSEPORT, which would let a second process (of the
// same user) join them too and take half the connections. A bind without SO_REUSEPORT fails
// while anyone listens on the port, so one before the listeners open tells a port that is taken
// apart (SO_REUSEADDR only lets it pass connections of an earlier run in TIME_WAIT).
base::Status ProbePortFree(const tcp::endpoint& endpoint) {
  asio::io_context io;
  tcp::acceptor probe(io);
  error_code error;
  probe.open(endpoint.protocol(), error);
  if (!error) probe.set_option(tcp::acceptor::reuse_address(true), error);
  if (!error) probe.bind(endpoint, error);
  if (error) {
    return base::MakeError(base::ErrorCode::kUnavailable, "listen on {}:{}: {}",
                           endpoint.address().to_string(), endpoint.port(),
                           error == asio::error::address_in_use
                               ? "address already in use (another process listens on it)"
                               : error.message());
  }
  return {};
}

}  // namespace

class HttpServer::Worker {
 public:
  Worker(int index, const ServerOptions& options, const ServerDeps& deps, Connections& connections,
         const CorsPolicy& cors)
      : connections_(connections),
        cors_(cors),
        index_(index),
        options_(options),
        deps_(deps),
        work_(asio::make_work_guard(io_)),
        redis_(redis::Connection::Create(io_.get_executor(), deps.redis)),
        runner_(redis_, redis::ScriptSet::Embedded()),
        random_(deps.random()),
        service_(*deps.service_settings, runner_, *deps.store, deps.db_executor, *deps.registry,
                 *deps.clock, *random_),
        metrics_(deps.metrics->AddShard(&redis_->stats(), &service_.reserves(), &service_.draws())),
        services_{
            service_,   metrics_, *deps.metrics, deps_.identity, [this] { return CheckReady(); },
            &draining_, &cors_},
        poll_timer_(io_) {}

  ~Worker() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  base::Status Listen(const tcp::endpoint& endpoint) {
    error_code error;
    acceptor_.emplace(io_);
    acceptor_->open(endpoint.protocol(), error);
    if (!error) acceptor_->set_option(tcp::acceptor::reuse_address(true), error);
    if (!error) acceptor_->set_option(ReusePort(options_.reuse_port), error);
    if (!error) acceptor_->bind(endpoint, error);
    if (!error) acceptor_->listen(asio::socket_base::max_listen_connections, error);
    if (error) {
      return base::MakeError(base::ErrorCode::kUnavailable, "listen on {}:{}: {}",
                             endpoint.address().to_string(), endpoint.port(), error.message());
    }
    return {};
  }
  uint16_t port() const { return acceptor_->local_endpoint().port(); }

  // Loads the registry on this thread before anything is served (worker 0 only).
  base::Status LoadRegistry() {
    auto future = asio::co_spawn(
        io_,
        [this]() -> asio::awaitable<std::optional<base::Error>> {
          auto status = co_await service::ReloadRegistry(service_);
          if (status.ok()) co_return std::nullopt;
          co_return std::move(status).error();
        },
        asio::use_future);
    io_.restart();
    while (future.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
      io_.run_one_for(std::chrono::milliseconds(50));
    }
    auto error = future.get();
    if (error) return *error;
    return {};
  }

  void Run() {
    redis_->Start();
    runner_.LoadAll(redis_->DefaultDeadline(),
                    asio::any_completion_handler<void(base::Status)>([](base::Status status) {
                      if (!status.ok()) {
                        spdlog::warn("scripts not preloaded ({}); they load on first use",
                                     status.error().message);
                      }
                    }));
    asio::co_spawn(io_, AcceptLoop(), asio::detached);
    asio::co_spawn(io_, SweepDeadlines(), asio::detached);
    if (index_ == 0) {
      asio::co_spawn(io_,
                     service::PollRegistry(service_, options_.registry_poll, poll_timer_,
                                           &stop_poll_, options_.repairs),
                     asio::detached);
    }
    io_.restart();
    thread_ = std::thread([this] {
      base::NameThisThread(fmt::format("fs-http-{}", index_));
      io_.run();
    });
  }

  // Stop accepting; close idle connections; busy ones close after their reply.
  void BeginDrain() {
    asio::post(io_, [this] {
      draining_ = true;
      error_code ignored;
      if (acceptor_) acceptor_->close(ignored);
      for (auto& session : sessions_) {
        if (session.idle) session.socket->cancel(ignored);
      }
    });
  }
  // Cut every connection still open.
  void CutAll() {
    asio::post(io_, [this] {
      error_code ignored;
      for (auto& session : sessions_) session.socket->close(ignored);
    });
  }
  // Ends the background work; the thread ends when nothing is left to run.
  void Finish() {
    asio::post(io_, [this] {
      stop_poll_ = true;
      poll_timer_.cancel();
      redis_->Stop();
      work_.reset();
    });
  }
  void Join(std::chrono::milliseconds grace) {
    const auto until = std::chrono::steady_clock::now() + grace;
    while (!io_.stopped() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    io_.stop();  // whatever still waits (a slow database call) is abandoned
    if (thread_.joinable()) thread_.join();
  }
  size_t sessions() const { return session_count_.load(); }

 private:
  struct SessionEntry {
    tcp::socket* socket;
    bool idle;
    std::chrono::steady_clock::time_point deadline;  // of the read or write in progress
  };

  // Deadlines without a timer per operation: every 100 ms one sweep closes the sockets whose
  // read or write is overdue, which ends their pending operation. Timeouts are therefore
  // accurate to 100 ms, which is plenty for 5 s read and 60 s idle limits, and the request path
  // pays no timer scheduling.
  asio::awaitable<void> SweepDeadlines() {
    asio::steady_timer timer(io_);
    while (!draining_ || !sessions_.empty()) {
      timer.expires_after(std::chrono::milliseconds(100));
      auto [error] = co_await timer.async_wait(kUseTuple);
      if (error || stop_poll_) co_return;
      const auto now = std::chrono::steady_clock::now();
      error_code ignored;
      for (auto& session : sessions_) {
        if (session.deadline <= now) session.socket->close(ignored);
      }
    }
  }

  asio::awaitable<void> AcceptLoop() {
    for (;;) {
      auto [error, socket] = co_await acceptor_->async_accept(kUseTuple);
      if (error) {
        if (error == asio::error::operation_aborted || !acceptor_->is_open()) co_return;
        // Out of file descriptors and the like: wait a moment rather than spin.
        spdlog::warn("accept failed: {}", error.message());
        asio::steady_timer pause(io_, std::chrono::milliseconds(50));
        co_await pause.async_wait(kUseTuple);
        continue;
      }
      error_code ignored;
      // Over the cap: a minimal 503 written without waiting (whatever the socket buffer takes),
      // then closed; the connections held are not disturbed.
      if (options_.max_connections > 0 &&
          connections_.open.fetch_add(1) >= options_.max_connections) {
        connections_.open.fetch_sub(1);
        connections_.refused.fetch_add(1);
        static constexpr std::string_view kRefusal =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            "Content-Length: 59\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
            "{\"status\":\"overloaded\",\"error\":\"too many open connections\"}";
        socket.non_blocking(true, ignored);
        socket.write_some(asio::buffer(kRefusal), ignored);
        socket.shutdown(tcp::socket::shutdown_both, ignored);
        socket.close(ignored);
        continue;
      }
      if (options_.max_connections == 0) connections_.open.fetch_add(1);
      socket.set_option(tcp::no_delay(true), ignored);
      socket.non_blocking(true, ignored);  // the session's direct writes never wait (Session)
      asio::co_spawn(io_, Session(std::move(socket)), asio::detached);
    }
  }

  std::string ClientAddress(const tcp::socket& socket) {
    error_code error;
    const auto endpoint = socket.remote_endpoint(error);
    return error ? std::string() : endpoint.address().to_string();
  }

  asio::awaitable<void> Session(tcp::socket socket) {
    const std::string peer = ClientAddress(socket);
    beast::flat_buffer buffer;
    std::string out;  // the reply's head being written; its capacity is reused
    // Where each request's fields and body are parsed: reset after every request, so requests
    // of the usual size reuse the same bytes (a larger one takes more from the heap, freed at
    // the next reset).
    std::array<std::byte, 4096> arena_bytes;
    std::pmr::monotonic_buffer_resource arena(arena_bytes.data(), arena_bytes.size());
    auto entry = sessions_.insert(sessions_.end(), SessionEntry{&socket, true, {}});
    // The clock is read three times a request: when it starts (its read deadline), before its
    // reply is written (the write's deadline) and after (its latency, and the idle deadline).
    auto now = std::chrono::steady_clock::now();
    ++session_count_;
    while (!draining_) {
      // Wait for the first byte of a request: an idle keep-alive connection.
      entry->idle = true;
      if (buffer.size() == 0) {
        entry->deadline = now + options_.idle_timeout;
        // The other ready connections of this thread go first (a post to the back of its
        // queue): under load, the client's next request has often come by then and the read
        // takes it at once. Read right after the reply, it would find nothing, a system call
        // that says EAGAIN before the reactor's wait; that was 0.8 of a read per request (0.2
        // to 0.5 with the post, as busy as the machine is: bench/README.md, seventh and eighth
        // looks). A lone connection loses only a trip through the queue.
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
      RouteId route = RouteId::kUnmatched;
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
        std::string_view address = peer;
        if (options_.trust_forwarded_for) {
          auto forwarded = request.find("X-Forwarded-For");
          if (forwarded != request.end()) {
            std::string_view first(forwarded->value().data(), forwarded->value().size());
            first = first.substr(0, first.find(','));
            while (!first.empty() && first.front() == ' ') first.remove_prefix(1);
            if (!first.empty() && first.size() <= 64) address = first;
          }
        }
        // The route's handler is awaited here, not in a coroutine of its own: a frame that
        // large would not fit Asio's recycling cache and cost an allocation per request.
        RouteMatch match;
        std::optional<Call> call;
        if (std::optional<Reply> early = Prepare(request, address, route, match, call)) {
          reply = std::move(*early);
        } else {
          try {
            reply = co_await match.route->handler(*call);
            reply = AdminDetail(*match.route, std::move(reply));
          } catch (const std::exception& e) {
            // Exceptions never come from bad input (that is a value); one here is our bug: it
            // becomes a 500 and a log line, never a crash.
            spdlog::error("handler for {} {} threw: {}", std::string(request.method_string()),
                          std::string(request.target()), e.what());
            reply = ErrorReply(http::status::internal_server_error, Word::kError, "internal error");
          }
        }
        if (cors_.enabled() && IsCrossOriginRoute(route)) AllowOrigin(request, reply);
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
      metrics_.Request(route, reply.word, now - start);
      if (sampled) LogAccess(method_text, target_text, reply, start);
      base::GiveString(std::move(reply.body));  // for the next reply's JSON (base/string_pool.h)
      if (write_error || !keep_alive) break;
    }
    error_code ignored;
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    socket.close(ignored);
    sessions_.erase(entry);
    --session_count_;
    connections_.open.fetch_sub(1);
  }

  // The route of a request and its call, with the caller authenticated; or the reply when there
  // is nothing to call (no route, a bad identity header, not authenticated).
  std::optional<Reply> Prepare(const Request& request, std::string_view address, RouteId& route_id,
                               RouteMatch& match, std::optional<Call>& call) {
    match = MatchRoute(options_.routes.empty() ? Routes() : options_.routes, request.method(),
                       request.target());
    if (match.route == nullptr) {
      if (!match.allow.empty()) {
        Reply reply = ErrorReply(http::status::method_not_allowed, Word::kMethodNotAllowed,
                                 "method not allowed; this path takes " + match.allow);
        reply.allow = std::move(match.allow);
        return reply;
      }
      return ErrorReply(http::status::not_found, Word::kNotFound, "no such route");
    }
    route_id = match.route->id;
    call.emplace(Call{request, match.params, match.query, {}, address, services_});
    if (match.route->access != Access::kPublic) {
      if (auto headers = CheckIdentityHeaders(request); !headers) {
        return ErrorReply(http::status::bad_request, Word::kBadRequest, headers.error().message);
      }
    }
    switch (match.route->access) {
      case Access::kPublic:
        break;
      case Access::kUser: {
        auto user = AuthenticateUser(deps_.identity, request, deps_.clock->NowMs());
        if (!user) {
          return ErrorReply(http::status::unauthorized, Word::kUnauthorized, user.error().message);
        }
        call->user_id = std::move(*user);
        break;
      }
      case Access::kAdmin:
        if (auto admin = AuthenticateAdmin(deps_.identity, request); !admin) {
          return ErrorReply(http::status::unauthorized, Word::kUnauthorized, admin.error().message);
        }
        break;
    }
    return std::nullopt;
  }

  // A cross-origin route's answer to a page of an allowed origin carries that origin (CORS); the
  // answer depends on the Origin header, which caches are told.
  void AllowOrigin(const Request& request, Reply& reply) const {
    reply.vary_origin = cors_.varies();
    const auto origin = request.find(http::field::origin);
    if (origin == request.end()) return;
    reply.allow_origin =
        cors_.AllowOrigin(std::string_view(origin->value().data(), origin->value().size()));
  }

  // The admin reads what failed where; the public reads words (ErrorToReply).
  static Reply AdminDetail(const Route& route, Reply reply) {
    if (route.access != Access::kAdmin || reply.detail.empty()) return reply;
    Reply detailed = ErrorReply(reply.status, reply.word, reply.detail);
    detailed.retry_after_s = reply.retry_after_s;
    return detailed;
  }

  // One access-log record: in text a line, with --log-format json the fields as JSON fields.
  static void LogAccess(std::string_view method, std::string_view target, const Reply& reply,
                        std::chrono::steady_clock::time_point start) {
    base::LogFields fields;
    fields.method = method.empty() ? std::string_view("-") : method;
    fields.target = target;
    fields.status = static_cast<int>(reply.status);
    fields.outcome = WordName(reply.word);
    fields.latency_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    // The activity of /api/v1/activities/{id}/... and /api/v1/admin/activities/{id}...
    for (std::string_view prefix : {"/api/v1/activities/", "/api/v1/admin/activities/"}) {
      if (target.starts_with(prefix)) {
        const std::string_view rest = target.substr(prefix.size());
        fields.activity = rest.substr(0, rest.find_first_of("/?"));
      }
    }
    // The order id a reply names (a reservation, a win, a payment).
    constexpr std::string_view kOrderKey = "\"order_id\":\"";
    if (const size_t at = reply.body.find(kOrderKey); at != std::string::npos) {
      const size_t from = at + kOrderKey.size();
      const size_t to = reply.body.find('"', from);
      if (to != std::string::npos)
        fields.order_id = std::string_view(reply.body).substr(from, to - from);
    }
    const base::ScopedLogFields scope(fields);
    spdlog::info("access {} {} {} activity={} order_id={} outcome={} {:.3f}ms", fields.method,
                 fields.target, fields.status, fields.activity.empty() ? "-" : fields.activity,
                 fields.order_id.empty() ? "-" : fields.order_id, fields.outcome,
                 fields.latency_ms);
  }

  asio::awaitable<WorkerServices::Readiness> CheckReady() {
    WorkerServices::Readiness problems;
    const redis::Command ping{"PING"};
    auto pong = co_await redis_->AsyncSend(
        ping, redis::Clock::now() + std::chrono::milliseconds(500), asio::use_awaitable);
    if (!pong.ok()) problems.redis = pong.error().message;
    auto db = co_await service::RunBlocking(
        deps_.db_executor, [store = deps_.store] { return store->Ping(); },
        std::chrono::milliseconds(1000));
    if (!db || !db->ok()) {
      problems.db = db ? db->error().message : std::string("no answer within 1000 ms");
    }
    co_return problems;
  }

  Connections& connections_;
  const CorsPolicy& cors_;
  // Declared first: destroyed last, after every object that uses it.
  asio::io_context io_{1};
  int index_;
  const ServerOptions& options_;
  const ServerDeps& deps_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::shared_ptr<redis::Connection> redis_;
  redis::ScriptRunner runner_;
  std::unique_ptr<base::Random> random_;  // before service_, which uses it
  service::ServiceContext service_;
  MetricsShard& metrics_;
  WorkerServices services_;
  asio::steady_timer poll_timer_;
  std::optional<tcp::acceptor> acceptor_;
  bool draining_ = false;
  bool stop_poll_ = false;
  std::list<SessionEntry> sessions_;
  std::atomic<size_t> session_count_{0};
  int64_t requests_seen_ = 0;  // for the access log's sampling (this thread's requests)
  std::thread thread_;
};

HttpServer::HttpServer(ServerOptions options, ServerDeps deps)
    : options_(std::move(options)), cors_(options_.cors_origins), deps_(std::move(deps)) {}

HttpServer::~HttpServer() { Stop(); }

base::Status HttpServer::Start() {
  error_code error;
  const auto address =
      asio::ip::make_address(options_.host == "localhost" ? "127.0.0.1" : options_.host, error);
  if (error) {
    return base::MakeError(base::ErrorCode::kInvalidArgument, "listen address '{}': {}",
                           options_.host, error.message());
  }
  const int threads = std::max(1, options_.threads);
  uint16_t port = options_.port;
  if (port != 0) {
    if (auto free = ProbePortFree(tcp::endpoint(address, port)); !free) return free;
  }
  for (int i = 0; i < threads; ++i) {
    auto worker = std::make_unique<Worker>(i, options_, deps_, *connections_, cors_);
    // With port 0 the first listener picks the port and the others join it.
    if (auto listening = worker->Listen(tcp::endpoint(address, port)); !listening) {
      workers_.clear();
      return listening;
    }
    port = worker->port();
    workers_.push_back(std::move(worker));
  }
  port_ = port;
  if (auto loaded = workers_[0]->LoadRegistry(); !loaded) {
    workers_.clear();
    return base::MakeError(loaded.error().code, "loading activities from the database: {}",
                           loaded.error().message);
  }
  if (deps_.metrics != nullptr) {
    deps_.metrics->AddSource([connections = connections_](std::string& out) {
      fmt::format_to(std::back_inserter(out),
                     "# HELP flashsale_http_connections_open Connections open now.\n"
                     "# TYPE flashsale_http_connections_open gauge\n"
                     "flashsale_http_connections_open {}\n"
                     "# HELP flashsale_http_connections_refused_total Connections refused past "
                     "--max-connections.\n"
                     "# TYPE flashsale_http_connections_refused_total counter\n"
                     "flashsale_http_connections_refused_total {}\n",
                     connections->open.load(), connections->refused.load());
    });
  }
  for (auto& worker : workers_) worker->Run();
  return {};
}

void HttpServer::Stop() {
  if (stopped_ || workers_.empty()) return;
  stopped_ = true;
  for (auto& worker : workers_) worker->BeginDrain();
  auto open = [&] {
    size_t total = 0;
    for (const auto& worker : workers_) total += worker->sessions();
    return total;
  };
  const auto until = std::chrono::steady_clock::now() + options_.shutdown_timeout;
  while (open() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (const size_t left = open(); left > 0) {
    spdlog::warn("shutdown: cutting {} connections still open after {} ms", left,
                 options_.shutdown_timeout.count());
    for (auto& worker : workers_) worker->CutAll();
  }
  for (auto& worker : workers_) worker->Finish();
  for (auto& worker : workers_) worker->Join(std::chrono::milliseconds(2000));
  workers_.clear();
}

}  // namespace flashsale::server
