#pragma once
// Settings of `flashsale serve` (and `flashsale worker`): defaults < TOML file < environment <
// flags. Being filled in.

#include <cstdint>
#include <string>

namespace flashsale::app {

struct ServeConfig {
  std::string listen = "127.0.0.1:8080";
  int64_t threads = 0;                        // 0: one per core
  std::string data_dir = "./flashsale-data";  // embedded Redis, SQLite, generated secrets
  std::string redis_url;                      // empty: a private redis-server in data_dir
  std::string redis_server = "redis-server";  // the binary for the embedded server
  std::string db_url;                         // empty: sqlite:<data_dir>/flashsale.db
  std::string key_namespace = "fs";
  std::string identity = "token";  // token | gateway
  std::string secret;              // empty: generated once into <data_dir>/secret
  std::string admin_token;         // empty: generated once into <data_dir>/admin-token
  bool demo = false;
  int64_t demo_stock = 100;
  int64_t max_header_bytes = 8192;
  int64_t max_body_bytes = 65536;
  int64_t read_timeout_ms = 5000;
  int64_t idle_timeout_ms = 60000;
  int64_t shutdown_timeout_ms = 10000;
  int64_t redis_timeout_ms = 1000;
  int64_t idempotency_ttl_s = 86400;
  int64_t registry_poll_ms = 500;
  bool trust_forwarded_for = false;
  std::string log_level = "info";
};

}  // namespace flashsale::app
