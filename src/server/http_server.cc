#include "server/http_server.h"

#include <spdlog/spdlog.h>

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
#include <exception>
#include <iterator>
#include <optional>
#include <thread>

#include "base/process_stats.h"
#include "keyspace/embedded_scripts.h"
#include "redis/scripts.h"
#include "server/handlers.h"
#include "server/readiness.h"
#include "server/router.h"
#include "server/session.h"
#include "service/admin.h"
#include "service/blocking.h"

namespace flashsale::server {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);
using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

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
        runner_(redis_, keyspace::Scripts()),
        random_(deps.random()),
        service_(*deps.service_settings, runner_, *deps.store, deps.db_executor, *deps.registry,
                 *deps.clock, *random_),
        metrics_(deps.metrics->AddShard(&redis_->stats(), &service_.reserves(), &service_.draws())),
        services_{service_,
                  metrics_,
                  *deps.metrics,
                  deps_.identity,
                  [this] { return ProbeReadiness(*redis_, *deps_.store, deps_.db_executor); },
                  &draining_,
                  &cors_,
                  options.routes.empty() ? Routes() : options.routes,
                  options.trust_forwarded_for},
        poll_timer_(io_),
        answers_timer_(io_) {}

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
    asio::co_spawn(io_, sessions_.SweepDeadlines(stop_poll_), asio::detached);
    if (index_ == 0) {
      asio::co_spawn(io_,
                     service::PollRegistry(service_, options_.registry_poll, poll_timer_,
                                           &stop_poll_, options_.repairs),
                     asio::detached);
      if (deps_.metrics != nullptr) asio::co_spawn(io_, WriteAnswers(), asio::detached);
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
      sessions_.CancelIdle();
    });
  }
  // Cut every connection still open.
  void CutAll() {
    asio::post(io_, [this] { sessions_.CloseAll(); });
  }
  // Ends the background work; the thread ends when nothing is left to run.
  void Finish() {
    asio::post(io_, [this] {
      stop_poll_ = true;
      poll_timer_.cancel();
      answers_timer_.cancel();
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
  size_t sessions() const { return sessions_.open(); }

 private:
  // The answers counted on every I/O thread, written to the record every answers_every (the
  // report after the sale reads them). A write that fails gives its counts back for the next.
  asio::awaitable<void> WriteAnswers() {
    while (!stop_poll_) {
      answers_timer_.expires_after(options_.answers_every);
      co_await answers_timer_.async_wait(kUseTuple);
      if (stop_poll_) break;  // what is left is written by HttpServer::Stop
      const service::SnapshotPtr known = deps_.registry->Current();
      if (known == nullptr) continue;
      std::vector<store::AnswerCount> answers = deps_.metrics->TakeAnswers(*known);
      if (answers.empty()) continue;
      // A named lambda: GCC 12 destroys a temporary one in a co_await expression twice.
      const auto write = [store = deps_.store, answers] { return store->AddAnswers(answers); };
      auto written =
          co_await service::RunBlocking(deps_.db_executor, write, std::chrono::seconds(10));
      if (!written.has_value()) {
        // It may still finish: not given back, or it would be counted twice.
        spdlog::warn("the report's answer counts: the write did not finish in 10 s");
      } else if (!written->ok()) {
        spdlog::warn("the report's answer counts: {} (kept for the next write)",
                     written->error().message);
        deps_.metrics->GiveBackAnswers(std::move(answers));
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
      asio::co_spawn(io_, sessions_.Serve(std::move(socket)),
                     [&open = connections_.open](const std::exception_ptr&) { open.fetch_sub(1); });
    }
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
  asio::steady_timer answers_timer_;
  std::optional<tcp::acceptor> acceptor_;
  bool draining_ = false;
  bool stop_poll_ = false;
  Sessions sessions_{io_, options_, services_, draining_};
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
  // The answers counted since the last write (the threads are gone: nothing counts any more).
  if (deps_.metrics != nullptr) {
    if (const service::SnapshotPtr known = deps_.registry->Current(); known != nullptr) {
      const std::vector<store::AnswerCount> answers = deps_.metrics->TakeAnswers(*known);
      if (auto written = deps_.store->AddAnswers(answers); !written.ok()) {
        spdlog::warn("the report's answer counts of the last {} ms are lost: {}",
                     options_.answers_every.count(), written.error().message);
      }
    }
  }
}

}  // namespace flashsale::server
