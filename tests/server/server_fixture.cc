#include "server/server_fixture.h"

#include <atomic>
#include <memory>
#include <stdexcept>

namespace flashsale::testing {

ServerFixture::ServerFixture(const RedisServer& redis, ServerFixtureOptions options) {
  data_dir_ = options.data_dir;
  if (data_dir_.empty()) {
    std::string templ =
        (std::filesystem::temp_directory_path() / "flashsale-server-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    data_dir_ = templ;
    own_dir_ = true;
  }
  auto store = store::SqliteStore::Open(data_dir_ + "/flashsale.db");
  if (!store) throw std::runtime_error(store.error().ToString());
  store_ = std::move(*store);
  if (auto migrated = store_->Migrate(); !migrated) {
    throw std::runtime_error(migrated.error().ToString());
  }

  settings_.key_namespace =
      options.key_namespace.empty() ? UniqueNamespace() : options.key_namespace;
  settings_.secret = "test-secret";
  identity_.mode = options.mode;
  identity_.signer = core::TokenSigner(settings_.secret);
  identity_.admin_token = std::string(kAdminToken);
  identity_.gateway_secret = options.gateway_secret;

  server::ServerDeps deps;
  deps.redis.endpoint = *redis::ParseUrl(redis.unix_url());
  deps.redis.command_timeout = options.redis_command_timeout;
  deps.store = store_.get();
  deps.db_executor = db_pool_.get_executor();
  deps.registry = &registry_;
  deps.service_settings = &settings_;
  deps.identity = identity_;
  deps.clock = &clock_;
  deps.metrics = &metrics_;
  if (options.random_seed != 0) {
    // A seed of its own for each thread (their order ids must differ); the first thread's is
    // the seed itself.
    auto next = std::make_shared<std::atomic<uint64_t>>(options.random_seed);
    deps.random = [next]() -> std::unique_ptr<base::Random> {
      return std::make_unique<base::SeededRandom>(next->fetch_add(1));
    };
  }
  server::ServerOptions server_options = options.server;
  server_options.host = "127.0.0.1";
  server_options.port = 0;
  server_options.threads = options.threads;
  if (options.max_connections > 0) server_options.max_connections = options.max_connections;
  server_ = std::make_unique<server::HttpServer>(server_options, deps);
  if (auto started = server_->Start(); !started) {
    throw std::runtime_error(started.error().ToString());
  }
}

ServerFixture::~ServerFixture() {
  server_->Stop();
  db_pool_.join();
  store_.reset();
  if (own_dir_) {
    std::error_code ignored;
    std::filesystem::remove_all(data_dir_, ignored);
  }
}

}  // namespace flashsale::testing
