#pragma once
// A whole flashsale HTTP server in the test process, on a free loopback port: real Redis (the
// given server), a real SQLite file in a temporary directory, a real thread pool for the
// database, and a manual clock the test moves.

#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "base/clock.h"
#include "server/http_server.h"
#include "store/sqlite_store.h"
#include "support/http_client.h"
#include "support/redis_server.h"

namespace flashsale::testing {

struct ServerFixtureOptions {
  server::IdentityMode mode = server::IdentityMode::kGateway;
  int threads = 2;
  std::string key_namespace;  // empty: a fresh one
  std::string data_dir;       // empty: a fresh temporary one (shared dirs share the SQLite file)
  server::ServerOptions server;
  std::string gateway_secret;  // gateway mode: X-Gateway-Secret required when set
  std::chrono::milliseconds redis_command_timeout{1000};  // a command's deadline
  size_t max_connections = 0;  // open connections served at once (0: no cap)
  // Non-zero: each I/O thread draws from base::SeededRandom(random_seed) instead of the CSPRNG,
  // so a test replays the same draws (a waiting room's order, issue 37).
  uint64_t random_seed = 0;
};

class ServerFixture {
 public:
  static constexpr std::string_view kAdminToken = "test-admin-token";
  static constexpr int64_t kStartMs = 1'800'000'000'000;  // the clock starts here

  ServerFixture(const RedisServer& redis, ServerFixtureOptions options = {});
  ~ServerFixture();

  uint16_t port() const { return server_->port(); }
  HttpClient Client() const { return HttpClient("127.0.0.1", port()); }
  std::map<std::string, std::string> Admin() const {
    return {{"Authorization", "Bearer " + std::string(kAdminToken)}};
  }
  static std::map<std::string, std::string> User(const std::string& id) {
    return {{"X-User-Id", id}};
  }
  base::ManualClock& clock() { return clock_; }
  const std::string& key_namespace() const { return settings_.key_namespace; }
  const std::string& data_dir() const { return data_dir_; }
  server::Metrics& metrics() { return metrics_; }
  const server::IdentityConfig& identity() const { return identity_; }
  void Stop() { server_->Stop(); }

 private:
  std::string data_dir_;
  bool own_dir_ = false;
  base::ManualClock clock_{kStartMs};
  boost::asio::thread_pool db_pool_{1};
  std::unique_ptr<store::SqliteStore> store_;
  service::ActivityRegistry registry_;
  service::ServiceSettings settings_;
  server::IdentityConfig identity_;
  server::Metrics metrics_;
  std::unique_ptr<server::HttpServer> server_;
};

}  // namespace flashsale::testing
