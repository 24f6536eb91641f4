#include "app/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <toml++/toml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <sstream>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/token.h"
#include "server/cors.h"
#include "service/amqp_publisher.h"
#include "service/event_relay.h"

namespace flashsale::app {
namespace {

using base::ErrorCode;
using base::MakeError;
using base::Result;
using base::Status;

constexpr std::string_view kConfigEnv = "FLASHSALE_CONFIG";
constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

// What a setting's value is before it is typed: the TOML type the file gives it, and what the
// text of a flag or a variable is read as. A Raw holds the alternative of the same index.
enum class Shape { kText, kInteger, kSwitch, kFraction, kList };
using Raw = std::variant<std::string, int64_t, bool, double, std::vector<std::string>>;

// A setting's typed field in ServeConfig: how a raw value is checked and stored there, and how
// the field's value is shown (the defaults in --help and in the config file template).
struct Field {
  Shape shape = Shape::kText;
  // Checks `raw` (of this shape) and stores its typed value in `config`: "" when stored, else what
  // is wrong with it, phrased to follow "setting 'x' from SOURCE: ".
  std::function<std::string(Raw raw, ServeConfig& config)> store;
  // The field's value in `config` as a raw value of this shape.
  std::function<Raw(const ServeConfig& config)> show;
};

struct Setting {
  std::string_view name;  // the flag without its dashes and the TOML key: "data-dir"
  Field field;
  std::string_view placeholder;  // the value's name in --help
  std::string_view help;         // one line, without the default and the variable
};

// Checks a text setting's value (or a list's item): empty when it is valid, else what is wrong
// with it, phrased to follow "setting 'x' from SOURCE: ".
using TextCheck = std::string (*)(const std::string& value);

// Text as it is given, checked by `check` (nullptr: anything goes).
Field Text(std::string ServeConfig::*field, TextCheck check = nullptr) {
  return {.shape = Shape::kText,
          .store =
              [field, check](Raw raw, ServeConfig& config) {
                std::string& value = std::get<std::string>(raw);
                std::string problem = check == nullptr ? "" : check(value);
                if (problem.empty()) config.*field = std::move(value);
                return problem;
              },
          .show = [field](const ServeConfig& config) -> Raw { return config.*field; }};
}

// A list of text, each item checked by `check`: empty items (",," or a trailing comma) are
// refused, not skipped.
Field List(std::vector<std::string> ServeConfig::*field, TextCheck check) {
  return {.shape = Shape::kList,
          .store = [field, check](Raw raw, ServeConfig& config) -> std::string {
            auto& items = std::get<std::vector<std::string>>(raw);
            for (const std::string& item : items) {
              if (item.empty()) return "has an empty item";
              if (std::string problem = check(item); !problem.empty()) return problem;
            }
            config.*field = std::move(items);
            return "";
          },
          .show = [field](const ServeConfig& config) -> Raw { return config.*field; }};
}

Field Switch(bool ServeConfig::*field) {
  return {.shape = Shape::kSwitch,
          .store =
              [field](Raw raw, ServeConfig& config) {
                config.*field = std::get<bool>(raw);
                return std::string();
              },
          .show = [field](const ServeConfig& config) -> Raw { return config.*field; }};
}

// A whole number min..max (max kNoMax: no upper bound): a count, or a duration in its unit.
template <typename T>
requires std::is_same_v<T, int64_t> || std::is_same_v<T, std::chrono::milliseconds> ||
    std::is_same_v<T, std::chrono::seconds>
        Field Integer(T ServeConfig::*field, int64_t min, int64_t max = kNoMax) {
  return {.shape = Shape::kInteger,
          .store = [field, min, max](Raw raw, ServeConfig& config) -> std::string {
            const int64_t value = std::get<int64_t>(raw);
            if (value < min || value > max) {
              const std::string range =
                  max == kNoMax ? fmt::format("at least {}", min) : fmt::format("{}..{}", min, max);
              return fmt::format("must be {}, not {}", range, value);
            }
            config.*field = T(value);
            return "";
          },
          .show = [field](const ServeConfig& config) -> Raw {
            if constexpr (std::is_same_v<T, int64_t>) {
              return config.*field;
            } else {
              return static_cast<int64_t>((config.*field).count());
            }
          }};
}

// A fraction, 0..1.
Field Fraction(double ServeConfig::*field) {
  return {.shape = Shape::kFraction,
          .store = [field](Raw raw, ServeConfig& config) -> std::string {
            const double value = std::get<double>(raw);
            if (!std::isfinite(value) || value < 0 || value > 1) {
              return fmt::format("must be a number from 0 to 1, not {}", value);
            }
            config.*field = value;
            return "";
          },
          .show = [field](const ServeConfig& config) -> Raw { return config.*field; }};
}

// One of a few values, each by its name.
template <typename E>
struct Named {
  std::string_view name;
  E value;
};

// "a, b or c".
template <typename E>
std::string Alternatives(std::span<const Named<E>> names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i].name;
  }
  return out;
}

template <typename E>
Field Choice(E ServeConfig::*field, std::type_identity_t<std::span<const Named<E>>> names) {
  return {.shape = Shape::kText,
          .store = [field, names](Raw raw, ServeConfig& config) -> std::string {
            const std::string& text = std::get<std::string>(raw);
            for (const Named<E>& named : names) {
              if (named.name == text) {
                config.*field = named.value;
                return "";
              }
            }
            return fmt::format("must be {}, not \"{}\"", Alternatives(names), text);
          },
          .show = [field, names](const ServeConfig& config) -> Raw {
            for (const Named<E>& named : names) {
              if (named.value == config.*field) return std::string(named.name);
            }
            return std::string();
          }};
}

constexpr std::array<Named<Durability>, 3> kDurabilities{{
    {"async", Durability::kAsync},
    {"wait", Durability::kWait},
    {"fsync", Durability::kFsync},
}};
constexpr std::array<Named<server::IdentityMode>, 3> kIdentities{{
    {"token", server::IdentityMode::kToken},
    {"gateway", server::IdentityMode::kGateway},
    {"jwt", server::IdentityMode::kJwt},
}};
constexpr std::array<Named<spdlog::level::level_enum>, 5> kLogLevels{{
    {"trace", spdlog::level::trace},
    {"debug", spdlog::level::debug},
    {"info", spdlog::level::info},
    {"warn", spdlog::level::warn},
    {"error", spdlog::level::err},
}};
constexpr std::array<Named<LogFormat>, 2> kLogFormats{{
    {"text", LogFormat::kText},
    {"json", LogFormat::kJson},
}};

// HOST:PORT, parsed once into the address serve listens on.
Field Address(HostPort ServeConfig::*field) {
  return {.shape = Shape::kText,
          .store = [field](Raw raw, ServeConfig& config) -> std::string {
            Result<HostPort> address = ParseHostPort(std::get<std::string>(raw));
            if (!address.ok()) return address.error().message;
            config.*field = std::move(address).value();
            return "";
          },
          .show = [field](const ServeConfig& config) -> Raw { return (config.*field).ToString(); }};
}

std::string NotEmpty(const std::string& value) { return value.empty() ? "must not be empty" : ""; }

bool IsIpv4(const std::string& host) {
  in_addr address{};
  // Only the strict dotted quad: glibc's inet_pton refuses "1.2.3", "0x7f.0.0.1" and "01.2.3.4".
  return ::inet_pton(AF_INET, host.c_str(), &address) == 1;
}

bool IsIpv6(const std::string& host) {
  in6_addr address{};
  return ::inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

std::string CheckKeyNamespace(const std::string& value) {
  const bool allowed = std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-';
  });
  if (value.empty() || value.size() > 64 || !allowed) {
    return fmt::format("must be 1 to 64 characters of A-Z a-z 0-9 _ . -, not \"{}\"", value);
  }
  return "";
}

// The secret, the admin token and the gateway secret: empty (generated, or not asked), or at
// least core::kMinSecretBytes.
std::string CheckSecret(const std::string& value) {
  return value.empty() ? "" : core::SecretProblem(value);
}

// One origin of --cors-origin (server/cors.h).
std::string CheckCorsOrigin(const std::string& value) { return server::CheckOrigin(value); }

// One URL of --webhook-url (service/event_relay.h): https:// or http://host[:port][/path].
std::string CheckWebhookUrl(const std::string& value) {
  auto parsed = service::ParseWebhookUrl(value);
  return parsed.ok() ? "" : parsed.error().message;
}

// --amqp-url and --amqp-exchange (service/amqp_publisher.h): empty, or amqp://...; an exchange
// name AMQP allows.
std::string CheckAmqpUrl(const std::string& value) {
  if (value.empty()) return "";
  auto parsed = service::ParseAmqpUrl(value);
  return parsed.ok() ? "" : parsed.error().message;
}
std::string CheckAmqpExchange(const std::string& value) {
  auto checked = service::CheckExchangeName(value);
  return checked.ok() ? "" : checked.error().message;
}

// --jwt-jwks: a path, or an https:// URL (a JWKS over plain http could be swapped on the way).
std::string CheckJwks(const std::string& value) {
  if (value.starts_with("http://")) return "must be a file or an https:// URL, not http://";
  return "";
}

// Every setting, in the order of --help and of the config file template. The defaults come from
// ServeConfig itself.
const std::vector<Setting>& Settings() {
  static const std::vector<Setting> settings = {
      {.name = "listen",
       .field = Address(&ServeConfig::listen),
       .placeholder = "HOST:PORT",
       .help = "Address to serve HTTP on; HOST is an IPv4 address, localhost or [IPv6]"},
      {.name = "threads",
       .field = Integer(&ServeConfig::threads, 0, 256),
       .placeholder = "N",
       .help = "I/O threads, 0..256; 0 means one per core"},
      {.name = "data-dir",
       .field = Text(&ServeConfig::data_dir, NotEmpty),
       .placeholder = "DIR",
       .help = "Directory of the embedded Redis, the SQLite database and generated secrets"},
      {.name = "redis-url",
       .field = Text(&ServeConfig::redis_url),
       .placeholder = "URL",
       .help = "Redis to use, redis://[[user]:password@]host[:port][/db], rediss://... (TLS; "
               "?cacert=/ca.pem, else the system's CAs), unix:///path.sock or "
               "redis+cluster://host:port[,host:port...] (a Redis Cluster); empty starts a "
               "private redis-server in data-dir"},
      {.name = "redis-server",
       .field = Text(&ServeConfig::redis_server, NotEmpty),
       .placeholder = "PATH",
       .help = "The redis-server binary that runs the private Redis"},
      {.name = "durability",
       .field = Choice(&ServeConfig::durability, kDurabilities),
       .placeholder = "async|wait|fsync",
       .help = "When a reservation counts as acknowledged: async (when Redis replies), wait "
               "(also confirmed by a replica, WAIT 1; a Redis of yours with a replica), fsync "
               "(the private Redis fsyncs its AOF before replying)"},
      {.name = "durability-wait-ms",
       .field = Integer(&ServeConfig::durability_wait, 1, 60000),
       .placeholder = "MS",
       .help = "With durability wait: how long a reply waits for the replica before the buyer is "
               "told the outcome is unknown, 1..60000"},
      {.name = "db-url",
       .field = Text(&ServeConfig::db_url),
       .placeholder = "URL",
       .help = "Database of record, sqlite:/path.db or mysql://user[:password]@host[:port]/db "
               "(?socket=/path; TLS: ?ssl-mode=VERIFY_IDENTITY|VERIFY_CA|REQUIRED, "
               "&ssl-ca=/ca.pem, else the system's CAs); empty means "
               "sqlite:<data-dir>/flashsale.db"},
      {.name = "key-namespace",
       .field = Text(&ServeConfig::key_namespace, CheckKeyNamespace),
       .placeholder = "NAME",
       .help = "Prefix of every Redis key, 1 to 64 of A-Z a-z 0-9 _ . -; keeps deployments "
               "sharing a Redis apart"},
      {.name = "identity",
       .field = Choice(&ServeConfig::identity, kIdentities),
       .placeholder = "token|gateway|jwt",
       .help = "How requests say who the user is: token (bearer tokens signed with the secret), "
               "gateway (set by a trusted gateway in front) or jwt (the shop's own access "
               "tokens, checked against its JWKS: see the jwt- settings)"},
      {.name = "secret",
       .field = Text(&ServeConfig::secret, CheckSecret),
       .placeholder = "TEXT",
       .help = "HMAC key of tokens and of ids in Redis keys, 16 bytes or more; empty: generated "
               "once into <data-dir>/secret. Prefer the file or the variable: flags show in ps"},
      {.name = "admin-token",
       .field = Text(&ServeConfig::admin_token, CheckSecret),
       .placeholder = "TEXT",
       .help = "Bearer token of the admin API, 16 bytes or more; empty: generated once into "
               "<data-dir>/admin-token. Prefer the file or the variable: flags show in ps"},
      {.name = "gateway-secret",
       .field = Text(&ServeConfig::gateway_secret, CheckSecret),
       .placeholder = "TEXT",
       .help = "Gateway identity: a secret the gateway sends in X-Gateway-Secret with every user "
               "request, 16 bytes or more (compared in constant time; missing or wrong is 401); "
               "empty: not asked. Prefer the file or the variable: flags show in ps"},
      {.name = "jwt-jwks",
       .field = Text(&ServeConfig::jwt_jwks, CheckJwks),
       .placeholder = "FILE|URL",
       .help = "JWT identity: the identity provider's keys, a JWKS file or an https:// URL (the "
               "system's CAs, or SSL_CERT_FILE); read again every jwt-jwks-refresh-s, so keys "
               "rotate without a restart. Required with identity jwt"},
      {.name = "jwt-issuer",
       .field = Text(&ServeConfig::jwt_issuer),
       .placeholder = "TEXT",
       .help = "JWT identity: the iss every token must carry, exactly. Required with identity jwt"},
      {.name = "jwt-audience",
       .field = Text(&ServeConfig::jwt_audience),
       .placeholder = "TEXT",
       .help =
           "JWT identity: the aud every token must carry (or list). Required with identity jwt"},
      {.name = "jwt-user-claim",
       .field = Text(&ServeConfig::jwt_user_claim, NotEmpty),
       .placeholder = "CLAIM",
       .help = "JWT identity: the claim holding the user id; its value must be 1-64 characters "
               "of [A-Za-z0-9_.:@-]"},
      {.name = "jwt-leeway-s",
       .field = Integer(&ServeConfig::jwt_leeway, 0, 600),
       .placeholder = "SECONDS",
       .help = "JWT identity: clock skew allowed when checking exp and nbf, 0..600"},
      {.name = "jwt-jwks-refresh-s",
       .field = Integer(&ServeConfig::jwt_jwks_refresh, 1, 86400),
       .placeholder = "SECONDS",
       .help = "JWT identity: how often the JWKS is read again, 1..86400; a read that fails "
               "keeps the keys in use"},
      {.name = "demo",
       .field = Switch(&ServeConfig::demo),
       .help = "Demo mode: create the open activity 'demo' (see demo-stock) and take the user from "
               "X-User-Id (gateway identity)"},
      {.name = "demo-stock",
       .field = Integer(&ServeConfig::demo_stock, 0),
       .placeholder = "N",
       .help = "Units of the demo activity, >= 0"},
      {.name = "max-header-bytes",
       .field = Integer(&ServeConfig::max_header_bytes, 1024, 1048576),
       .placeholder = "BYTES",
       .help = "Largest request line and headers accepted, 1024..1048576"},
      {.name = "max-body-bytes",
       .field = Integer(&ServeConfig::max_body_bytes, 1024, 16777216),
       .placeholder = "BYTES",
       .help = "Largest request body accepted, 1024..16777216"},
      {.name = "read-timeout-ms",
       .field = Integer(&ServeConfig::read_timeout, 1),
       .placeholder = "MS",
       .help = "Time allowed to receive a whole request, >= 1"},
      {.name = "idle-timeout-ms",
       .field = Integer(&ServeConfig::idle_timeout, 1),
       .placeholder = "MS",
       .help = "Time a keep-alive connection may stay idle before it is closed, >= 1"},
      {.name = "max-connections",
       .field = Integer(&ServeConfig::max_connections, 0),
       .placeholder = "N",
       .help = "Connections served at once, over all threads; past it a new connection gets a "
               "minimal 503 and is closed, counted in flashsale_http_connections_refused_total "
               "(0: no cap)"},
      {.name = "shutdown-timeout-ms",
       .field = Integer(&ServeConfig::shutdown_timeout, 1),
       .placeholder = "MS",
       .help = "On shutdown, time given to requests in flight before they are cut off, >= 1"},
      {.name = "redis-timeout-ms",
       .field = Integer(&ServeConfig::redis_timeout, 1),
       .placeholder = "MS",
       .help = "Time to wait for a Redis reply before its outcome counts as unknown, >= 1"},
      {.name = "idempotency-ttl-s",
       .field = Integer(&ServeConfig::idempotency_ttl, 1),
       .placeholder = "SECONDS",
       .help = "How long a purchase's idempotency key is remembered with its answer, >= 1"},
      {.name = "registry-poll-ms",
       .field = Integer(&ServeConfig::registry_poll, 10),
       .placeholder = "MS",
       .help = "How often to look for activity changes made through other instances, >= 10"},
      {.name = "consumers",
       .field = Integer(&ServeConfig::consumers, 0, 64),
       .placeholder = "N",
       .help = "Order consumers run by this process, persisting order intents from the streams "
               "to the database, 0..64 (0: leave it to `flashsale worker` processes)"},
      {.name = "consumer-batch",
       .field = Integer(&ServeConfig::consumer_batch, 1, 10000),
       .placeholder = "N",
       .help = "Order intents written to the database per transaction, at most, 1..10000"},
      {.name = "consumer-nice",
       .field = Integer(&ServeConfig::consumer_nice, 0, 19),
       .placeholder = "N",
       .help = "Nice value of the order consumers' threads, 0..19: above 0 a burst's purchases "
               "get the CPU first and the record catches up after it (jobs and the lost-write "
               "repair keep normal priority)"},
      {.name = "consumer-burst-rate",
       .field = Integer(&ServeConfig::consumer_burst_rate, 0),
       .placeholder = "N",
       .help = "While an activity's order stream grows by N entries a second or more (a burst; "
               "a reserve call is one entry, however many purchases it batches), its consumers "
               "leave it unread for up to 10 s at a time, so the burst's purchases get Redis "
               "first; 0: never"},
      {.name = "claim-idle-ms",
       .field = Integer(&ServeConfig::claim_idle, 100),
       .placeholder = "MS",
       .help = "An order intent delivered but not acknowledged for this long is taken over by "
               "another consumer (its consumer is presumed dead), >= 100"},
      {.name = "max-deliveries",
       .field = Integer(&ServeConfig::max_deliveries, 1, 1000),
       .placeholder = "N",
       .help = "Failed deliveries after which an order intent moves to the dead-letter stream, "
               "1..1000"},
      {.name = "prewarm-every-ms",
       .field = Integer(&ServeConfig::prewarm_every, 0),
       .placeholder = "MS",
       .help = "How often the prewarm job runs (once across all instances): activities that "
               "have not started are loaded from the database into Redis; 0: never"},
      {.name = "reconcile-every-ms",
       .field = Integer(&ServeConfig::reconcile_every, 0),
       .placeholder = "MS",
       .help = "How often the reconciliation job runs (once across all instances): the "
               "invariant checked per activity, provable drift repaired; 0: never"},
      {.name = "expire-every-ms",
       .field = Integer(&ServeConfig::expire_every, 0),
       .placeholder = "MS",
       .help = "How often the expire job runs (once across all instances): reserved orders "
               "unpaid past their activity's payment window are cancelled, units returned; 0: "
               "never"},
      {.name = "rebuild-grace-ms",
       .field = Integer(&ServeConfig::rebuild_grace, 0),
       .placeholder = "MS",
       .help = "Reconciliation rebuilds an activity Redis lost this long after it first finds "
               "it missing (the sale stays stopped meanwhile)"},
      {.name = "trust-forwarded-for",
       .field = Switch(&ServeConfig::trust_forwarded_for),
       .help = "Take the client address from X-Forwarded-For; only behind a proxy that sets it"},
      {.name = "cors-origin",
       .field = List(&ServeConfig::cors_origin, CheckCorsOrigin),
       .placeholder = "ORIGIN,...",
       .help = "Origins whose pages may call the public API from a browser (CORS: purchase, "
               "draw, tickets, activities, config, orders; the admin routes never), each "
               "scheme://host[:port] as the browser sends it, comma-separated, or * for any; "
               "empty: none"},
      {.name = "webhook-url",
       .field = List(&ServeConfig::webhook_url, CheckWebhookUrl),
       .placeholder = "URL,...",
       .help = "Receivers of the order events (webhooks): each event POSTed as JSON, signed "
               "(X-Flashsale-Signature), retried, parked when it keeps failing; https:// (the "
               "certificate checked, SSL_CERT_FILE names other CAs) or http://host[:port][/path], "
               "comma-separated; empty: none"},
      {.name = "amqp-url",
       .field = Text(&ServeConfig::amqp_url, CheckAmqpUrl),
       .placeholder = "URL",
       .help = "A RabbitMQ broker that receives the order events: each published to "
               "--amqp-exchange with publisher confirms (routing key: the activity id; "
               "message-id: the event id), retried, parked when it keeps failing; "
               "amqp://user:password@host[:port][/vhost]; empty: none"},
      {.name = "amqp-exchange",
       .field = Text(&ServeConfig::amqp_exchange, CheckAmqpExchange),
       .placeholder = "NAME",
       .help = "The exchange --amqp-url publishes to; declared by the operator, with queues "
               "bound to it (a message no queue takes counts as not delivered)"},
      {.name = "allow-evicting-redis",
       .field = Switch(&ServeConfig::allow_evicting_redis),
       .help = "Start even on a Redis whose maxmemory-policy may evict keys without a TTL "
               "(allkeys-*), which can oversell or lose orders; refused otherwise"},
      {.name = "log-level",
       .field = Choice(&ServeConfig::log_level, kLogLevels),
       .placeholder = "LEVEL",
       .help = "Least severe log messages written: trace, debug, info, warn or error"},
      {.name = "log-format",
       .field = Choice(&ServeConfig::log_format, kLogFormats),
       .placeholder = "text|json",
       .help = "text, or json: one JSON object per line on stderr (time, level, message, and a "
               "request's method, target, status, activity, order_id, outcome where there is one)"},
      {.name = "access-log-sample",
       .field = Fraction(&ServeConfig::access_log_sample),
       .placeholder = "FRACTION",
       .help = "Fraction of HTTP requests written to the log, 0..1 (0.01: one in 100; 1: all; 0: "
               "none)"},
  };
  return settings;
}

// Settings of the HTTP service only: `flashsale worker` serves nothing, so its --help leaves them
// out. A config file or the environment may still set them (one file for serve and worker).
bool ServeOnly(const Setting& setting) {
  for (std::string_view name :
       {"threads", "redis-server", "identity", "secret", "admin-token", "demo", "demo-stock",
        "max-header-bytes", "max-body-bytes", "read-timeout-ms", "idle-timeout-ms",
        "shutdown-timeout-ms", "idempotency-ttl-s", "trust-forwarded-for", "cors-origin",
        "webhook-url", "amqp-url", "amqp-exchange"}) {
    if (setting.name == name) return true;
  }
  if (setting.name.starts_with("jwt-")) return true;  // the JWT identity's settings
  return false;
}

bool IsBool(const Setting& setting) { return setting.field.shape == Shape::kSwitch; }

bool IsList(const Setting& setting) { return setting.field.shape == Shape::kList; }

// "data-dir" -> "FLASHSALE_DATA_DIR".
std::string EnvName(std::string_view setting_name) {
  std::string name = "FLASHSALE_";
  for (char c : setting_name) {
    name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}
std::string EnvName(const Setting& setting) { return EnvName(setting.name); }

// "data-dir" -> "data_dir", the other spelling accepted in the file.
std::string Underscored(std::string_view name) {
  std::string result(name);
  std::replace(result.begin(), result.end(), '-', '_');
  return result;
}

// A number as TOML writes a float: "0.0", "0.5", "1.0".
std::string NumberText(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string TomlString(std::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Where a default is shown: in --help (127.0.0.1:8080; "" for empty text, none for an empty
// list), or in the config file template as TOML ("127.0.0.1:8080", []).
enum class Shown { kHelp, kToml };

std::string DefaultText(const Setting& setting, Shown shown = Shown::kHelp) {
  static const ServeConfig kDefaults;
  const Raw value = setting.field.show(kDefaults);
  const bool toml = shown == Shown::kToml;
  switch (setting.field.shape) {
    case Shape::kText: {
      const std::string& text = std::get<std::string>(value);
      if (toml) return TomlString(text);
      return text.empty() ? "\"\"" : text;
    }
    case Shape::kInteger:
      return std::to_string(std::get<int64_t>(value));
    case Shape::kSwitch:
      return std::get<bool>(value) ? "true" : "false";
    case Shape::kFraction:
      return NumberText(std::get<double>(value));
    case Shape::kList: {
      const auto& items = std::get<std::vector<std::string>>(value);
      if (toml) {
        std::vector<std::string> quoted;
        for (const std::string& item : items) quoted.push_back(TomlString(item));
        return fmt::format("[{}]", fmt::join(quoted, ", "));
      }
      return items.empty() ? "none" : fmt::format("{}", fmt::join(items, ","));
    }
  }
  return "";
}

base::Error SettingError(const Setting& setting, std::string_view source,
                         std::string_view problem) {
  return MakeError(ErrorCode::kInvalidArgument, "setting '{}' from {}: {}", setting.name, source,
                   problem);
}

// "a, b,c" as {"a", "b", "c"} (spaces around items dropped); "" as no item at all.
std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> items;
  if (text.find_first_not_of(' ') == std::string_view::npos) return items;
  for (size_t start = 0;;) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string_view item = text.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    items.emplace_back(item);
    if (comma == text.size()) break;
    start = comma + 1;
  }
  return items;
}

// The raw value of text from a flag or a variable (or a TOML string where a fraction or a list
// is meant); the error's message is the problem. Integers are plain decimal (an optional '-', no
// spaces); switches are 1/0, true/false or yes/no in any case.
Result<Raw> ReadText(Shape shape, const std::string& text) {
  const auto problem = [](std::string what) {
    return base::Error{ErrorCode::kInvalidArgument, std::move(what)};
  };
  switch (shape) {
    case Shape::kText:
      return Raw(text);
    case Shape::kList:
      return Raw(SplitList(text));
    case Shape::kInteger: {
      int64_t value = 0;
      const char* end = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(text.data(), end, value);
      if (text.empty() || ec == std::errc::invalid_argument || ptr != end) {
        return problem(fmt::format("\"{}\" is not an integer", text));
      }
      if (ec == std::errc::result_out_of_range) {
        return problem(fmt::format("\"{}\" does not fit in 64 bits", text));
      }
      return Raw(value);
    }
    case Shape::kFraction: {
      double value = 0;
      const char* end = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(text.data(), end, value);
      if (text.empty() || ec != std::errc() || ptr != end) {
        return problem(fmt::format("must be a number from 0 to 1, not \"{}\"", text));
      }
      return Raw(value);
    }
    case Shape::kSwitch:
      break;
  }
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "1" || lower == "true" || lower == "yes") return Raw(true);
  if (lower == "0" || lower == "false" || lower == "no") return Raw(false);
  return problem(fmt::format("\"{}\" is not a boolean (1/0, true/false, yes/no)", text));
}

std::string_view TypeName(toml::node_type type) {
  switch (type) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time:
      return "a date or time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

// The raw value of a value from the file: it must have the TOML type of the setting's shape (a
// quoted "4" is not an integer). A fraction is a TOML float or integer, or text as the
// environment gives it; a list an array of strings, or one comma-separated string.
Result<Raw> ReadToml(Shape shape, const toml::node& node) {
  const auto problem = [](std::string what) {
    return base::Error{ErrorCode::kInvalidArgument, std::move(what)};
  };
  if (shape == Shape::kFraction) {
    switch (node.type()) {
      case toml::node_type::floating_point:
        return Raw(node.as_floating_point()->get());
      case toml::node_type::integer:
        return Raw(static_cast<double>(node.as_integer()->get()));
      case toml::node_type::string:
        return ReadText(shape, node.as_string()->get());
      default:
        return problem(fmt::format("must be a number, not {}", TypeName(node.type())));
    }
  }
  if (shape == Shape::kList) {
    if (node.is_string()) return ReadText(shape, node.as_string()->get());
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      return problem(fmt::format("must be an array of strings or a comma-separated string, not {}",
                                 TypeName(node.type())));
    }
    std::vector<std::string> items;
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::node& item = *array->get(i);
      if (!item.is_string()) {
        return problem(
            fmt::format("must be an array of strings, not one holding {}", TypeName(item.type())));
      }
      items.push_back(item.as_string()->get());
    }
    return Raw(std::move(items));
  }
  toml::node_type expected = toml::node_type::boolean;
  if (shape == Shape::kText) {
    expected = toml::node_type::string;
  } else if (shape == Shape::kInteger) {
    expected = toml::node_type::integer;
  }
  if (node.type() != expected) {
    return problem(fmt::format("must be {}, not {}", TypeName(expected), TypeName(node.type())));
  }
  switch (expected) {
    case toml::node_type::string:
      return Raw(node.as_string()->get());
    case toml::node_type::integer:
      return Raw(node.as_integer()->get());
    default:
      return Raw(node.as_boolean()->get());
  }
}

// A raw value read for `setting` from `source`, checked and stored in its typed field.
Status Store(const Setting& setting, Result<Raw> raw, std::string_view source,
             ServeConfig& config) {
  if (!raw.ok()) return SettingError(setting, source, raw.error().message);
  std::string problem = setting.field.store(std::move(raw).value(), config);
  if (!problem.empty()) return SettingError(setting, source, problem);
  return {};
}

// Text from a flag or a variable.
Status ApplyText(const Setting& setting, const std::string& text, std::string_view source,
                 ServeConfig& config) {
  return Store(setting, ReadText(setting.field.shape, text), source, config);
}

// A value from the file.
Status ApplyToml(const Setting& setting, const toml::node& node, std::string_view source,
                 ServeConfig& config) {
  return Store(setting, ReadToml(setting.field.shape, node), source, config);
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "; did you mean 'threads'?" when a setting is within two edits of `key`, else "".
std::string Suggestion(std::string_view key) {
  const std::string dashed = [&] {
    std::string s(key);
    std::replace(s.begin(), s.end(), '_', '-');
    return s;
  }();
  const Setting* best = nullptr;
  size_t best_distance = 3;
  for (const Setting& setting : Settings()) {
    size_t distance = EditDistance(dashed, setting.name);
    if (distance < best_distance) {
      best = &setting;
      best_distance = distance;
    }
  }
  return best == nullptr ? "" : fmt::format("; did you mean '{}'?", best->name);
}

// The settings of the file at `path` applied to `config`. A file that cannot be read or parsed
// is an error at once; a setting's problem too, unless `problems` collects them (config check):
// then every key is tried and each problem added there.
Status ApplyFile(const std::string& path, std::string_view named_by, ServeConfig& config,
                 std::vector<std::string>* problems = nullptr) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {  // it would open, and read as empty
    return MakeError(ErrorCode::kInvalidArgument, "config file {} (from {}) is a directory", path,
                     named_by);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return MakeError(ErrorCode::kInvalidArgument, "config file {} (from {}) cannot be read: {}",
                     path, named_by, std::generic_category().message(errno));
  }
  std::stringstream content;
  content << in.rdbuf();
  if (in.bad()) {
    return MakeError(ErrorCode::kInvalidArgument, "config file {} (from {}) cannot be read", path,
                     named_by);
  }
  toml::table table;
  try {
    table = toml::parse(content.str(), path);
  } catch (const toml::parse_error& e) {
    return MakeError(ErrorCode::kInvalidArgument, "config file {}:{}:{}: {}", path,
                     e.source().begin.line, e.source().begin.column, e.description());
  }
  // Which setting each key names, to catch both spellings of one setting in the same file.
  std::vector<const toml::key*> seen(Settings().size(), nullptr);
  for (const auto& entry : table) {
    const toml::key& key = entry.first;
    const std::string location = fmt::format("{}:{}", path, key.source().begin.line);
    const auto& settings = Settings();
    auto it = std::find_if(settings.begin(), settings.end(), [&](const Setting& setting) {
      return key.str() == setting.name || key.str() == Underscored(setting.name);
    });
    Status applied;
    if (it == settings.end()) {
      applied = MakeError(ErrorCode::kInvalidArgument, "unknown setting '{}' in {}{}", key.str(),
                          location, Suggestion(key.str()));
    } else if (const toml::key*& previous = seen[static_cast<size_t>(it - settings.begin())];
               previous != nullptr) {
      applied = MakeError(ErrorCode::kInvalidArgument,
                          "setting '{}' is given twice in {}, as '{}' on line {} and as '{}' on "
                          "line {}",
                          it->name, path, previous->str(), previous->source().begin.line, key.str(),
                          key.source().begin.line);
    } else {
      previous = &key;
      applied = ApplyToml(*it, entry.second, location, config);
    }
    if (applied.ok()) continue;
    if (problems == nullptr) return applied;
    problems->push_back(applied.error().message);
  }
  return {};
}

}  // namespace

std::string HostPort::ToString() const {
  return host.find(':') == std::string::npos ? fmt::format("{}:{}", host, port)
                                             : fmt::format("[{}]:{}", host, port);
}

Result<HostPort> ParseHostPort(std::string_view text) {
  const auto not_host_port = [&] {
    return MakeError(ErrorCode::kInvalidArgument,
                     "\"{}\" is not HOST:PORT (HOST an IPv4 address, localhost or [IPv6])", text);
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return not_host_port();
  std::string host(text.substr(0, colon));
  const std::string_view port = text.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (!IsIpv6(host)) return not_host_port();
  } else if (!(host == "localhost" || IsIpv4(host))) {
    return not_host_port();
  }
  int number = 0;
  const char* end = port.data() + port.size();
  auto [ptr, ec] = std::from_chars(port.data(), end, number);
  if (port.empty() || ec != std::errc() || ptr != end || number < 1 || number > 65535) {
    return MakeError(ErrorCode::kInvalidArgument, "\"{}\": port \"{}\" is not 1..65535", text,
                     port);
  }
  return HostPort{.host = std::move(host), .port = static_cast<uint16_t>(number)};
}

std::optional<std::string> EnvFromProcess(const std::string& name) {
  const char* value = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe): at startup
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

ServeSettings::ServeSettings(CLI::App& command, Role role) {
  config_file_ = command.add_option("--config")
                     ->description(fmt::format(
                         "TOML file of settings, keys named as the flags (threads = 4); \"\" "
                         "means none (default: \"\"; env {})",
                         kConfigEnv))
                     ->type_name("FILE")
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  options_.reserve(Settings().size());
  for (const Setting& setting : Settings()) {
    if (role == Role::kWorker && ServeOnly(setting)) {
      options_.push_back(nullptr);
      continue;
    }
    const std::string flag = fmt::format("--{}", setting.name);
    std::string description = fmt::format("{} (default: {}; env {})", setting.help,
                                          DefaultText(setting), EnvName(setting));
    if (role == Role::kWorker && setting.name == "listen") {
      // A worker has no HTTP service: without the flag (or its variable or key) it serves
      // nothing, and with it only what operations need.
      description = fmt::format(
          "Address to serve /metrics, /healthz and /readyz on, HOST:PORT (default: none, no "
          "HTTP; env {})",
          EnvName(setting));
    }
    CLI::Option* option = nullptr;
    if (IsBool(setting)) {
      // --demo is true and --no-demo false, so a flag can undo a file or a variable; --demo=no
      // works too. The last one given wins.
      option = command.add_flag(fmt::format("{},!--no-{}", flag, setting.name));
    } else {
      // Plain text: typed and checked by Resolve. The last one given wins, so a wrapper script's
      // flags can be overridden by appending; a list takes every one given.
      option = command.add_option(flag)
                   ->type_name(std::string(setting.placeholder))
                   ->multi_option_policy(IsList(setting) ? CLI::MultiOptionPolicy::TakeAll
                                                         : CLI::MultiOptionPolicy::TakeLast);
    }
    option->description(description);
    options_.push_back(option);
  }
  if (command.get_footer().empty()) {
    command.footer(
        "Each setting comes from, lowest first: its default, the --config file, its FLASHSALE_ "
        "environment variable, its flag.");
  }
}

base::Result<ServeConfig> ServeSettings::Resolve(const EnvLookup& getenv) const {
  ServeConfig config;
  std::optional<std::string> file;
  std::string named_by;
  if (config_file_->count() > 0) {
    file = config_file_->as<std::string>();
    named_by = "--config";
  } else {
    file = getenv(std::string(kConfigEnv));
    named_by = kConfigEnv;
  }
  if (file.has_value() && !file->empty()) {
    Status applied = ApplyFile(*file, named_by, config);
    if (!applied.ok()) return std::move(applied).error();
  }

  const auto& settings = Settings();
  for (const Setting& setting : settings) {
    const std::string name = EnvName(setting);
    if (std::optional<std::string> value = getenv(name)) {
      Status applied = ApplyText(setting, *value, name, config);
      if (!applied.ok()) return std::move(applied).error();
    }
  }

  for (size_t i = 0; i < settings.size(); ++i) {
    if (options_[i] == nullptr || options_[i]->count() == 0) continue;
    // A bool flag's text is "true" for --demo, "false" for --no-demo, or what --demo= was given;
    // a list's flag may be repeated, its values joined as one comma-separated list.
    const std::string text = IsList(settings[i])
                                 ? fmt::format("{}", fmt::join(options_[i]->results(), ","))
                                 : options_[i]->as<std::string>();
    Status applied = ApplyText(settings[i], text, fmt::format("--{}", settings[i].name), config);
    if (!applied.ok()) return std::move(applied).error();
  }
  return config;
}

namespace {

// `text` as comment lines of at most ~98 columns.
void AppendWrapped(std::string_view text, std::string& out) {
  std::string line = "#";
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (line.size() + 1 + word.size() > 98 && line.size() > 1) {
      out += line + "\n";
      line = "#";
    }
    line += " ";
    line += word;
    start = end + 1;
  }
  out += line + "\n";
}

}  // namespace

std::string ConfigFileTemplate() {
  std::string out =
      "# flashsale settings (flashsale serve and flashsale worker --config FILE).\n"
      "# Every setting is shown commented out at its default. Each one can also be set by its\n"
      "# FLASHSALE_ environment variable or its --flag, which take precedence over this file.\n"
      "# Keys may be written with dashes or underscores (data-dir or data_dir).\n";
  for (const Setting& setting : Settings()) {
    out += "\n";
    AppendWrapped(fmt::format("{} (env {})", setting.help, EnvName(setting)), out);
    out += fmt::format("# {} = {}\n", setting.name, DefaultText(setting, Shown::kToml));
  }
  return out;
}

std::vector<std::string> MissingSettings(const ServeConfig& config) {
  std::vector<std::string> missing;
  if (config.identity != server::IdentityMode::kJwt || config.demo) return missing;
  struct Required {
    std::string_view name;
    const std::string& value;
  };
  for (const Required& required :
       {Required{"jwt-jwks", config.jwt_jwks}, Required{"jwt-issuer", config.jwt_issuer},
        Required{"jwt-audience", config.jwt_audience}}) {
    if (!required.value.empty()) continue;
    missing.push_back(fmt::format(
        "identity jwt needs the setting '{}' (--{} or {}); README.md, \"The shop's identity: "
        "JWT\", shows the values for an identity provider",
        required.name, required.name, EnvName(required.name)));
  }
  return missing;
}

std::vector<std::string> CheckConfig(const std::string& file, const EnvLookup& getenv) {
  std::vector<std::string> problems;
  ServeConfig config;
  if (Status read = ApplyFile(file, "the command line", config, &problems); !read.ok()) {
    problems.push_back(read.error().message);
  }
  // The variables override the file where serve and worker run; they are checked the same way.
  for (const Setting& setting : Settings()) {
    const std::string name = EnvName(setting);
    if (std::optional<std::string> value = getenv(name)) {
      if (Status applied = ApplyText(setting, *value, name, config); !applied.ok()) {
        problems.push_back(applied.error().message);
      }
    }
  }
  for (std::string& missing : MissingSettings(config)) problems.push_back(std::move(missing));
  return problems;
}

bool ServeSettings::Given(std::string_view name, const EnvLookup& getenv) const {
  const auto& settings = Settings();
  for (size_t i = 0; i < settings.size(); ++i) {
    if (settings[i].name != name) continue;
    // A setting this command does not take (a worker's HTTP settings) has no option.
    const bool flag_given = options_[i] != nullptr && options_[i]->count() > 0;
    if (flag_given || getenv(EnvName(settings[i])).has_value()) return true;
    std::optional<std::string> file = config_file_->count() > 0 ? config_file_->as<std::string>()
                                                                : getenv(std::string(kConfigEnv));
    if (!file.has_value() || file->empty()) return false;
    try {
      const toml::table table = toml::parse_file(*file);
      return table.contains(name) || table.contains(Underscored(name));
    } catch (const toml::parse_error&) {
      return false;
    }
  }
  return false;
}

base::Result<ServeCommandLine> ParseServeConfig(std::vector<std::string> args,
                                                const EnvLookup& getenv) {
  CLI::App command{"Run the flash-sale HTTP service", "flashsale serve"};
  ServeSettings settings(command);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    command.parse(args);
  } catch (const CLI::CallForHelp&) {
    return ServeCommandLine{.help = command.help()};
  } catch (const CLI::ParseError& e) {
    return MakeError(ErrorCode::kInvalidArgument, "{}", e.what());
  }
  Result<ServeConfig> config = settings.Resolve(getenv);
  if (!config.ok()) return std::move(config).error();
  return ServeCommandLine{.config = std::move(config).value()};
}

}  // namespace flashsale::app
