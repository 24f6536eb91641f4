#include "app/load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/url/parse.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "app/admin_client.h"
#include "app/serve.h"
#include "app/server_url.h"
#include "base/redact.h"
#include "core/token.h"
#include "load/load_generator.h"
#include "load/verify.h"

namespace flashsale::app {

struct LoadFlags {
  std::vector<std::string> urls;  // empty: found as app/server_url.h says
  std::string activity = "demo";
  std::string action = "purchase";
  std::string mode = "closed";
  int connections = 64;
  int threads = 1;
  int64_t requests = 0;
  double duration_s = 0;
  double rate = 0;
  int64_t burst = 0;
  double within_s = 1;
  int64_t users = 1000000;
  std::string user_ids = "random";
  std::string user_prefix = "u";
  uint64_t seed = 1;
  std::string identity;  // empty: the server's, as GET /api/v1/config says (token by default)
  std::string token_secret;
  std::string data_dir;
  std::string redis_url;
  std::string db_url;
  std::string key_namespace;
  bool verify = true;
  bool verify_given = false;
  int64_t drain_timeout_ms = 30000;
  int64_t connect_timeout_ms = 5000;
  int64_t request_timeout_ms = 10000;
};

namespace {

// What to load: the instances, the activity, the action.
void AddTargetFlags(CLI::App& command, LoadFlags& f) {
  command
      .add_option("--url", f.urls,
                  "The flashsale to load, http://host:port; several instances of one sale: "
                  "comma-separated or repeated, the connections spread over them (default: "
                  "FLASHSALE_URL, else the URL serve wrote into <data-dir>/url, else "
                  "http://127.0.0.1:8080)")
      ->delimiter(',');
  command.add_option("--activity", f.activity, "The activity")->capture_default_str();
  command.add_option("--action", f.action, "purchase or draw")
      ->check(CLI::IsMember({"purchase", "draw"}))
      ->capture_default_str();
}

// The load's shape: loop, concurrency, amount, arrivals, users.
void AddShapeFlags(CLI::App& command, LoadFlags& f) {
  command
      .add_option("--mode", f.mode,
                  "closed: fixed concurrency, each connection sends when answered; open: a fixed "
                  "arrival rate (--rate), latency from the intended send time")
      ->check(CLI::IsMember({"closed", "open"}))
      ->capture_default_str();
  command.add_option("--connections", f.connections, "Keep-alive connections")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  command.add_option("--threads", f.threads, "I/O threads of the load generator")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  command.add_option("--requests", f.requests, "Requests to send (0: until --duration)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--duration", f.duration_s, "Seconds to send for (0: until --requests)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--rate", f.rate, "Open loop: requests per second")
      ->check(CLI::NonNegativeNumber);
  command
      .add_option("--burst", f.burst,
                  "A burst: this many users arrive within --within seconds of the opening (the "
                  "open loop at burst/within per second)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--within", f.within_s, "Seconds the --burst arrives within")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--users", f.users, "User ids are <prefix><n>, n in [0, users)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 62))
      ->capture_default_str();
  command
      .add_option("--user-ids", f.user_ids,
                  "random: uniform among --users; sequential: request i is user i mod --users")
      ->check(CLI::IsMember({"random", "sequential"}))
      ->capture_default_str();
  command.add_option("--user-prefix", f.user_prefix, "Prefix of the user ids")
      ->capture_default_str();
  command.add_option("--seed", f.seed, "Seed of the random user ids")->capture_default_str();
}

// Who the users are, and where the sale is verified afterwards.
void AddIdentityAndVerifyFlags(CLI::App& command, LoadFlags& f) {
  command
      .add_option("--identity", f.identity,
                  "token: bearer tokens signed with --secret or the secret in --data-dir; "
                  "gateway: X-User-Id (default: what the server runs, from GET /api/v1/config; "
                  "if it does not answer, token when there is a secret)")
      ->check(CLI::IsMember({"gateway", "token"}));
  // The names serve uses; --token-secret and --namespace are the old names, kept hidden.
  command.add_option("--secret", f.token_secret, "The server's secret (token identity)")
      ->envname("FLASHSALE_SECRET");
  command.add_option("--token-secret", f.token_secret)->group("");
  command.add_option("--data-dir", f.data_dir,
                     "The data directory of the running `flashsale serve`: its Redis socket, "
                     "SQLite file and secret (turns --verify on)");
  command.add_option("--redis-url", f.redis_url, "The sale's Redis, to verify against");
  command.add_option("--db-url", f.db_url, "The sale's database, to verify against");
  command.add_option("--key-namespace", f.key_namespace, "The server's Redis key namespace (fs)");
  command.add_option("--namespace", f.key_namespace)->group("");
  command
      .add_flag("--verify,!--no-verify", f.verify,
                "Verify the sale against Redis and the database at the end (default: on when "
                "--data-dir, --redis-url, --db-url or --key-namespace is given)")
      ->each([flags = &f](const std::string&) { flags->verify_given = true; });
  command
      .add_option("--drain-timeout-ms", f.drain_timeout_ms,
                  "Verify: how long to wait for the order pipeline to drain")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// Deadlines of the load's connections and requests.
void AddTimeoutFlags(CLI::App& command, LoadFlags& f) {
  command.add_option("--connect-timeout-ms", f.connect_timeout_ms, "Connect deadline")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("--request-timeout-ms", f.request_timeout_ms, "Deadline of each request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

}  // namespace

LoadCommand::LoadCommand(CLI::App& command) : flags_(std::make_unique<LoadFlags>()) {
  AddTargetFlags(command, *flags_);
  AddShapeFlags(command, *flags_);
  AddIdentityAndVerifyFlags(command, *flags_);
  AddTimeoutFlags(command, *flags_);
}

LoadCommand::~LoadCommand() = default;

namespace {

// Thousands of connections need thousands of descriptors: the soft limit up to the hard one.
void RaiseFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

base::Error Usage(std::string message) {
  return base::Error{base::ErrorCode::kInvalidArgument, std::move(message)};
}

// The load's settings: its targets (the first --url, then the others) and its shape.
base::Result<load::LoadOptions> LoadOptionsFrom(const LoadFlags& f) {
  load::LoadOptions options;
  if (f.urls.empty()) return Usage("--url: at least one http://host:port");
  for (const std::string& text : f.urls) {
    auto url = boost::urls::parse_uri(text);
    if (!url || url->scheme() != "http" || url->host().empty()) {
      return Usage("--url '" + text + "' must be http://host:port");
    }
    const uint16_t port = url->has_port() ? url->port_number() : 80;
    if (&text == &f.urls.front()) {
      options.host = url->host_address();
      options.port = port;
    } else {
      options.more_targets.emplace_back(url->host_address(), port);
    }
  }
  options.activity = f.activity;
  options.action = f.action;
  options.mode = f.mode == "open" ? load::LoadMode::kOpen : load::LoadMode::kClosed;
  options.connections = f.connections;
  options.threads = f.threads;
  options.requests = f.requests;
  options.duration_s = f.duration_s;
  options.rate = f.rate;
  if (f.burst > 0) {
    options.mode = load::LoadMode::kOpen;
    options.requests = f.burst;
    options.rate = f.within_s > 0 ? static_cast<double>(f.burst) / f.within_s
                                  : load::OpenLoopSchedule::kAtOnce;
  }
  options.users = f.users;
  options.random_users = f.user_ids == "random";
  options.user_prefix = f.user_prefix;
  options.seed = f.seed;
  options.connect_timeout_ms = f.connect_timeout_ms;
  options.request_timeout_ms = f.request_timeout_ms;
  return options;
}

// Where the sale's Redis and database are, when the run verifies the sale afterwards (by
// default whenever they can be found); nothing when it does not.
base::Result<std::optional<load::VerifyOptions>> VerifyOptionsFrom(const LoadFlags& f) {
  load::VerifyOptions verify;
  verify.activity = f.activity;
  verify.key_namespace = f.key_namespace.empty() ? "fs" : f.key_namespace;
  verify.drain_timeout_ms = f.drain_timeout_ms;
  if (!f.data_dir.empty()) {
    const std::string dir = std::filesystem::absolute(f.data_dir).lexically_normal().string();
    verify.redis_url = "unix://" + dir + "/redis.sock";
    verify.db_url = "sqlite:" + dir + "/flashsale.db";
  }
  if (!f.redis_url.empty()) verify.redis_url = f.redis_url;
  if (!f.db_url.empty()) verify.db_url = f.db_url;
  const bool can_verify =
      !f.data_dir.empty() || !f.redis_url.empty() || !f.db_url.empty() || !f.key_namespace.empty();
  const bool verifying = f.verify_given ? f.verify : can_verify;
  if (!verifying) return std::optional<load::VerifyOptions>();
  if (verify.redis_url.empty() || verify.db_url.empty()) {
    return Usage(
        "--verify needs the sale's Redis and database: --data-dir of the server, or "
        "--redis-url and --db-url");
  }
  return std::optional<load::VerifyOptions>(std::move(verify));
}

// The identity the load presents: --identity, else the server's (GET /api/v1/config), else
// tokens if there is a secret to sign with; token identity gets the secret.
base::Status ChooseIdentity(const LoadFlags& f, load::LoadOptions& options) {
  std::string identity = f.identity;
  if (identity.empty()) {
    // Only once the settings make a run: asking a server is no way to report a bad flag.
    if (auto checked = load::CheckLoadOptions(options); !checked) {
      return Usage(checked.error().message);
    }
    auto config = CallAdmin(f.urls.front(), "GET", "/api/v1/config", "", {},
                            std::chrono::milliseconds(f.connect_timeout_ms));
    if (config.ok() && config->status == 200) {
      identity = config->body.find("\"gateway\"") != std::string::npos ? "gateway" : "token";
    } else {
      // No answer, or a server that does not say: tokens if there is a secret to sign with.
      identity = f.token_secret.empty() && f.data_dir.empty() ? "gateway" : "token";
    }
  }
  if (identity != "token") return base::Status();
  // The one rule of secrets (core::SecretProblem), as serve and token apply it.
  if (!f.token_secret.empty()) {
    if (std::string problem = core::SecretProblem(f.token_secret); !problem.empty()) {
      return Usage("--secret (or FLASHSALE_SECRET) " + problem);
    }
    options.token_secret = f.token_secret;
    return base::Status();
  }
  if (!f.data_dir.empty()) {
    auto read = ReadSecretFile(f.data_dir + "/secret");
    if (read) {
      options.token_secret = std::move(*read);
      return base::Status();
    }
    if (read.error().code != base::ErrorCode::kNotFound) return Usage(read.error().message);
  }
  return Usage("token identity needs --secret or the --data-dir of the server");
}

// Progress on stderr: rewritten in place on a terminal (then true), else one line a second.
bool ShowProgress(load::LoadOptions& options) {
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  options.progress_interval_ms = tty ? 250 : 1000;
  options.progress = [tty](const load::LoadProgress& progress) {
    std::cerr << (tty ? "\r" : "") << load::FormatProgress(progress) << (tty ? "\033[K" : "\n");
    std::cerr.flush();
  };
  return tty;
}

void PrintReport(const LoadFlags& f, const load::LoadOptions& options,
                 const load::LoadReport& report) {
  const std::string what = options.mode == load::LoadMode::kOpen
                               ? fmt::format("open loop at {:.0f}/s", options.rate)
                               : fmt::format("closed loop");
  const std::string title = fmt::format(
      "flashsale load: {}, {} connections, {} thread(s), {} users ({}), POST {}/api/v1/activities/"
      "{}/{}",
      what, options.connections, options.threads, options.users, f.user_ids, fmt::join(f.urls, ","),
      options.activity, options.action);
  std::cout << load::FormatReport(report, title);
  std::cout.flush();
}

// Verifies the sale against its Redis and database: the exit code.
int VerifyAfterLoad(load::VerifyOptions verify, load::LoadReport& report) {
  verify.reserved_replies = report.Count(1);
  verify.reserved_order_ids = std::move(report.reserved_order_ids);
  auto verified = load::VerifySale(verify);
  if (!verified) {
    std::cerr << "flashsale load: could not verify: " << verified.error().ToString() << "\n";
    return 1;
  }
  // The URLs as given, their passwords hidden.
  std::cout << "verify (" << base::RedactUrl(verify.redis_url) << ", "
            << base::RedactUrl(verify.db_url) << "):\n"
            << load::FormatVerification(*verified);
  std::cout.flush();
  return verified->ok() ? 0 : 1;
}
}  // namespace

int LoadCommand::Run() const {
  const LoadFlags& f = *flags_;
  auto usage = [](const std::string& message) {
    std::cerr << "flashsale load: " << message << "\n";
    return 2;
  };
  LoadFlags found = f;
  if (found.urls.empty()) {
    // Not given: FLASHSALE_URL (comma-separated too), the serve of --data-dir, the default.
    const ServerUrl url = FindServerUrl("", f.data_dir, EnvFromProcess);
    for (size_t start = 0; start <= url.url.size();) {
      const size_t comma = std::min(url.url.find(',', start), url.url.size());
      if (comma > start) found.urls.push_back(url.url.substr(start, comma - start));
      start = comma + 1;
    }
  }
  auto options = LoadOptionsFrom(found);
  if (!options) return usage(options.error().message);
  auto verify = VerifyOptionsFrom(f);
  if (!verify) return usage(verify.error().message);
  const bool verifying = verify->has_value();
  options->keep_order_ids = verifying;
  if (auto identity = ChooseIdentity(found, *options); !identity) {
    return usage(identity.error().message);
  }
  const bool tty = ShowProgress(*options);
  RaiseFileLimit();
  auto report = load::RunLoad(*options);
  if (tty) std::cerr << "\r\033[K";
  if (!report) return usage(report.error().message);
  PrintReport(found, *options, *report);
  if (report->completed == 0) {
    std::cerr << "flashsale load: no request was answered\n";
    return 1;
  }
  if (!verifying) return 0;
  return VerifyAfterLoad(std::move(**verify), *report);
}

}  // namespace flashsale::app
