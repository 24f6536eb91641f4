#pragma once
// The HTTP server: one I/O thread per core (configurable), each with its own listening socket on
// the same port (SO_REUSEPORT: the kernel spreads connections), its own pipelined Redis
// connection and its own use-case context, so a request never crosses threads. Here: the threads,
// the listeners and the accept loop (with the connection cap), the registry poller, shutdown. A
// connection is served by server/session.h, a request answered by Dispatch (server/dispatch.h).
//
// Every wait has a timeout: the first byte of a request waits at most idle_timeout, the rest of
// it at most read_timeout (a slow-drip client is cut off), a reply's write at most read_timeout.
// Headers and bodies over their limits are refused (431, 413) and the connection closed.
//
// Shutdown (Stop): the listeners close, idle connections are closed, requests in flight finish
// and their connections close after the reply; after shutdown_timeout whatever is left is cut.
// Then the Redis connections stop and the threads end.

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "redis/connection.h"
#include "server/cors.h"
#include "server/identity.h"
#include "server/metrics.h"
#include "server/router.h"
#include "service/context.h"
#include "service/registry.h"
#include "store/store.h"

namespace flashsale::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port (see HttpServer::port)
  int threads = 1;
  size_t max_header_bytes = 8192;
  size_t max_body_bytes = 65536;
  std::chrono::milliseconds read_timeout{5000};
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds shutdown_timeout{10000};
  std::chrono::milliseconds registry_poll{500};
  // How often the first I/O thread writes the answers counted for the report after the sale
  // (Metrics::TakeAnswers, Store::AddAnswers); what is left is written when the server stops.
  std::chrono::milliseconds answers_every{2000};
  // The registry poller also runs the lost-write repair (a serve without order consumers has no
  // job schedule that would: service::PollRegistry).
  bool repairs = false;
  bool trust_forwarded_for = false;  // take the client address from X-Forwarded-For
  // Origins whose pages may call the public routes from a browser (server/cors.h); empty: none.
  std::vector<std::string> cors_origins;
  // The routes served; empty: every route (Routes()). `flashsale worker` serves OpsRoutes().
  std::span<const Route> routes;
  // Share the port with other listeners (SO_REUSEPORT, one per I/O thread). Off: the port is
  // this server's alone, and binding one another process holds fails.
  bool reuse_port = true;
  // The access log: one request in this many is logged (method, target, status, activity, order
  // id, outcome, latency; JSON fields with --log-format json). 0: none.
  int64_t access_log_every = 0;
  // Connections served at once, over all threads (0: no cap). Past it a new connection gets a
  // minimal 503 and is closed at once, counted in flashsale_http_connections_refused_total.
  size_t max_connections = 10000;
};

struct ServerDeps {
  redis::ConnectionOptions redis;  // one connection per I/O thread is made from these
  store::Store* store = nullptr;
  boost::asio::any_io_executor db_executor;
  service::ActivityRegistry* registry = nullptr;
  const service::ServiceSettings* service_settings = nullptr;
  IdentityConfig identity;
  const base::Clock* clock = nullptr;
  // Each I/O thread's random source (lottery draws, order ids).
  service::RandomFactory random = service::MakeSecureRandom;
  Metrics* metrics = nullptr;
};

class HttpServer {
 public:
  HttpServer(ServerOptions options, ServerDeps deps);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, loads the activity registry, and starts the threads. An error names the address.
  base::Status Start();
  uint16_t port() const { return port_; }
  // Graceful stop (see above). Blocks until done; idempotent.
  void Stop();

 private:
  class Worker;
  // Open connections over all threads and the ones refused past the cap (shared with the
  // metrics source, which may outlive the server).
  struct Connections {
    std::atomic<size_t> open{0};
    std::atomic<uint64_t> refused{0};
  };
  ServerOptions options_;
  CorsPolicy cors_;  // from options_.cors_origins
  std::shared_ptr<Connections> connections_ = std::make_shared<Connections>();
  ServerDeps deps_;
  uint16_t port_ = 0;
  bool stopped_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace flashsale::server
