#include "app/config.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace flashsale::app {
namespace {

using namespace std::chrono_literals;
using Env = std::map<std::string, std::string>;

EnvLookup EnvOf(Env vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// The settings, or the error's message as a failed expectation.
ServeConfig Parse(std::vector<std::string> args, Env env = {}) {
  auto result = ParseServeConfig(std::move(args), EnvOf(std::move(env)));
  EXPECT_TRUE(result.ok()) << result.error().message;
  if (!result.ok()) return {};
  EXPECT_FALSE(result->help.has_value());
  return result->config;
}

// The error's message; a failed expectation if there was no error.
std::string ErrorOf(std::vector<std::string> args, Env env = {}) {
  auto result = ParseServeConfig(std::move(args), EnvOf(std::move(env)));
  EXPECT_FALSE(result.ok()) << "no error";
  if (result.ok()) return "";
  EXPECT_EQ(result.error().code, base::ErrorCode::kInvalidArgument);
  return result.error().message;
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ =
        (std::filesystem::temp_directory_path() / "flashsale-config-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Writes `content` to a file in the temporary directory; its path.
  std::string Write(const std::string& name, const std::string& content) {
    std::string path = (std::filesystem::path(dir_) / name).string();
    std::ofstream out(path, std::ios::binary);
    out << content;
    EXPECT_TRUE(out.good()) << path;
    return path;
  }

  std::string dir_;
};

TEST_F(ConfigTest, DefaultsWhenNothingIsGiven) {
  ServeConfig config = Parse({});
  EXPECT_TRUE(config == ServeConfig{});
  EXPECT_EQ(config.listen, (HostPort{"127.0.0.1", 8080}));
  EXPECT_EQ(config.threads, 0);
  EXPECT_EQ(config.data_dir, "./flashsale-data");
  EXPECT_EQ(config.redis_url, "");
  EXPECT_EQ(config.key_namespace, "fs");
  EXPECT_EQ(config.identity, server::IdentityMode::kToken);
  EXPECT_FALSE(config.demo);
  EXPECT_EQ(config.max_body_bytes, 65536);
  EXPECT_EQ(config.registry_poll, std::chrono::milliseconds(500));
  EXPECT_EQ(config.log_level, spdlog::level::info);
}

TEST_F(ConfigTest, FileOverridesDefaultsEnvOverridesFileFlagOverridesEnv) {
  std::string file = Write("f.toml", "key-namespace = \"file\"\nthreads = 3\ndemo = true\n");
  std::vector<std::string> with_file = {"--config", file};

  ServeConfig from_file = Parse(with_file);
  EXPECT_EQ(from_file.key_namespace, "file");
  EXPECT_EQ(from_file.threads, 3);
  EXPECT_TRUE(from_file.demo);

  Env env = {
      {"FLASHSALE_KEY_NAMESPACE", "env"}, {"FLASHSALE_THREADS", "5"}, {"FLASHSALE_DEMO", "no"}};
  ServeConfig from_env = Parse(with_file, env);
  EXPECT_EQ(from_env.key_namespace, "env");
  EXPECT_EQ(from_env.threads, 5);
  EXPECT_FALSE(from_env.demo);

  std::vector<std::string> with_flags = {"--config",  file, "--key-namespace", "flag",
                                         "--threads", "7",  "--demo"};
  ServeConfig from_flags = Parse(with_flags, env);
  EXPECT_EQ(from_flags.key_namespace, "flag");
  EXPECT_EQ(from_flags.threads, 7);
  EXPECT_TRUE(from_flags.demo);

  // And back down: --no-demo beats a variable saying yes.
  EXPECT_FALSE(Parse({"--no-demo"}, {{"FLASHSALE_DEMO", "1"}}).demo);
  EXPECT_FALSE(Parse({"--demo=false"}, {{"FLASHSALE_DEMO", "TRUE"}}).demo);
}

TEST_F(ConfigTest, LastFlagWins) {
  EXPECT_EQ(Parse({"--threads", "2", "--threads", "9"}).threads, 9);
  EXPECT_FALSE(Parse({"--demo", "--no-demo"}).demo);
}

// Every setting reaches its field from each source: a setting missing from the table, or wired
// to the wrong field, fails here.
TEST_F(ConfigTest, EverySettingHasAFlagAVariableAndAKey) {
  struct Case {
    std::string name;
    std::string text;  // for the flag and the variable
    std::string toml;  // the TOML value
    std::function<void(ServeConfig&)> expect;
  };
  const std::vector<Case> cases = {
      {"listen", "0.0.0.0:9090", "\"0.0.0.0:9090\"",
       [](ServeConfig& c) {
         c.listen = {"0.0.0.0", 9090};
       }},
      {"threads", "12", "12", [](ServeConfig& c) { c.threads = 12; }},
      {"data-dir", "/var/fs", "\"/var/fs\"", [](ServeConfig& c) { c.data_dir = "/var/fs"; }},
      {"redis-url", "redis://r:6380", "\"redis://r:6380\"",
       [](ServeConfig& c) { c.redis_url = "redis://r:6380"; }},
      {"redis-server", "/opt/rs", "\"/opt/rs\"",
       [](ServeConfig& c) { c.redis_server = "/opt/rs"; }},
      {"durability", "fsync", "\"fsync\"",
       [](ServeConfig& c) { c.durability = Durability::kFsync; }},
      {"durability-wait-ms", "20", "20", [](ServeConfig& c) { c.durability_wait = 20ms; }},
      {"db-url", "sqlite:/x.db", "\"sqlite:/x.db\"",
       [](ServeConfig& c) { c.db_url = "sqlite:/x.db"; }},
      {"key-namespace", "prod", "\"prod\"", [](ServeConfig& c) { c.key_namespace = "prod"; }},
      {"identity", "gateway", "\"gateway\"",
       [](ServeConfig& c) { c.identity = server::IdentityMode::kGateway; }},
      {"secret", "s3cret-of-16-bytes", "\"s3cret-of-16-bytes\"",
       [](ServeConfig& c) { c.secret = "s3cret-of-16-bytes"; }},
      {"admin-token", "admin-token-16-bytes", "\"admin-token-16-bytes\"",
       [](ServeConfig& c) { c.admin_token = "admin-token-16-bytes"; }},
      {"gateway-secret", "gateway-secret-16b", "\"gateway-secret-16b\"",
       [](ServeConfig& c) { c.gateway_secret = "gateway-secret-16b"; }},
      {"identity", "jwt", "\"jwt\"",
       [](ServeConfig& c) { c.identity = server::IdentityMode::kJwt; }},
      {"jwt-jwks", "https://idp/certs", "\"https://idp/certs\"",
       [](ServeConfig& c) { c.jwt_jwks = "https://idp/certs"; }},
      {"jwt-issuer", "https://idp/realms/shop", "\"https://idp/realms/shop\"",
       [](ServeConfig& c) { c.jwt_issuer = "https://idp/realms/shop"; }},
      {"jwt-audience", "flashsale", "\"flashsale\"",
       [](ServeConfig& c) { c.jwt_audience = "flashsale"; }},
      {"jwt-user-claim", "email", "\"email\"", [](ServeConfig& c) { c.jwt_user_claim = "email"; }},
      {"jwt-leeway-s", "5", "5", [](ServeConfig& c) { c.jwt_leeway = 5s; }},
      {"jwt-jwks-refresh-s", "60", "60", [](ServeConfig& c) { c.jwt_jwks_refresh = 60s; }},
      {"demo", "true", "true", [](ServeConfig& c) { c.demo = true; }},
      {"demo-stock", "0", "0", [](ServeConfig& c) { c.demo_stock = 0; }},
      {"max-header-bytes", "4096", "4096", [](ServeConfig& c) { c.max_header_bytes = 4096; }},
      {"max-body-bytes", "2048", "2048", [](ServeConfig& c) { c.max_body_bytes = 2048; }},
      {"read-timeout-ms", "11", "11", [](ServeConfig& c) { c.read_timeout = 11ms; }},
      {"idle-timeout-ms", "12", "12", [](ServeConfig& c) { c.idle_timeout = 12ms; }},
      {"max-connections", "7", "7", [](ServeConfig& c) { c.max_connections = 7; }},
      {"shutdown-timeout-ms", "13", "13", [](ServeConfig& c) { c.shutdown_timeout = 13ms; }},
      {"redis-timeout-ms", "14", "14", [](ServeConfig& c) { c.redis_timeout = 14ms; }},
      {"idempotency-ttl-s", "15", "15", [](ServeConfig& c) { c.idempotency_ttl = 15s; }},
      {"registry-poll-ms", "16", "16", [](ServeConfig& c) { c.registry_poll = 16ms; }},
      {"consumers", "3", "3", [](ServeConfig& c) { c.consumers = 3; }},
      {"consumer-batch", "17", "17", [](ServeConfig& c) { c.consumer_batch = 17; }},
      {"consumer-nice", "3", "3", [](ServeConfig& c) { c.consumer_nice = 3; }},
      {"consumer-burst-rate", "0", "0", [](ServeConfig& c) { c.consumer_burst_rate = 0; }},
      {"claim-idle-ms", "1800", "1800", [](ServeConfig& c) { c.claim_idle = 1800ms; }},
      {"max-deliveries", "19", "19", [](ServeConfig& c) { c.max_deliveries = 19; }},
      {"prewarm-every-ms", "0", "0", [](ServeConfig& c) { c.prewarm_every = 0ms; }},
      {"reconcile-every-ms", "21", "21", [](ServeConfig& c) { c.reconcile_every = 21ms; }},
      {"expire-every-ms", "22", "22", [](ServeConfig& c) { c.expire_every = 22ms; }},
      {"rebuild-grace-ms", "23", "23", [](ServeConfig& c) { c.rebuild_grace = 23ms; }},
      {"trust-forwarded-for", "yes", "true", [](ServeConfig& c) { c.trust_forwarded_for = true; }},
      {"allow-evicting-redis", "1", "true", [](ServeConfig& c) { c.allow_evicting_redis = true; }},
      {"log-level", "debug", "\"debug\"",
       [](ServeConfig& c) { c.log_level = spdlog::level::debug; }},
      {"log-format", "json", "\"json\"", [](ServeConfig& c) { c.log_format = LogFormat::kJson; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ServeConfig expected;
    c.expect(expected);
    ASSERT_FALSE(expected == ServeConfig{}) << "the case must change something";

    EXPECT_TRUE(Parse({"--" + c.name + "=" + c.text}) == expected) << "flag";

    std::string env_name = "FLASHSALE_";
    for (char ch : c.name) env_name += ch == '-' ? '_' : static_cast<char>(std::toupper(ch));
    EXPECT_TRUE(Parse({}, {{env_name, c.text}}) == expected) << "variable " << env_name;

    std::string file = Write("every.toml", c.name + " = " + c.toml + "\n");
    EXPECT_TRUE(Parse({"--config", file}) == expected) << "file";

    std::string underscored = c.name;
    std::replace(underscored.begin(), underscored.end(), '-', '_');
    file = Write("every.toml", underscored + " = " + c.toml + "\n");
    EXPECT_TRUE(Parse({"--config", file}) == expected) << "file, " << underscored;
  }
}

TEST_F(ConfigTest, ConfigFileFromTheEnvironmentAndTheFlag) {
  std::string file = Write("env.toml", "threads = 6\n");
  EXPECT_EQ(Parse({}, {{"FLASHSALE_CONFIG", file}}).threads, 6);

  // The flag names the file instead: the variable's (missing) file is not read.
  std::string other = Write("flag.toml", "threads = 8\n");
  EXPECT_EQ(Parse({"--config", other}, {{"FLASHSALE_CONFIG", dir_ + "/missing.toml"}}).threads, 8);

  // An empty name means no file, so a flag can switch off the variable's file.
  EXPECT_EQ(Parse({"--config", ""}, {{"FLASHSALE_CONFIG", file}}).threads, 0);
}

TEST_F(ConfigTest, MissingFileNamedExplicitlyIsAnError) {
  std::string missing = dir_ + "/missing.toml";
  std::string error = ErrorOf({"--config", missing});
  EXPECT_NE(error.find(missing), std::string::npos) << error;
  EXPECT_NE(error.find("--config"), std::string::npos) << error;

  error = ErrorOf({}, {{"FLASHSALE_CONFIG", missing}});
  EXPECT_NE(error.find(missing), std::string::npos) << error;
  EXPECT_NE(error.find("FLASHSALE_CONFIG"), std::string::npos) << error;

  EXPECT_EQ(ErrorOf({"--config", dir_}), "config file " + dir_ + " (from --config) is a directory");
}

TEST_F(ConfigTest, UnknownKeyInFileNamesItAndTheFile) {
  std::string file = Write("typo.toml", "listen = \"127.0.0.1:80\"\ntreads = 4\n");
  EXPECT_EQ(ErrorOf({"--config", file}),
            "unknown setting 'treads' in " + file + ":2; did you mean 'threads'?");

  file = Write("table.toml", "[serve]\nthreads = 4\n");
  EXPECT_EQ(ErrorOf({"--config", file}), "unknown setting 'serve' in " + file + ":1");
}

TEST_F(ConfigTest, BothSpellingsOfOneSettingInAFileAreAnError) {
  std::string file = Write("twice.toml", "data-dir = \"/a\"\ndata_dir = \"/b\"\n");
  std::string error = ErrorOf({"--config", file});
  EXPECT_NE(error.find("'data-dir' is given twice in " + file), std::string::npos) << error;
}

TEST_F(ConfigTest, MalformedTomlReportsTheFileAndLine) {
  std::string file = Write("bad.toml", "threads = 4\n\nlisten = \n");
  std::string error = ErrorOf({"--config", file});
  EXPECT_EQ(error.rfind("config file " + file + ":3:", 0), 0u) << error;
}

TEST_F(ConfigTest, WrongTomlTypeNamesTheSettingAndTheLine) {
  std::string file = Write("types.toml", "# comment\nthreads = \"4\"\n");
  EXPECT_EQ(ErrorOf({"--config", file}),
            "setting 'threads' from " + file + ":2: must be an integer, not a string");
  file = Write("types.toml", "demo = 1\n");
  EXPECT_EQ(ErrorOf({"--config", file}),
            "setting 'demo' from " + file + ":1: must be a boolean, not an integer");
}

TEST_F(ConfigTest, MalformedValuesNameTheSettingAndTheSource) {
  EXPECT_EQ(ErrorOf({}, {{"FLASHSALE_THREADS", "abc"}}),
            "setting 'threads' from FLASHSALE_THREADS: \"abc\" is not an integer");
  EXPECT_EQ(ErrorOf({"--max-body-bytes", "12k"}),
            "setting 'max-body-bytes' from --max-body-bytes: \"12k\" is not an integer");
  EXPECT_EQ(ErrorOf({"--threads", " 4"}),
            "setting 'threads' from --threads: \" 4\" is not an integer");
  EXPECT_EQ(ErrorOf({}, {{"FLASHSALE_THREADS", ""}}),
            "setting 'threads' from FLASHSALE_THREADS: \"\" is not an integer");
  EXPECT_EQ(
      ErrorOf({"--demo-stock", "99999999999999999999"}),
      "setting 'demo-stock' from --demo-stock: \"99999999999999999999\" does not fit in 64 bits");
  EXPECT_EQ(ErrorOf({}, {{"FLASHSALE_DEMO", "maybe"}}),
            "setting 'demo' from FLASHSALE_DEMO: \"maybe\" is not a boolean (1/0, true/false, "
            "yes/no)");
  EXPECT_EQ(ErrorOf({"--trust-forwarded-for=2"}),
            "setting 'trust-forwarded-for' from --trust-forwarded-for: \"2\" is not a boolean "
            "(1/0, true/false, yes/no)");
}

TEST_F(ConfigTest, AnOverriddenValueIsStillChecked) {
  std::string file = Write("range.toml", "threads = 300\n");
  EXPECT_EQ(ErrorOf({"--config", file, "--threads", "4"}),
            "setting 'threads' from " + file + ":1: must be 0..256, not 300");
  EXPECT_EQ(
      ErrorOf({"--identity", "token"}, {{"FLASHSALE_IDENTITY", "tokne"}}),
      "setting 'identity' from FLASHSALE_IDENTITY: must be token, gateway or jwt, not \"tokne\"");
}

TEST_F(ConfigTest, RejectsValuesOutsideTheRules) {
  struct Case {
    std::string name;
    std::string value;
    std::string problem;  // what follows "setting 'name' from --name: "
  };
  const std::vector<Case> rejected = {
      {"threads", "-1", "must be 0..256, not -1"},
      {"threads", "257", "must be 0..256, not 257"},
      {"max-header-bytes", "1023", "must be 1024..1048576, not 1023"},
      {"max-header-bytes", "1048577", "must be 1024..1048576, not 1048577"},
      {"max-body-bytes", "1023", "must be 1024..16777216, not 1023"},
      {"max-body-bytes", "16777217", "must be 1024..16777216, not 16777217"},
      {"read-timeout-ms", "0", "must be at least 1, not 0"},
      {"idle-timeout-ms", "0", "must be at least 1, not 0"},
      {"shutdown-timeout-ms", "-5", "must be at least 1, not -5"},
      {"redis-timeout-ms", "0", "must be at least 1, not 0"},
      {"idempotency-ttl-s", "0", "must be at least 1, not 0"},
      {"demo-stock", "-1", "must be at least 0, not -1"},
      {"registry-poll-ms", "9", "must be at least 10, not 9"},
      {"identity", "tokne", "must be token, gateway or jwt, not \"tokne\""},
      {"identity", "Token", "must be token, gateway or jwt, not \"Token\""},
      {"durability", "sync", "must be async, wait or fsync, not \"sync\""},
      {"durability-wait-ms", "0", "must be 1..60000, not 0"},
      {"log-level", "verbose", "must be trace, debug, info, warn or error, not \"verbose\""},
      {"key-namespace", "", "must be 1 to 64 characters of A-Z a-z 0-9 _ . -, not \"\""},
      {"key-namespace", std::string(65, 'a'),
       "must be 1 to 64 characters of A-Z a-z 0-9 _ . -, not \"" + std::string(65, 'a') + "\""},
      {"key-namespace", "a b", "must be 1 to 64 characters of A-Z a-z 0-9 _ . -, not \"a b\""},
      {"key-namespace", "fs:x", "must be 1 to 64 characters of A-Z a-z 0-9 _ . -, not \"fs:x\""},
      {"data-dir", "", "must not be empty"},
      {"redis-server", "", "must not be empty"},
      {"jwt-jwks", "http://idp.example/certs", "must be a file or an https:// URL, not http://"},
      {"jwt-user-claim", "", "must not be empty"},
      {"jwt-leeway-s", "601", "must be 0..600, not 601"},
      {"jwt-jwks-refresh-s", "0", "must be 1..86400, not 0"},
  };
  for (const Case& c : rejected) {
    EXPECT_EQ(ErrorOf({"--" + c.name, c.value}),
              "setting '" + c.name + "' from --" + c.name + ": " + c.problem);
  }
}

TEST_F(ConfigTest, ListenMustBeHostColonPort) {
  const std::string kHostProblem = "is not HOST:PORT (HOST an IPv4 address, localhost or [IPv6])";
  for (std::string bad : {"8080", "example.com:80", "256.0.0.1:80", "1.2.3:80", "01.2.3.4:80",
                          ":8080", "::1:8080", "[::1:8080", "[]:80", "[not-v6]:80", "127.0.0.1"}) {
    EXPECT_EQ(ErrorOf({"--listen", bad}),
              "setting 'listen' from --listen: \"" + bad + "\" " + kHostProblem);
  }
  for (auto [bad, port] :
       std::vector<std::pair<std::string, std::string>>{{"127.0.0.1:0", "0"},
                                                        {"127.0.0.1:65536", "65536"},
                                                        {"localhost:", ""},
                                                        {"[::1]:http", "http"},
                                                        {"127.0.0.1:-1", "-1"},
                                                        {"127.0.0.1:+80", "+80"}}) {
    EXPECT_EQ(ErrorOf({"--listen", bad}), "setting 'listen' from --listen: \"" + bad +
                                              "\": port \"" + port + "\" is not 1..65535");
  }
}

// Issue 33 point 3: the address is parsed once, by the settings; serve takes its host and port.
TEST(HostPortTest, ParsedOnceIntoAHostAndAPort) {
  struct Case {
    std::string text;
    HostPort parsed;
  };
  for (const Case& c : std::vector<Case>{{"127.0.0.1:8080", {"127.0.0.1", 8080}},
                                         {"localhost:1", {"localhost", 1}},
                                         {"0.0.0.0:65535", {"0.0.0.0", 65535}},
                                         {"[::1]:8080", {"::1", 8080}},
                                         {"[2001:db8::7]:443", {"2001:db8::7", 443}}}) {
    SCOPED_TRACE(c.text);
    auto parsed = ParseHostPort(c.text);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    EXPECT_EQ(*parsed, c.parsed);
    EXPECT_EQ(parsed->ToString(), c.text);
  }
  auto bad = ParseHostPort("[::1]:0");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message, "\"[::1]:0\": port \"0\" is not 1..65535");
  EXPECT_FALSE(ParseHostPort("[127.0.0.1]:80").ok()) << "brackets hold an IPv6 address only";
  EXPECT_EQ(Parse({"--listen", "[::]:80"}).listen, (HostPort{"::", 80}));
}

TEST_F(ConfigTest, AcceptsTheEdgesOfTheRules) {
  EXPECT_EQ(Parse({"--threads", "256"}).threads, 256);
  EXPECT_EQ(Parse({"--max-header-bytes", "1024"}).max_header_bytes, 1024);
  EXPECT_EQ(Parse({"--max-header-bytes", "1048576"}).max_header_bytes, 1048576);
  EXPECT_EQ(Parse({"--max-body-bytes", "16777216"}).max_body_bytes, 16777216);
  EXPECT_EQ(Parse({"--registry-poll-ms", "10"}).registry_poll, 10ms);
  EXPECT_EQ(Parse({"--read-timeout-ms", "1"}).read_timeout, 1ms);
  EXPECT_EQ(Parse({"--key-namespace", std::string(64, 'z')}).key_namespace, std::string(64, 'z'));
  EXPECT_EQ(Parse({"--key-namespace", "A.b-c_9"}).key_namespace, "A.b-c_9");
  for (std::string level : {"trace", "debug", "info", "warn", "error"}) {
    EXPECT_EQ(spdlog::level::to_string_view(Parse({"--log-level", level}).log_level),
              level == "warn" ? "warning" : level);
  }
  for (std::string listen : {"localhost:1", "0.0.0.0:65535", "[::1]:8080", "[::]:80",
                             "[2001:db8::7]:443", "10.0.0.255:8080"}) {
    EXPECT_EQ(Parse({"--listen", listen}).listen.ToString(), listen);
  }
  // An empty string is a value: it sets redis-url back to "start a private server".
  std::string file = Write("r.toml", "redis-url = \"redis://r\"\n");
  EXPECT_EQ(Parse({"--config", file}, {{"FLASHSALE_REDIS_URL", ""}}).redis_url, "");
}

TEST_F(ConfigTest, UnknownFlagAndMissingValueAreUsageErrors) {
  std::string error = ErrorOf({"--treads", "4"});
  EXPECT_NE(error.find("--treads"), std::string::npos) << error;
  error = ErrorOf({"--threads"});
  EXPECT_NE(error.find("--threads"), std::string::npos) << error;
  error = ErrorOf({"stray"});
  EXPECT_NE(error.find("stray"), std::string::npos) << error;
}

struct Listed {
  std::string flag;
  std::string default_text;
  std::string env;
};

const std::vector<Listed>& EverySetting() {
  static const std::vector<Listed> listed = {
      {"--config", "\"\"", "FLASHSALE_CONFIG"},
      {"--listen", "127.0.0.1:8080", "FLASHSALE_LISTEN"},
      {"--threads", "0", "FLASHSALE_THREADS"},
      {"--data-dir", "./flashsale-data", "FLASHSALE_DATA_DIR"},
      {"--redis-url", "\"\"", "FLASHSALE_REDIS_URL"},
      {"--redis-server", "redis-server", "FLASHSALE_REDIS_SERVER"},
      {"--db-url", "\"\"", "FLASHSALE_DB_URL"},
      {"--key-namespace", "fs", "FLASHSALE_KEY_NAMESPACE"},
      {"--identity", "token", "FLASHSALE_IDENTITY"},
      {"--secret", "\"\"", "FLASHSALE_SECRET"},
      {"--admin-token", "\"\"", "FLASHSALE_ADMIN_TOKEN"},
      {"--gateway-secret", "\"\"", "FLASHSALE_GATEWAY_SECRET"},
      {"--demo", "false", "FLASHSALE_DEMO"},
      {"--demo-stock", "100", "FLASHSALE_DEMO_STOCK"},
      {"--max-header-bytes", "8192", "FLASHSALE_MAX_HEADER_BYTES"},
      {"--max-body-bytes", "65536", "FLASHSALE_MAX_BODY_BYTES"},
      {"--read-timeout-ms", "5000", "FLASHSALE_READ_TIMEOUT_MS"},
      {"--idle-timeout-ms", "60000", "FLASHSALE_IDLE_TIMEOUT_MS"},
      {"--max-connections", "10000", "FLASHSALE_MAX_CONNECTIONS"},
      {"--shutdown-timeout-ms", "10000", "FLASHSALE_SHUTDOWN_TIMEOUT_MS"},
      {"--redis-timeout-ms", "1000", "FLASHSALE_REDIS_TIMEOUT_MS"},
      {"--idempotency-ttl-s", "86400", "FLASHSALE_IDEMPOTENCY_TTL_S"},
      {"--registry-poll-ms", "500", "FLASHSALE_REGISTRY_POLL_MS"},
      {"--consumers", "1", "FLASHSALE_CONSUMERS"},
      {"--consumer-batch", "100", "FLASHSALE_CONSUMER_BATCH"},
      {"--consumer-nice", "19", "FLASHSALE_CONSUMER_NICE"},
      {"--consumer-burst-rate", "500", "FLASHSALE_CONSUMER_BURST_RATE"},
      {"--claim-idle-ms", "30000", "FLASHSALE_CLAIM_IDLE_MS"},
      {"--max-deliveries", "5", "FLASHSALE_MAX_DELIVERIES"},
      {"--prewarm-every-ms", "10000", "FLASHSALE_PREWARM_EVERY_MS"},
      {"--reconcile-every-ms", "60000", "FLASHSALE_RECONCILE_EVERY_MS"},
      {"--expire-every-ms", "5000", "FLASHSALE_EXPIRE_EVERY_MS"},
      {"--rebuild-grace-ms", "20000", "FLASHSALE_REBUILD_GRACE_MS"},
      {"--trust-forwarded-for", "false", "FLASHSALE_TRUST_FORWARDED_FOR"},
      {"--cors-origin", "none", "FLASHSALE_CORS_ORIGIN"},
      {"--log-level", "info", "FLASHSALE_LOG_LEVEL"},
  };
  return listed;
}

// Each setting's entry in `help` shows its default and its variable. An entry is the line that
// starts with the flag, plus the description on the next line when the flag is too long to leave
// room for it on its own ("  --trust-forwarded-for,--no-trust-forwarded-for{false}").
void ExpectEverySettingListed(const std::string& help) {
  std::vector<std::string> lines;
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (const Listed& setting : EverySetting()) {
    int found = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind("  " + setting.flag + " ", 0) != 0 &&
          lines[i].rfind("  " + setting.flag + ",", 0) != 0) {
        continue;
      }
      ++found;
      std::string entry = lines[i];
      if (i + 1 < lines.size() && lines[i + 1].rfind("      ", 0) == 0) entry += lines[i + 1];
      EXPECT_NE(entry.find("(default: " + setting.default_text + ";"), std::string::npos) << entry;
      EXPECT_NE(entry.find("env " + setting.env + ")"), std::string::npos) << entry;
    }
    EXPECT_EQ(found, 1) << setting.flag << " is not listed once in\n" << help;
  }
}

TEST_F(ConfigTest, HelpListsEverySettingWithItsDefaultAndVariable) {
  // Help does not resolve anything, so a broken environment does not hide it.
  auto result = ParseServeConfig({"--help"}, EnvOf({{"FLASHSALE_THREADS", "abc"}}));
  ASSERT_TRUE(result.ok()) << result.error().message;
  ASSERT_TRUE(result->help.has_value());
  ExpectEverySettingListed(*result->help);
  EXPECT_NE(result->help->find("--no-demo"), std::string::npos);
}

// The way main uses it: the settings on the `serve` subcommand of the `flashsale` app.
TEST_F(ConfigTest, WorksOnASubcommand) {
  CLI::App app{"flash sales", "flashsale"};
  CLI::App* serve = app.add_subcommand("serve", "Run the HTTP service");
  ServeSettings settings(*serve);

  std::vector<std::string> args = {"serve", "--threads", "3"};
  std::reverse(args.begin(), args.end());
  app.parse(args);
  ASSERT_TRUE(serve->parsed());
  auto config = settings.Resolve(EnvOf({{"FLASHSALE_LOG_LEVEL", "warn"}}));
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->threads, 3);
  EXPECT_EQ(config->log_level, spdlog::level::warn);
}

TEST_F(ConfigTest, SubcommandHelpListsTheSettings) {
  CLI::App app{"flash sales", "flashsale"};
  CLI::App* serve = app.add_subcommand("serve", "Run the HTTP service");
  ServeSettings settings(*serve);
  std::vector<std::string> args = {"serve", "--help"};
  std::reverse(args.begin(), args.end());
  EXPECT_THROW(app.parse(args), CLI::CallForHelp);
  // What CLI11_PARSE prints on CallForHelp: the help of the selected subcommand.
  std::string help = app.help();
  EXPECT_NE(help.find("flashsale serve"), std::string::npos) << help;
  ExpectEverySettingListed(help);
}

TEST(EnvFromProcessTest, UnsetIsNullopt) {
  EXPECT_FALSE(EnvFromProcess("FLASHSALE_TEST_NEVER_SET_7F3A").has_value());
}

// Issue 32 point 7: TOML's own numbers and booleans where a number, a fraction or a switch is
// meant; text still works (the environment is text).
TEST_F(ConfigTest, TomlNumbersAndBooleansAreTakenWhereANumberOrASwitchIsMeant) {
  const ServeConfig half = Parse({"--access-log-sample", "0.5"});
  EXPECT_FALSE(half == ServeConfig{});
  EXPECT_TRUE(Parse({"--config", Write("float.toml", "access-log-sample = 0.5\n")}) == half);
  EXPECT_TRUE(Parse({"--config", Write("text.toml", "access-log-sample = \"0.5\"\n")}) == half);
  EXPECT_TRUE(Parse({}, {{"FLASHSALE_ACCESS_LOG_SAMPLE", "0.5"}}) == half);
  EXPECT_TRUE(Parse({"--config", Write("one.toml", "access-log-sample = 1\n")}) ==
              Parse({"--access-log-sample", "1"}));
  const std::string out_of_range = Write("range.toml", "access-log-sample = 1.5\n");
  EXPECT_NE(ErrorOf({"--config", out_of_range}).find("from 0 to 1"), std::string::npos);
  const std::string switch_given = Write("bool.toml", "access-log-sample = true\n");
  EXPECT_EQ(
      ErrorOf({"--config", switch_given}),
      "setting 'access-log-sample' from " + switch_given + ":1: must be a number, not a boolean");
  // Switches are TOML booleans, and numbers TOML integers, as before.
  EXPECT_TRUE(Parse({"--config", Write("switch.toml", "demo = true\nthreads = 3\n")}) ==
              Parse({"--demo", "--threads", "3"}));
}

// Issue 32 point 9: one rule for secrets, wherever they come from.
TEST_F(ConfigTest, SecretsUnder16BytesAreRefusedFromEverySource) {
  for (const char* name : {"secret", "admin-token", "gateway-secret"}) {
    SCOPED_TRACE(name);
    std::string error = ErrorOf({fmt::format("--{}=fifteen-bytes!!", name)});
    EXPECT_NE(error.find(fmt::format("setting '{}' from --{}", name, name)), std::string::npos)
        << error;
    EXPECT_NE(error.find("at least 16 bytes, not 15"), std::string::npos) << error;
    std::string env = "FLASHSALE_";
    for (const char* c = name; *c != 0; ++c) {
      env += *c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
    }
    error = ErrorOf({}, {{env, "short"}});
    EXPECT_NE(error.find("at least 16 bytes"), std::string::npos) << error;
    const std::string file = Write("secret.toml", fmt::format("{} = \"short\"\n", name));
    error = ErrorOf({"--config", file});
    EXPECT_NE(error.find("at least 16 bytes"), std::string::npos) << error;
    EXPECT_FALSE(Parse({fmt::format("--{}=sixteen-bytes-ok", name)}) == ServeConfig{});
    // Empty is not a short secret: it means generated (or, for the gateway, not asked).
    EXPECT_TRUE(Parse({}, {{env, ""}}) == ServeConfig{});
  }
}

// Issue 32 point 11: the origins a shop front may call the public API from.
TEST_F(ConfigTest, CorsOriginsAreAListFromTheFlagTheVariableAndTheFile) {
  const ServeConfig two = Parse({"--cors-origin", "http://shop.example,https://b.example:8443"});
  EXPECT_FALSE(two == ServeConfig{});
  EXPECT_TRUE(Parse({"--cors-origin", "http://shop.example", "--cors-origin",
                     "https://b.example:8443"}) == two);
  EXPECT_TRUE(
      Parse({}, {{"FLASHSALE_CORS_ORIGIN", "http://shop.example, https://b.example:8443"}}) == two);
  const std::string array =
      Write("cors.toml", "cors-origin = [\"http://shop.example\", \"https://b.example:8443\"]\n");
  EXPECT_TRUE(Parse({"--config", array}) == two);
  const std::string text =
      Write("cors.toml", "cors_origin = \"http://shop.example,https://b.example:8443\"\n");
  EXPECT_TRUE(Parse({"--config", text}) == two);
  EXPECT_FALSE(Parse({"--cors-origin", "*"}) == ServeConfig{});
  for (const char* bad : {"shop.example", "http://shop.example/", "http://shop.example/path",
                          "ftp://shop.example", "http://", "http://a.example,,http://b.example"}) {
    SCOPED_TRACE(bad);
    const std::string error = ErrorOf({"--cors-origin", bad});
    EXPECT_NE(error.find("setting 'cors-origin' from --cors-origin"), std::string::npos) << error;
  }
  const std::string numbers = Write("cors.toml", "cors-origin = [1, 2]\n");
  EXPECT_NE(ErrorOf({"--config", numbers}).find("cors-origin"), std::string::npos);
}

// Issue 35 point 1: the receivers of the order events.
TEST_F(ConfigTest, WebhookUrlsAreAListAndEachIsChecked) {
  const ServeConfig two =
      Parse({"--webhook-url", "http://127.0.0.1:9000/hook,https://pay.example"});
  EXPECT_EQ(two.webhook_url,
            (std::vector<std::string>{"http://127.0.0.1:9000/hook", "https://pay.example"}));
  EXPECT_TRUE(Parse({}, {{"FLASHSALE_WEBHOOK_URL",
                          "http://127.0.0.1:9000/hook, https://pay.example"}}) == two);
  for (const char* bad : {"ftp://pay.example/hook", "pay.example", "https://", "http://",
                          "http://a:0/", "http://a:99999/", "http://user@a/", "http://a/x y"}) {
    SCOPED_TRACE(bad);
    const std::string error = ErrorOf({"--webhook-url", bad});
    EXPECT_NE(error.find("setting 'webhook-url' from --webhook-url"), std::string::npos) << error;
  }
}

// identity jwt without the settings it needs: config check names each missing one and its
// variable (serve refuses to start with the first); given them, or another identity, nothing.
TEST_F(ConfigTest, ConfigCheckNamesTheSettingsIdentityJwtNeeds) {
  const std::string file = Write("jwt.toml", "identity = \"jwt\"\njwt-issuer = \"https://idp\"\n");
  std::vector<std::string> problems = CheckConfig(file, EnvOf({}));
  ASSERT_EQ(problems.size(), 2U) << (problems.empty() ? "" : problems.front());
  EXPECT_NE(problems[0].find("'jwt-jwks' (--jwt-jwks or FLASHSALE_JWT_JWKS)"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find("'jwt-audience'"), std::string::npos) << problems[1];
  EXPECT_NE(problems[1].find("FLASHSALE_JWT_AUDIENCE"), std::string::npos) << problems[1];

  problems = CheckConfig(file, EnvOf({{"FLASHSALE_JWT_JWKS", "/etc/jwks.json"},
                                      {"FLASHSALE_JWT_AUDIENCE", "flashsale"}}));
  EXPECT_TRUE(problems.empty()) << problems.front();

  const std::string token = Write("token.toml", "identity = \"token\"\n");
  EXPECT_TRUE(CheckConfig(token, EnvOf({})).empty());
}

// Issue 35 point 1: RabbitMQ as a receiver; a bad URL is refused without showing its password.
TEST_F(ConfigTest, AmqpUrlAndExchangeAreChecked) {
  EXPECT_EQ(Parse({}).amqp_url, "");
  EXPECT_EQ(Parse({}).amqp_exchange, "flashsale.events");
  const ServeConfig set =
      Parse({"--amqp-url", "amqp://app:s3cret@mq.internal:5672/shop", "--amqp-exchange", "orders"});
  EXPECT_EQ(set.amqp_url, "amqp://app:s3cret@mq.internal:5672/shop");
  EXPECT_EQ(set.amqp_exchange, "orders");
  EXPECT_TRUE(Parse({}, {{"FLASHSALE_AMQP_URL", "amqp://app:s3cret@mq.internal:5672/shop"},
                         {"FLASHSALE_AMQP_EXCHANGE", "orders"}}) == set);
  for (const char* bad :
       {"amqps://app:s3cret@mq", "http://app:s3cret@mq", "amqp://app:s3cret@mq:0"}) {
    SCOPED_TRACE(bad);
    const std::string error = ErrorOf({"--amqp-url", bad});
    EXPECT_NE(error.find("setting 'amqp-url' from --amqp-url"), std::string::npos) << error;
    EXPECT_EQ(error.find("s3cret"), std::string::npos) << error;
  }
  const std::string error = ErrorOf({"--amqp-exchange", "no spaces"});
  EXPECT_NE(error.find("setting 'amqp-exchange' from --amqp-exchange"), std::string::npos) << error;
}

}  // namespace
}  // namespace flashsale::app

namespace flashsale::app {
namespace {

// The packaged config file: every setting appears, commented out at its default; uncommented,
// the file is valid and resolves to the defaults.
TEST(ConfigFileTemplateTest, NamesEverySettingAtItsDefaultAndParsesUncommented) {
  const std::string text = ConfigFileTemplate();
  std::string uncommented;
  size_t settings = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# ", 0) == 0 && line.find(" = ") != std::string::npos &&
        line.find(' ', 2) == line.find(" = ")) {
      uncommented += line.substr(2) + "\n";
      ++settings;
    }
  }
  EXPECT_GE(settings, 30U);
  EXPECT_NE(text.find("# listen = \"127.0.0.1:8080\""), std::string::npos) << text;
  EXPECT_NE(text.find("# demo = false"), std::string::npos);
  EXPECT_NE(text.find("# threads = 0"), std::string::npos);
  const std::string path = ::testing::TempDir() + "/flashsale-template.toml";
  std::ofstream(path) << uncommented;
  auto parsed = ParseServeConfig({"--config", path},
                                 [](const std::string&) { return std::optional<std::string>(); });
  ASSERT_TRUE(parsed.ok()) << parsed.error().message << "\n" << uncommented;
  EXPECT_EQ(parsed->config, ServeConfig{});
}

}  // namespace
}  // namespace flashsale::app
