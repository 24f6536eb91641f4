#include "app/serve.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "app/redis_check.h"
#include "app/server_url.h"
#include "base/clock.h"
#include "base/crypto.h"
#include "base/ids.h"
#include "base/log_format.h"
#include "base/process_stats.h"
#include "core/token.h"
#include "keyspace/embedded_scripts.h"
#include "redis/scripts.h"
#include "server/http_server.h"
#include "service/admin.h"
#include "service/event_relay.h"
#include "service/jwt.h"
#include "service/pipeline.h"
#include "service/redis_watch.h"
#include "store/store.h"
#include "supervise/embedded_server.h"

namespace flashsale::app {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

// The level, and JSON lines on stderr for --log-format json.
void ConfigureLogs(const ServeConfig& config) {
  spdlog::set_level(config.log_level);
  if (config.log_format == LogFormat::kJson) base::UseJsonLogs();
}

// --access-log-sample (checked to be 0..1) as "one request in N"; 0: none.
int64_t AccessLogEvery(double fraction) {
  if (!(fraction > 0)) return 0;
  // A tiny fraction would overflow: one in a trillion is as good as never.
  return std::max<int64_t>(1, std::llround(std::min(1 / fraction, 1e12)));
}

// The database of record, opened and migrated to the newest schema.
Result<std::unique_ptr<store::Store>> OpenStore(const ServeConfig& config) {
  return store::OpenStore(config.db_url.empty() ? "sqlite:" + config.data_dir + "/flashsale.db"
                                                : config.db_url);
}

Result<redis::ConnectionOptions> RedisOptionsFor(const ServeConfig& config,
                                                 const std::string& url) {
  auto endpoint = redis::ParseUrl(url);
  if (!endpoint) return std::move(endpoint).error();
  redis::ConnectionOptions options;
  options.endpoint = *endpoint;
  options.command_timeout = config.redis_timeout;
  return options;
}

// The demo's two activities as they are now (a restarted demo may be sold out, closed or over).
struct DemoStates {
  service::ActivityState sale;
  service::ActivityState lottery;
};

// Creates the demo activities unless they exist, on a short-lived connection of their own, before
// the server loads its registry: the sale `demo` (open now for 30 days, limit 1) and the lottery
// `demo-lottery` (three prizes of different weights and stocks, a "no prize" weight, one draw per
// user). Their states after it, for the banner.
Result<DemoStates> CreateDemo(const ServeConfig& config,
                              const redis::ConnectionOptions& redis_options, store::Store& store,
                              const service::ServiceSettings& settings) {
  asio::io_context io;
  asio::thread_pool db(1);
  auto connection = redis::Connection::Create(io.get_executor(), redis_options);
  connection->Start();
  redis::ScriptRunner runner(connection, keyspace::Scripts());
  service::ActivityRegistry registry;
  base::SecureRandom random;
  service::ServiceContext context(settings, runner, store, db.get_executor(), registry,
                                  base::SystemClock::Instance(), random);
  DemoStates states;
  auto future = asio::co_spawn(
      io,
      [&]() -> asio::awaitable<std::optional<base::Error>> {
        const int64_t now = base::SystemClock::Instance().NowMs();
        core::Activity demo;
        demo.id = "demo";
        demo.title = "Demo flash sale";
        demo.start_ms = now;
        demo.end_ms = now + int64_t{30} * 24 * 3600 * 1000;
        demo.per_user_limit = 1;
        demo.stock = config.demo_stock;
        core::Activity lottery = demo;
        lottery.id = "demo-lottery";
        lottery.title = "Demo lottery";
        lottery.lottery = core::Lottery{.prizes = {{"grand", "Grand prize: a phone", 1, 1},
                                                   {"mug", "A flashsale mug", 5, 10},
                                                   {"coupon", "A 10% coupon", 24, 100}},
                                        .no_prize_weight = 70};
        lottery.stock = lottery.lottery->TotalStock();
        std::optional<base::Error> failed;
        for (const core::Activity* activity : {&demo, &lottery}) {
          auto state = co_await service::CreateActivity(context, *activity);
          if (!state.ok() && state.error().code == ErrorCode::kAlreadyExists) {
            // There from an earlier run: as it is now, which may be sold out or over.
            state = co_await service::GetActivityState(context, activity->id);
          }
          if (!state.ok()) {
            failed = std::move(state).error();
            break;
          }
          (activity == &demo ? states.sale : states.lottery) = std::move(*state);
        }
        connection->Stop();
        co_return failed;
      },
      asio::use_future);
  io.run();
  db.join();
  if (auto error = future.get()) return *error;
  return states;
}

service::PipelineDeps PipelineDepsFor(const ServeConfig& config,
                                      const redis::ConnectionOptions& redis, store::Store& store,
                                      asio::thread_pool& db, service::ActivityRegistry& registry,
                                      const service::ServiceSettings& settings,
                                      service::PipelineMetrics& metrics) {
  service::PipelineDeps deps;
  deps.redis = redis;
  // The consumer's connection waits on nothing long: XREADGROUP never blocks here.
  deps.store = &store;
  deps.db_executor = db.get_executor();
  deps.registry = &registry;
  deps.settings = &settings;
  deps.clock = &base::SystemClock::Instance();
  deps.metrics = &metrics;
  deps.jobs.prewarm_every = config.prewarm_every;
  deps.jobs.reconcile_every = config.reconcile_every;
  deps.jobs.expire_every = config.expire_every;
  return deps;
}

// What serve and worker share of the service's settings (serve adds its secret).
service::ServiceSettings SettingsFor(const ServeConfig& config) {
  service::ServiceSettings settings;
  settings.key_namespace = config.key_namespace;
  settings.idempotency_ttl_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(config.idempotency_ttl).count();
  settings.rebuild_grace = config.rebuild_grace;
  if (config.durability == Durability::kWait) {
    settings.wait_replicas = 1;
    settings.wait_timeout = config.durability_wait;
  }
  return settings;
}

service::ConsumerOptions ConsumerOptionsFor(const ServeConfig& config) {
  service::ConsumerOptions options;
  options.name = service::OrderPipeline::DefaultName();
  options.batch = config.consumer_batch;
  options.nice = static_cast<int>(config.consumer_nice);
  options.burst_rate = config.consumer_burst_rate;
  options.claim_idle = config.claim_idle;
  options.max_deliveries = config.max_deliveries;
  return options;
}

// fsync is a setting of the private Redis; wait needs a replica, which only a Redis of yours
// can have (the private one listens on a unix socket only).
base::Status CheckDurability(const ServeConfig& config) {
  if (config.durability == Durability::kFsync && !config.redis_url.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "setting 'durability': fsync applies to the private Redis only; with "
                     "redis-url, set 'appendfsync always' on your Redis (and keep durability "
                     "async), or use durability wait with a replica");
  }
  if (config.durability == Durability::kWait && config.redis_url.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "setting 'durability': wait needs a Redis with a replica (redis-url); the "
                     "private Redis has none: use durability fsync for it");
  }
  return {};
}

}  // namespace

Result<std::string> ReadSecretFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kNotFound, "{} does not exist", path);
  std::string secret;
  std::getline(in, secret);
  if (std::string problem = core::SecretProblem(secret); !problem.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "the secret in {} {}", path, problem);
  }
  return secret;
}

Result<std::string> ReadOrCreateSecret(const std::string& path) {
  auto read = ReadSecretFile(path);
  if (read.ok() || read.error().code != ErrorCode::kNotFound) return read;
  const std::string secret = base::RandomHex(32);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return MakeError(ErrorCode::kUnavailable, "create {}: {}", path, std::strerror(errno));
  const std::string line = secret + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) return MakeError(ErrorCode::kUnavailable, "write {}", path);
  return secret;
}

namespace {

// The data directory, and the two secrets kept in it unless configured.
struct Secrets {
  std::string secret;       // signs tokens; key ids are derived from it
  std::string admin_token;  // the operators' bearer token
};

Result<Secrets> PrepareDataDir(const ServeConfig& config) {
  std::error_code fs_error;
  std::filesystem::create_directories(config.data_dir, fs_error);
  if (fs_error) {
    return MakeError(ErrorCode::kUnavailable, "data directory {}: {}", config.data_dir,
                     fs_error.message());
  }
  Secrets secrets{config.secret, config.admin_token};
  if (secrets.secret.empty()) {
    auto generated = ReadOrCreateSecret(config.data_dir + "/secret");
    if (!generated) return std::move(generated).error();
    secrets.secret = *generated;
  }
  if (secrets.admin_token.empty()) {
    auto generated = ReadOrCreateSecret(config.data_dir + "/admin-token");
    if (!generated) return std::move(generated).error();
    secrets.admin_token = *generated;
  }
  return secrets;
}

// Redis: the URL given, or a private redis-server in the data directory, supervised (restarted
// from its AOF when it dies; see supervise/embedded_server.h).
struct ServeRedis {
  std::unique_ptr<supervise::EmbeddedServer> embedded;  // null with redis-url
  redis::ConnectionOptions options;
};

Result<ServeRedis> StartRedis(const ServeConfig& config) {
  if (auto durability = CheckDurability(config); !durability) return durability.error();
  ServeRedis redis;
  std::string redis_url = config.redis_url;
  if (redis_url.empty()) {
    auto started = supervise::EmbeddedServer::Start(
        {.data_dir = config.data_dir,
         .binary = config.redis_server,
         .appendfsync = config.durability == Durability::kFsync ? "always" : "everysec",
         .supervise = true});
    if (!started) return std::move(started).error();
    redis.embedded = std::move(*started);
    redis_url = redis.embedded->url();
  }
  auto options = RedisOptionsFor(config, redis_url);
  if (!options) return std::move(options).error();
  if (auto policy = CheckEvictionPolicy(*options, config.allow_evicting_redis); !policy) {
    return policy.error();
  }
  redis.options = std::move(*options);
  return redis;
}

server::ServerOptions ServerOptionsFor(const ServeConfig& config) {
  server::ServerOptions options;
  options.host = config.listen.host;
  options.port = config.listen.port;
  options.threads = config.threads > 0 ? static_cast<int>(config.threads)
                                       : static_cast<int>(std::thread::hardware_concurrency());
  options.max_header_bytes = static_cast<size_t>(config.max_header_bytes);
  options.max_body_bytes = static_cast<size_t>(config.max_body_bytes);
  options.read_timeout = config.read_timeout;
  options.idle_timeout = config.idle_timeout;
  options.max_connections = static_cast<size_t>(config.max_connections);
  options.shutdown_timeout = config.shutdown_timeout;
  options.registry_poll = config.registry_poll;
  // Without order consumers there is no job schedule to run the lost-write repair (the start-up
  // check among them): the registry poller runs it.
  options.repairs = config.consumers <= 0;
  options.trust_forwarded_for = config.trust_forwarded_for;
  options.cors_origins = config.cors_origin;
  options.access_log_every = AccessLogEvery(config.access_log_sample);
  return options;
}

// Gateway identity (X-User-Id) when configured, and always for --demo; else tokens.
bool GatewayIdentity(const ServeConfig& config) {
  return config.identity == server::IdentityMode::kGateway || config.demo;
}

// --identity jwt: the verifier of the shop's JWTs and the refresher keeping its keys fresh. The
// settings jwt identity needs are checked first, and the JWKS is read once now: serve does not
// start with a verifier that would refuse every buyer.
struct JwtIdentity {
  std::shared_ptr<service::JwtVerifier> verifier;
  std::unique_ptr<service::JwksRefresher> refresher;
};

Result<JwtIdentity> StartJwtIdentity(const ServeConfig& config) {
  JwtIdentity jwt;
  if (config.identity != server::IdentityMode::kJwt || config.demo) return jwt;
  if (std::vector<std::string> missing = MissingSettings(config); !missing.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "{}", missing.front());
  }
  jwt.verifier = std::make_shared<service::JwtVerifier>(
      service::JwtSettings{.issuer = config.jwt_issuer,
                           .audience = config.jwt_audience,
                           .user_claim = config.jwt_user_claim,
                           .leeway = config.jwt_leeway},
      base::SystemClock::Instance());
  auto refresher = service::JwksRefresher::Start(
      {.source = config.jwt_jwks, .refresh_every = config.jwt_jwks_refresh}, *jwt.verifier);
  if (!refresher) {
    return MakeError(ErrorCode::kInvalidArgument, "setting 'jwt-jwks': {}",
                     refresher.error().message);
  }
  jwt.refresher = std::move(*refresher);
  return jwt;
}

server::IdentityConfig IdentityFor(const ServeConfig& config, const Secrets& secrets) {
  server::IdentityConfig identity;
  identity.mode = GatewayIdentity(config)                         ? server::IdentityMode::kGateway
                  : config.identity == server::IdentityMode::kJwt ? server::IdentityMode::kJwt
                                                                  : server::IdentityMode::kToken;
  identity.signer = core::TokenSigner(secrets.secret);
  identity.admin_token = secrets.admin_token;
  identity.gateway_secret = config.gateway_secret;
  return identity;
}

// What the HTTP server runs on (serve adds the identity its routes check).
server::ServerDeps ServerDepsFor(const redis::ConnectionOptions& redis_options, store::Store& store,
                                 asio::thread_pool& db_pool, service::ActivityRegistry& registry,
                                 const service::ServiceSettings& settings,
                                 server::Metrics& metrics) {
  server::ServerDeps deps;
  deps.redis = redis_options;
  deps.store = &store;
  deps.db_executor = db_pool.get_executor();
  deps.registry = &registry;
  deps.service_settings = &settings;
  deps.clock = &base::SystemClock::Instance();
  deps.metrics = &metrics;
  return deps;
}

// /metrics beyond the server's own: the order pipeline, the Redis watch, the private
// redis-server's restarts.
void AddServeMetrics(server::Metrics& metrics, service::PipelineMetrics& pipeline_metrics,
                     service::RedisWatch& redis_watch, const supervise::EmbeddedServer* embedded) {
  metrics.AddSource(
      [&pipeline_metrics](std::string& out) { pipeline_metrics.AppendPrometheus(out); });
  metrics.AddSource([&redis_watch](std::string& out) { redis_watch.AppendPrometheus(out); });
  if (embedded == nullptr) return;
  metrics.AddSource([embedded](std::string& out) {
    out += fmt::format(
        "# HELP flashsale_embedded_redis_restarts_total Times the private redis-server was "
        "restarted after it exited.\n# TYPE flashsale_embedded_redis_restarts_total counter\n"
        "flashsale_embedded_redis_restarts_total {}\n"
        "# HELP flashsale_embedded_redis_up 1 while the private redis-server runs.\n"
        "# TYPE flashsale_embedded_redis_up gauge\nflashsale_embedded_redis_up {}\n",
        embedded->restarts(), embedded->up() ? 1 : 0);
  });
}

// The consumers' job schedule runs the lost-write repair for the Redis found at startup, so the
// sale opens unfrozen: a bounded wait (10 s: a Redis that cannot be reached must not keep
// /healthz and /readyz from answering; without consumers a worker must run it).
void WaitForStartupRepair(const ServeConfig& config, const service::ServiceSettings& settings,
                          const service::RedisWatch& redis_watch) {
  for (int waited = 0; config.consumers > 0 && settings.redis_watch != nullptr &&
                       redis_watch.frozen() && waited < 100;
       ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (settings.redis_watch != nullptr && redis_watch.frozen()) {
    if (config.consumers > 0) {
      spdlog::warn(
          "the start-up check of Redis has not finished yet: purchases and draws wait "
          "for it");
    } else {
      spdlog::info(
          "no order consumers here: the registry poller runs the start-up check of Redis "
          "once the service listens; purchases and draws wait for it");
    }
  }
}

// The URL of the listeners on `listen`'s host and the port they were given.
std::string BaseUrl(const HostPort& listen, uint16_t port) {
  return "http://" + HostPort{.host = listen.host, .port = port}.ToString();
}

// The URL a client on this machine reaches the listeners at: a wildcard address is reached on
// loopback.
std::string LocalUrl(const HostPort& listen, uint16_t port) {
  HostPort local = listen;
  if (local.host == "0.0.0.0") local.host = "127.0.0.1";
  if (local.host == "::") local.host = "::1";
  return BaseUrl(local, port);
}

// What a demo activity is now, in words: "activity 'demo' is open with 100 units", "... is open
// with 97 of 100 units left", "... is sold out (100 units)", "... is closed ...", "... has ended".
std::string DemoActivityText(const service::ActivityState& state, std::string_view what,
                             std::string_view units, int64_t now_ms) {
  const core::Activity& activity = state.record.activity;
  const int64_t total = state.record.total_units;
  const std::string name = fmt::format("{} '{}'", what, activity.id);
  if (now_ms >= activity.end_ms) return name + " has ended";
  if (!state.redis || !state.redis->found) {
    return fmt::format("{} has {} {} (Redis did not say how many are left)", name, total, units);
  }
  const int64_t left = state.redis->remaining;
  const bool open = state.redis->state == "open";
  if (left == 0) return fmt::format("{} is sold out ({} {})", name, total, units);
  const std::string stock = left == total ? fmt::format("{} {}", total, units)
                                          : fmt::format("{} of {} {} left", left, total, units);
  return fmt::format("{} is {} with {}", name, open ? "open" : "closed", stock);
}

void PrintBanner(const ServeConfig& config, uint16_t port, int threads,
                 const redis::ConnectionOptions& redis_options, const store::Store& store,
                 const std::optional<DemoStates>& demo) {
  const std::string base_url = BaseUrl(config.listen, port);
  std::cout << fmt::format("flashsale serving on {}  ({} threads; redis {}; db {}; {} identity)\n",
                           base_url, threads, redis_options.endpoint.Describe(), store.Describe(),
                           GatewayIdentity(config)                         ? "gateway (X-User-Id)"
                           : config.identity == server::IdentityMode::kJwt ? "jwt (Bearer, JWKS)"
                                                                           : "token (Bearer)");
  if (demo) {
    // What is true now: a restarted demo keeps its sale, which may be sold out or over.
    const int64_t now_ms = base::SystemClock::Instance().NowMs();
    std::cout << fmt::format(
        "demo: {}, one per user; {}, one draw per user\n"
        "  open  {}/\n"
        "  try   curl -s -X POST -H 'X-User-Id: alice' {}/api/v1/activities/demo/purchase\n"
        "        curl -s -X POST -H 'X-User-Id: alice' {}/api/v1/activities/demo-lottery/draw\n",
        DemoActivityText(demo->sale, "activity", "units", now_ms),
        DemoActivityText(demo->lottery, "lottery", "prizes", now_ms), base_url, base_url, base_url);
  }
  std::cout << fmt::format("admin token: {}\n", config.admin_token.empty()
                                                    ? "in " + config.data_dir + "/admin-token"
                                                    : std::string("as configured"));
  std::cout.flush();
}

// Redis restarting or failing over is noticed on every connection (on a Redis Cluster, per
// node); purchases and draws are frozen until the lost-write repair ran
// (service/redis_watch.h).
void HookRedisWatch(service::RedisWatch& watch, redis::ConnectionOptions& options,
                    service::ServiceSettings& settings) {
  watch.Hook(options);
  settings.redis_watch = &watch;
}

// Until SIGINT or SIGTERM; logs the signal and what happens next.
void WaitForSignal(std::string_view what_next) {
  asio::io_context signals_io;
  asio::signal_set signals(signals_io, SIGINT, SIGTERM);
  signals.async_wait([what_next](const boost::system::error_code&, int signal) {
    spdlog::info("signal {}: {}", signal, what_next);
  });
  signals_io.run();
}

// A worker never starts Redis: the one given, or the one `serve` runs in the data directory.
Result<redis::ConnectionOptions> WorkerRedis(const ServeConfig& config) {
  const std::string redis_url =
      config.redis_url.empty()
          ? "unix://" + std::filesystem::absolute(config.data_dir).string() + "/redis.sock"
          : config.redis_url;
  auto options = RedisOptionsFor(config, redis_url);
  if (!options) return std::move(options).error();
  if (auto policy = CheckEvictionPolicy(*options, config.allow_evicting_redis); !policy) {
    return policy.error();
  }
  return options;
}

// A worker's /healthz, /readyz and /metrics: one I/O thread, a port of its own (two workers, or a
// worker and a serve, never share one by accident).
server::ServerOptions OpsServerOptionsFor(const ServeConfig& config) {
  server::ServerOptions options;
  options.host = config.listen.host;
  options.port = config.listen.port;
  options.threads = 1;
  options.routes = server::OpsRoutes();
  options.reuse_port = false;
  options.registry_poll = config.registry_poll;
  options.shutdown_timeout = config.shutdown_timeout;
  return options;
}

}  // namespace

int RunServe(const ServeConfig& config) {
  ConfigureLogs(config);
  auto fail = [](const base::Error& error) {
    spdlog::error("{}", error.message);
    return 1;
  };
  auto secrets = PrepareDataDir(config);
  if (!secrets) return fail(secrets.error());
  auto jwt = StartJwtIdentity(config);  // --identity jwt: its settings checked, its keys read
  if (!jwt) return fail(jwt.error());
  auto served = StartRedis(config);
  if (!served) return fail(served.error());
  const redis::ConnectionOptions& redis_options = served->options;
  auto store = OpenStore(config);
  if (!store) return fail(store.error());

  service::ServiceSettings settings = SettingsFor(config);
  settings.secret = secrets->secret;
  service::RedisWatch redis_watch(base::SystemClock::Instance());
  HookRedisWatch(redis_watch, served->options, settings);
  std::optional<DemoStates> demo;
  if (config.demo) {
    auto created = CreateDemo(config, redis_options, **store, settings);
    if (!created) return fail(created.error());
    demo = std::move(*created);
  }

  const server::ServerOptions options = ServerOptionsFor(config);
  asio::thread_pool db_pool(1);
  asio::post(db_pool, [] { base::NameThisThread("fs-db"); });
  service::ActivityRegistry registry;
  server::Metrics metrics;
  server::ServerDeps deps =
      ServerDepsFor(redis_options, **store, db_pool, registry, settings, metrics);
  deps.identity = IdentityFor(config, *secrets);
  deps.identity.jwt = jwt->verifier;
  service::PipelineMetrics pipeline_metrics;
  AddServeMetrics(metrics, pipeline_metrics, redis_watch, served->embedded.get());

  // The order consumers share the server's registry (its first I/O thread keeps it fresh). They
  // start first, so that the repair for the Redis found at startup can run before the sale opens.
  service::PipelineDeps pipeline_deps = PipelineDepsFor(config, redis_options, **store, db_pool,
                                                        registry, settings, pipeline_metrics);
  // Webhooks: relayed by serve, which holds the secret their key is derived from (one instance
  // at a time, under the job lock "webhooks").
  pipeline_deps.webhooks.urls = config.webhook_url;
  pipeline_deps.webhooks.key = service::WebhookKey(secrets->secret);
  // RabbitMQ: one more receiver of the same relay (service/amqp_publisher.h).
  pipeline_deps.webhooks.amqp.url = config.amqp_url;
  pipeline_deps.webhooks.amqp.exchange = config.amqp_exchange;
  // And each activity's own webhook URLs (core::Activity::webhook_urls), read at each pass.
  pipeline_deps.webhooks.activity_webhooks = true;
  service::OrderPipeline pipeline(std::move(pipeline_deps), ConsumerOptionsFor(config),
                                  static_cast<int>(config.consumers),
                                  /*poll_registry=*/false, options.registry_poll);
  if (auto started = pipeline.Start(); !started) {
    db_pool.join();
    return fail(started.error());
  }
  WaitForStartupRepair(config, settings, redis_watch);
  server::HttpServer server(options, deps);
  if (auto started = server.Start(); !started) {
    pipeline.Stop();
    db_pool.join();
    return fail(started.error());
  }
  PrintBanner(config, server.port(), options.threads, redis_options, **store, demo);
  // Where the command line finds this serve (app/server_url.h), from now until it stops.
  const std::string local_url = LocalUrl(config.listen, server.port());
  if (auto written = WriteServerUrl(config.data_dir, local_url); !written) {
    spdlog::warn("{}: the command line will not find this serve by its --data-dir",
                 written.error().message);
  }
  WaitForSignal("draining and stopping");

  server.Stop();
  RemoveServerUrl(config.data_dir, local_url);
  pipeline.Stop();
  db_pool.join();
  if (served->embedded) served->embedded->Stop();
  spdlog::info("stopped");
  return 0;
}

int RunWorker(const ServeConfig& config, bool serve_http) {
  ConfigureLogs(config);
  auto fail = [](const base::Error& error) {
    spdlog::error("{}", error.message);
    return 1;
  };
  if (config.consumers < 1) {
    return fail(MakeError(ErrorCode::kInvalidArgument, "setting 'consumers': a worker needs >= 1"));
  }
  auto redis_options = WorkerRedis(config);
  if (!redis_options) return fail(redis_options.error());
  auto store = OpenStore(config);
  if (!store) return fail(store.error());

  service::ServiceSettings settings = SettingsFor(config);
  service::RedisWatch redis_watch(base::SystemClock::Instance());
  HookRedisWatch(redis_watch, *redis_options, settings);  // as in serve
  asio::thread_pool db_pool(1);
  asio::post(db_pool, [] { base::NameThisThread("fs-db"); });
  service::ActivityRegistry registry;
  service::PipelineMetrics pipeline_metrics;
  service::OrderPipeline pipeline(PipelineDepsFor(config, *redis_options, **store, db_pool,
                                                  registry, settings, pipeline_metrics),
                                  ConsumerOptionsFor(config), static_cast<int>(config.consumers),
                                  /*poll_registry=*/true, config.registry_poll);
  if (auto started = pipeline.Start(); !started) {
    db_pool.join();
    return fail(started.error());
  }
  // /healthz, /readyz and /metrics on the listen address, when one was given.
  server::Metrics metrics;
  metrics.AddSource(
      [&pipeline_metrics](std::string& out) { pipeline_metrics.AppendPrometheus(out); });
  service::ActivityRegistry http_registry;
  std::optional<server::HttpServer> http;
  std::string serving;
  if (serve_http) {
    http.emplace(OpsServerOptionsFor(config),
                 ServerDepsFor(*redis_options, **store, db_pool, http_registry, settings, metrics));
    if (auto started = http->Start(); !started) {
      pipeline.Stop();
      db_pool.join();
      return fail(started.error());
    }
    serving = "; /metrics, /healthz, /readyz on " + BaseUrl(config.listen, http->port());
  }
  std::cout << fmt::format("flashsale worker: {} order consumer(s); redis {}; db {}{}\n",
                           config.consumers, redis_options->endpoint.Describe(),
                           (*store)->Describe(), serving);
  std::cout.flush();
  WaitForSignal("stopping the consumers");
  if (http) http->Stop();
  pipeline.Stop();
  db_pool.join();
  spdlog::info("stopped: {} orders persisted, {} duplicates, {} dead letters",
               pipeline_metrics.persisted.value(), pipeline_metrics.duplicates.value(),
               pipeline_metrics.dead_letters.value());
  return 0;
}

int RunWebhookKey(const std::string& secret_given, const std::string& data_dir) {
  std::string secret = secret_given;
  if (secret.empty()) {
    auto read = ReadSecretFile(data_dir + "/secret");
    if (!read) {
      std::cerr << "flashsale webhooks key: give --secret, or the --data-dir where `flashsale "
                   "serve` keeps its secret ("
                << read.error().message << ")\n";
      return 2;
    }
    secret = std::move(*read);
  } else if (std::string problem = core::SecretProblem(secret); !problem.empty()) {
    std::cerr << "flashsale webhooks key: --secret " << problem << "\n";
    return 2;
  }
  std::cout << base::HexEncode(service::WebhookKey(secret)) << "\n";
  return 0;
}

int RunToken(const std::string& user_id, int64_t ttl_s, const std::string& secret_given,
             const std::string& data_dir) {
  if (!base::IsValidId(user_id)) {
    std::cerr << "user id must be 1-64 characters of [A-Za-z0-9_.:@-]\n";
    return 2;
  }
  std::string secret = secret_given;
  if (!secret.empty()) {
    if (std::string problem = core::SecretProblem(secret); !problem.empty()) {
      std::cerr << "flashsale token: --secret (or FLASHSALE_SECRET) " << problem << "\n";
      return 2;
    }
  } else {
    auto read = ReadSecretFile(data_dir + "/secret");
    if (!read && read.error().code == ErrorCode::kNotFound) {
      std::cerr << "no secret: give --secret, or the --data-dir where `flashsale serve` keeps one ("
                << read.error().message << ")\n";
      return 2;
    }
    if (!read) {
      std::cerr << "flashsale token: " << read.error().message << "\n";
      return 2;
    }
    secret = std::move(*read);
  }
  const int64_t expires_ms = base::SystemClock::Instance().NowMs() + ttl_s * 1000;
  std::cout << core::TokenSigner(secret).Issue(user_id, expires_ms) << "\n";
  return 0;
}

}  // namespace flashsale::app
