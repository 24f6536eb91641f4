#pragma once
// Settings of `flashsale serve` (and later `flashsale worker`). Each setting comes from, lowest
// first: its built-in default < the TOML config file < its environment variable < its flag.
//
// Setting `data_dir` (and likewise every field of ServeConfig) has
//   the flag          --data-dir VALUE         bools: --demo / --no-demo / --demo=false
//   the variable      FLASHSALE_DATA_DIR       bools: 1/0, true/false, yes/no (any case)
//   the TOML key      data-dir = "..."         data_dir is accepted too; TOML's own types:
//                                              threads = 4, demo = true,
//                                              access-log-sample = 0.5 (or "0.5")
// A list (cors-origin) is comma-separated in a flag or a variable (the flag may also be
// repeated), and a TOML array of strings or one comma-separated string in the file.
// The config file is named by --config FILE, else by FLASHSALE_CONFIG; an empty name means no file
// (so `--config ""` switches off a file named in the environment). There is no implicit file, and
// a named file that cannot be read is an error. Paths inside the file are taken as given, i.e.
// relative to the working directory, not to the file.
//
// The settings table (config.cc) parses each value once into its typed field of ServeConfig (an
// address, an enum, a duration, a fraction, a list), so the commands only wire typed values.
// Every value given is checked, including one that a higher source overrides: a broken file or
// variable is reported now rather than on the day the flag that hides it is removed. Errors are
// kInvalidArgument and name the setting and where its value came from:
//   setting 'threads' from FLASHSALE_THREADS: "abc" is not an integer
//   setting 'threads' from /etc/flashsale.toml:3: must be 0..256, not 300
//   unknown setting 'treads' in /etc/flashsale.toml:3; did you mean 'threads'?

#include <spdlog/common.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "server/identity.h"

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's name
class App;
class Option;
}  // namespace CLI

namespace flashsale::app {

// Where serve listens: HOST:PORT as the setting is written, parsed once.
struct HostPort {
  std::string host;  // an IPv4 address, "localhost", or an IPv6 address without its brackets
  uint16_t port = 0;

  // "127.0.0.1:8080", "[::1]:8080": as the setting writes it (an IPv6 host in brackets).
  std::string ToString() const;

  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// "127.0.0.1:8080", "localhost:80", "[::1]:8080": HOST an IPv4 address, localhost or [IPv6], PORT
// 1..65535. kInvalidArgument saying what is wrong, phrased to follow "setting 'listen' from X: ".
base::Result<HostPort> ParseHostPort(std::string_view text);

// When a reservation counts as acknowledged (docs/durability.md).
enum class Durability {
  kAsync,  // when Redis replies
  kWait,   // also confirmed by a replica (WAIT 1)
  kFsync,  // the private Redis fsyncs its AOF before replying
};

enum class LogFormat { kText, kJson };

// Each setting's typed value; field comments give what the setting means, the ranges are what
// Resolve accepts. A duration's setting is named by its unit ("read-timeout-ms").
struct ServeConfig {
  HostPort listen{"127.0.0.1", 8080};              // HOST:PORT; HOST IPv4, localhost or [IPv6]
  int64_t threads = 0;                             // 0: one per core; 0..256
  std::string data_dir = "./flashsale-data";       // embedded Redis, SQLite, generated secrets
  std::string redis_url;                           // empty: a private redis-server in data_dir
  std::string redis_server = "redis-server";       // the binary for the embedded server
  Durability durability = Durability::kAsync;      // async | wait | fsync
  std::chrono::milliseconds durability_wait{200};  // wait: WAIT's timeout, 1..60000 ms
  std::string db_url;                              // empty: sqlite:<data_dir>/flashsale.db
  std::string key_namespace = "fs";                // 1..64 of [A-Za-z0-9_.-]
  server::IdentityMode identity = server::IdentityMode::kToken;  // token | gateway | jwt
  std::string secret;          // empty: generated once into <data_dir>/secret
  std::string admin_token;     // empty: generated once into <data_dir>/admin-token
  std::string gateway_secret;  // gateway identity: X-Gateway-Secret; empty: off
  // jwt identity (service/jwt.h): the shop's access tokens checked against its JWKS
  std::string jwt_jwks;                        // a file or an https:// URL; required for jwt
  std::string jwt_issuer;                      // `iss` must equal it; required for jwt
  std::string jwt_audience;                    // `aud` must contain it; required for jwt
  std::string jwt_user_claim = "sub";          // the claim that names the user
  std::chrono::seconds jwt_leeway{30};         // clock skew allowed on exp and nbf, 0..600 s
  std::chrono::seconds jwt_jwks_refresh{300};  // how often the JWKS is read again, 1..86400 s
  bool demo = false;
  int64_t demo_stock = 100;                      // >= 0
  int64_t max_header_bytes = 8192;               // 1024..1048576
  int64_t max_body_bytes = 65536;                // 1024..16777216
  std::chrono::milliseconds read_timeout{5000};  // >= 1 ms, as are the other timeouts
  std::chrono::milliseconds idle_timeout{60000};
  int64_t max_connections = 10000;  // 0: no cap
  std::chrono::milliseconds shutdown_timeout{10000};
  std::chrono::milliseconds redis_timeout{1000};
  std::chrono::seconds idempotency_ttl{86400};   // >= 1 s
  std::chrono::milliseconds registry_poll{500};  // >= 10 ms
  int64_t consumers = 1;                         // order consumers in this process, 0..64
  int64_t consumer_batch = 100;                  // 1..10000
  int64_t consumer_nice = 19;                    // the order consumers' threads' nice value, 0..19
  int64_t consumer_burst_rate = 500;  // entries/s from which a stream's reads wait; 0: off
  std::chrono::milliseconds claim_idle{30000};       // >= 100 ms
  int64_t max_deliveries = 5;                        // 1..1000
  std::chrono::milliseconds prewarm_every{10000};    // 0: never
  std::chrono::milliseconds reconcile_every{60000};  // 0: never
  std::chrono::milliseconds rebuild_grace{20000};    // >= 0
  std::chrono::milliseconds expire_every{5000};      // 0: never
  bool trust_forwarded_for = false;
  std::vector<std::string> cors_origin;  // origins whose pages may call the public API (CORS)
  std::vector<std::string> webhook_url;  // receivers of the order events (service/event_relay.h)
  std::string amqp_url;  // a RabbitMQ receiver (service/amqp_publisher.h); empty: none
  std::string amqp_exchange = "flashsale.events";  // the exchange events are published to
  bool allow_evicting_redis = false;  // start on a Redis whose maxmemory-policy may evict
  spdlog::level::level_enum log_level = spdlog::level::info;  // trace|debug|info|warn|error
  LogFormat log_format = LogFormat::kText;                    // text | json (JSON lines on stderr)
  double access_log_sample = 0;  // a fraction 0..1 of requests logged (1 in round(1/x))

  friend bool operator==(const ServeConfig&, const ServeConfig&) = default;
};

// Looks up an environment variable: its value, or nullopt when it is not set. Injected so tests
// never touch the real process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The real environment (std::getenv). Not safe against a concurrent setenv; call at startup.
std::optional<std::string> EnvFromProcess(const std::string& name);

// The settings as options of a CLI11 command. Holds pointers to the options, which `command`
// owns: `command` must outlive this object. Adds nothing to `command` but the options, and a
// footer explaining the sources if it has no footer yet.
class ServeSettings {
 public:
  // Registers --config and one option per setting on `command` (an App or a subcommand). The
  // options hold the flags' raw text only; typing and checking happen in Resolve, so that flags
  // get the same messages as the file and the environment. Throws CLI::OptionAlreadyAdded if
  // `command` has one of these flags already (a programming error, found at startup).
  // A worker (Role::kWorker) gets no flags for the HTTP service's settings (listen, threads,
  // identity, ...); their file keys and variables are still accepted, and keep their defaults.
  enum class Role { kServe, kWorker };
  explicit ServeSettings(CLI::App& command, Role role = Role::kServe);

  // After `command` was parsed: the defaults overridden by the file, the environment and the
  // flags, in that order, every value checked. kInvalidArgument naming the setting and the
  // source on the first problem.
  base::Result<ServeConfig> Resolve(const EnvLookup& getenv) const;

  // After `command` was parsed: whether setting `name` ("listen") was given at all, by its flag,
  // its variable or the config file (a file that cannot be parsed counts as not giving it).
  bool Given(std::string_view name, const EnvLookup& getenv) const;

 private:
  CLI::Option* config_file_;
  std::vector<CLI::Option*> options_;  // one per setting, in the order of ServeConfig; nullptr
                                       // for a setting this role has no flag for
};

// A TOML config file with every setting commented out at its default, each with its help and
// its variable: the packaged /etc/flashsale/flashsale.toml (generated from the settings, so it
// cannot drift from them). Uncommenting any line gives a valid file.
std::string ConfigFileTemplate();

// The settings a chosen mode needs that `config` leaves empty (identity jwt: jwt-jwks, jwt-issuer
// and jwt-audience), one message each naming the setting, its flag and its variable; empty when
// none is missing. Serve refuses to start with the first; `config check` lists them all.
std::vector<std::string> MissingSettings(const ServeConfig& config);

// `flashsale config check FILE`: the settings of `file` and of the FLASHSALE_ variables, checked
// as serve and worker check them, but every problem reported, not only the first: one message
// per problem (each naming the setting and where it came from); empty when all is well. A file
// that cannot be read or parsed is one problem.
std::vector<std::string> CheckConfig(const std::string& file, const EnvLookup& getenv);

// What ParseServeConfig found: the resolved settings, or a request for help.
struct ServeCommandLine {
  ServeConfig config;               // the resolved settings; the defaults when help is set
  std::optional<std::string> help;  // --help was given: the help text, nothing was resolved
};

// Parses `args` (without the program name, e.g. {"--threads", "4"}) as the options of
// `flashsale serve` and resolves them. --help is not an error: the result carries the help
// text. Usage errors (an unknown flag, a missing value) and setting errors are kInvalidArgument.
// Never prints and never exits.
base::Result<ServeCommandLine> ParseServeConfig(std::vector<std::string> args,
                                                const EnvLookup& getenv);

}  // namespace flashsale::app
