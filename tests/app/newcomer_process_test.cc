// A newcomer's first day with the real `flashsale` binary (issue 18): a taken port, sales that
// cannot be created broken, a purchase over the limit, the identity mode told to pages, messages
// that say what is wrong, metrics that do not cry wolf, and the command line's vocabulary. Every
// child (and the redis-server it started) is SIGKILLed by PID at the end of a test; every wait is
// bounded.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/flashsale_process.h"
#include "support/http_client.h"
#include "support/mariadb_server.h"
#include "support/redis_server.h"

namespace flashsale {
namespace {

namespace json = boost::json;
using std::chrono::seconds;
using testing::FreePort;
using testing::HttpClient;
using testing::HttpResult;
using testing::ReadFile;
using testing::TempDir;

constexpr auto kStartupTimeout = seconds(20);
constexpr auto kExitTimeout = seconds(30);

class Flashsale : public testing::FlashsaleProcess {
 public:
  Flashsale(std::vector<std::string> args, std::string log, std::string data_dir = "")
      : FlashsaleProcess(FLASHSALE_BINARY, std::move(args), std::move(log), std::move(data_dir)) {}
};

int ExitCode(const std::optional<int>& status) {
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

json::value Json(const HttpResult& result) {
  boost::system::error_code error;
  json::value value = json::parse(result.body, error);
  if (error) return json::value(result.body);
  return value;
}

std::string Str(const HttpResult& result, std::string_view key) {
  const json::value value = Json(result);
  if (!value.is_object() || !value.as_object().contains(key)) return "<none>";
  const json::value& field = value.at(key);
  return field.is_string() ? std::string(field.as_string()) : json::serialize(field);
}

struct Finished {
  std::optional<int> status;
  std::string output;
};

Finished RunToExit(const std::vector<std::string>& args, const TempDir& tmp,
                   const std::string& log_name) {
  Flashsale child(args, tmp / log_name);
  Finished finished;
  finished.status = child.WaitExit(kExitTimeout);
  finished.output = child.Log();
  return finished;
}

std::vector<std::string> ServeArgs(uint16_t port, const std::string& data_dir,
                                   std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"serve",      "--listen", fmt::format("127.0.0.1:{}", port),
                                   "--data-dir", data_dir,   "--threads",
                                   "2"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A running serve on a fresh data directory, with its admin headers.
struct Service {
  TempDir tmp;
  std::string data_dir = tmp / "data";
  uint16_t port = FreePort();
  Flashsale serve;
  std::map<std::string, std::string> admin;

  explicit Service(std::vector<std::string> more = {})
      : serve(ServeArgs(port, data_dir, std::move(more)), tmp / "serve.log", data_dir) {}

  ::testing::AssertionResult Start() {
    auto healthy = testing::WaitHealthy(serve, port, kStartupTimeout);
    if (!healthy) return healthy;
    std::string token = ReadFile(data_dir + "/admin-token");
    token = token.substr(0, token.find('\n'));
    admin = {{"Authorization", "Bearer " + token}};
    return ::testing::AssertionSuccess();
  }
  std::string Url() const { return fmt::format("http://127.0.0.1:{}", port); }
  // `flashsale args... --url <this> --data-dir <this>` to completion.
  Finished Cli(std::vector<std::string> args, const std::string& log) {
    args.insert(args.end(), {"--url", Url(), "--data-dir", data_dir});
    return RunToExit(args, tmp, log);
  }
};

// --- 1. A taken port ----------------------------------------------------------------------------

TEST(NewcomerProcessTest, ASecondServeOnATakenPortFailsWhileTheFirstKeepsServing) {
  Service first;
  ASSERT_TRUE(first.Start());
  // The same port, another data directory: refused, naming the cause, and nothing left running.
  const std::string other_dir = first.tmp / "other";
  const Finished second = RunToExit(ServeArgs(first.port, other_dir), first.tmp, "second.log");
  ASSERT_TRUE(second.status.has_value()) << "the second serve is still running";
  EXPECT_NE(ExitCode(second.status), 0) << second.output;
  EXPECT_NE(second.output.find("address already in use"), std::string::npos) << second.output;
  EXPECT_EQ(second.output.find("serving on"), std::string::npos) << second.output;
  EXPECT_TRUE(testing::RedisServersFor(other_dir).empty());

  // The first still answers every request itself (two threads sharing the port): its sale only.
  HttpClient admin_client("127.0.0.1", first.port);
  ASSERT_EQ(admin_client.Post("/api/v1/admin/activities", R"({"id":"mine","stock":7})", first.admin)
                .status,
            201);
  for (int i = 0; i < 20; ++i) {
    HttpClient client("127.0.0.1", first.port);  // a new connection each time
    auto list = client.Get("/api/v1/activities");
    ASSERT_EQ(list.status, 200) << list.body;
    EXPECT_EQ(Json(list).at("activities").as_array().size(), 1u) << list.body;
  }
}

// --- 2. Broken sales refused; 9. the messages ---------------------------------------------------

TEST(NewcomerProcessTest, BrokenSalesAreRefusedWithMessagesSayingWhatIsWrong) {
  Service service;
  ASSERT_TRUE(service.Start());
  HttpClient client("127.0.0.1", service.port);
  const int64_t now = NowMs();
  struct Case {
    std::string body;
    std::string says;
  };
  const std::vector<Case> cases = {
      {R"({"id":"a"})", "field 'stock' is required"},
      {R"({"id":"a","kind":"items"})", "needs a non-empty 'items' array"},
      {R"({"id":"a","kind":"items","items":[]})", "needs a non-empty 'items' array"},
      {fmt::format(R"({{"id":"a","stock":1,"start_ms":{},"end_ms":{}}})", now - 7'200'000,
                   now - 3'600'000),
       "the window is already over"},
      {R"({"id":"a","stock":1,"start_ms":1800000000})",
       "start_ms 1800000000 looks like seconds; send milliseconds"},
      {R"({"id":"a","stock":1,"end_ms":1800000000})", "end_ms 1800000000 looks like seconds"},
      {fmt::format(R"({{"id":"a","stock":1,"start_ms":{},"end_ms":{}}})", now + 60'000, now),
       "end_ms must be after start_ms"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    auto reply = client.Post("/api/v1/admin/activities", c.body, service.admin);
    EXPECT_EQ(reply.status, 400) << reply.body;
    EXPECT_NE(Str(reply, "error").find(c.says), std::string::npos) << reply.body;
  }
  auto list = client.Get("/api/v1/activities");
  EXPECT_EQ(Json(list).at("activities").as_array().size(), 0u) << list.body;

  // No title: the id stands in. Stock of the other kind is refused by name.
  auto created =
      client.Post("/api/v1/admin/activities", R"({"id":"plain","stock":2})", service.admin);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(Json(created).at("activity").at("title").as_string(), "plain") << created.body;
  auto items =
      client.Post("/api/v1/admin/activities/plain/stock", R"({"items":["C1"]})", service.admin);
  EXPECT_EQ(items.status, 400) << items.body;
  EXPECT_NE(Str(items, "error").find("this sale counts units; send units, not items"),
            std::string::npos)
      << items.body;
  ASSERT_EQ(client
                .Post("/api/v1/admin/activities", R"({"id":"codes","kind":"items","items":["C1"]})",
                      service.admin)
                .status,
            201);
  auto units = client.Post("/api/v1/admin/activities/codes/stock", R"({"units":2})", service.admin);
  EXPECT_EQ(units.status, 400) << units.body;
  EXPECT_NE(Str(units, "error").find("send items, not units"), std::string::npos) << units.body;
}

// --- 2. Deleting an activity that sold nothing --------------------------------------------------

// The keys of the embedded Redis in `data_dir` that contain `fragment` (redis-cli --scan).
std::string KeysContaining(const std::string& data_dir, const std::string& fragment) {
  const std::string command =
      fmt::format("redis-cli -s {}/redis.sock --scan --pattern '*{}*' 2>&1", data_dir, fragment);
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[512];
    while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
    ::pclose(pipe);
  }
  return out;
}

TEST(NewcomerProcessTest, AnActivityThatSoldNothingCanBeDeletedAndIsGoneEverywhere) {
  Service service({"--identity", "gateway"});
  ASSERT_TRUE(service.Start());
  HttpClient client("127.0.0.1", service.port);
  for (const char* body : {R"({"id":"oops","stock":3})", R"({"id":"sold","stock":3})",
                           R"({"id":"typo","kind":"items","items":["C1"]})"}) {
    ASSERT_EQ(client.Post("/api/v1/admin/activities", body, service.admin).status, 201) << body;
  }
  ASSERT_EQ(
      Str(client.Post("/api/v1/activities/sold/purchase", "", {{"X-User-Id", "ann"}}), "status"),
      "reserved");
  // The series of every activity show up in /metrics first (bounded).
  std::string metrics;
  for (int i = 0; i < 150 && metrics.find(R"(activity="oops")") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    metrics = client.Get("/metrics").body;
  }
  ASSERT_NE(metrics.find(R"(activity="oops")"), std::string::npos) << metrics;
  EXPECT_FALSE(KeysContaining(service.data_dir, "{oops}").empty()) << "no Redis keys to delete";

  auto deleted = client.Request("DELETE", "/api/v1/admin/activities/oops", "", service.admin);
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(Str(deleted, "status"), "deleted") << deleted.body;
  // The CLI does the same.
  const Finished cli = service.Cli({"activity", "delete", "typo"}, "delete.log");
  EXPECT_EQ(ExitCode(cli.status), 0) << cli.output;

  // One that sold something stays, and says why: its state conflicts with the request.
  auto refused = client.Request("DELETE", "/api/v1/admin/activities/sold", "", service.admin);
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(Str(refused, "error").find("only an activity that sold nothing"), std::string::npos)
      << refused.body;
  auto missing = client.Request("DELETE", "/api/v1/admin/activities/never", "", service.admin);
  EXPECT_EQ(missing.status, 404) << missing.body;

  // Gone from the public list, the page's activity route, the admin list, Redis and /metrics.
  auto list = client.Get("/api/v1/activities");
  ASSERT_EQ(Json(list).at("activities").as_array().size(), 1u) << list.body;
  EXPECT_EQ(Json(list).at("activities").as_array()[0].at("id").as_string(), "sold") << list.body;
  EXPECT_EQ(client.Get("/api/v1/activities/oops").status, 404);
  EXPECT_EQ(
      Str(client.Post("/api/v1/activities/oops/purchase", "", {{"X-User-Id", "bob"}}), "status"),
      "unknown_activity");
  auto admin_list = client.Get("/api/v1/admin/activities", service.admin);
  EXPECT_EQ(Json(admin_list).at("activities").as_array().size(), 1u) << admin_list.body;
  EXPECT_EQ(KeysContaining(service.data_dir, "{oops}"), "");
  EXPECT_EQ(KeysContaining(service.data_dir, "{typo}"), "");
  for (int i = 0; i < 150; ++i) {
    metrics = client.Get("/metrics").body;
    if (metrics.find(R"(activity="oops")") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(metrics.find(R"(activity="oops")"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(R"(activity="sold")"), std::string::npos) << metrics;
}

// --- 4. Over the limit; 5. the identity mode; 9. 401 and the payment deadline -------------------

TEST(NewcomerProcessTest, OverTheLimitSaysSoAndHowManyAreLeftToBuy) {
  Service service({"--identity", "gateway"});
  ASSERT_TRUE(service.Start());
  HttpClient client("127.0.0.1", service.port);
  ASSERT_EQ(client
                .Post("/api/v1/admin/activities",
                      R"({"id":"two","stock":10,"per_user_limit":2,"payment_window_ms":60000})",
                      service.admin)
                .status,
            201);
  const std::map<std::string, std::string> ann = {{"X-User-Id", "ann"}};
  auto three = client.Post("/api/v1/activities/two/purchase", R"({"quantity":3})", ann);
  EXPECT_EQ(three.status, 200) << three.body;
  EXPECT_EQ(Str(three, "status"), "limit_exceeded") << three.body;
  EXPECT_EQ(Str(three, "code"), "-9") << three.body;
  EXPECT_EQ(Str(three, "may_buy"), "2") << three.body;

  const int64_t before = NowMs();
  auto one = client.Post("/api/v1/activities/two/purchase", R"({"quantity":1})", ann);
  EXPECT_EQ(Str(one, "status"), "reserved") << one.body;
  const json::value reserved = Json(one);
  ASSERT_TRUE(reserved.as_object().contains("pay_by_ms")) << one.body;
  EXPECT_GE(reserved.at("pay_by_ms").as_int64(), before + 60'000) << one.body;

  auto two = client.Post("/api/v1/activities/two/purchase", R"({"quantity":2})", ann);
  EXPECT_EQ(Str(two, "status"), "limit_exceeded") << two.body;
  EXPECT_EQ(Str(two, "may_buy"), "1") << two.body;
  ASSERT_EQ(Str(client.Post("/api/v1/activities/two/purchase", "", ann), "status"), "reserved");
  // At the limit: a previous purchase, as before.
  auto again = client.Post("/api/v1/activities/two/purchase", "", ann);
  EXPECT_EQ(Str(again, "status"), "already_purchased") << again.body;
  EXPECT_EQ(Str(again, "code"), "0") << again.body;

  auto config = client.Get("/api/v1/config");
  EXPECT_EQ(config.status, 200) << config.body;
  EXPECT_EQ(Str(config, "identity"), "gateway") << config.body;
  // In gateway mode the admin routes still answer 401 with the scheme they take.
  auto refused = client.Get("/api/v1/admin/activities");
  EXPECT_EQ(refused.status, 401) << refused.body;
  EXPECT_EQ(refused.headers["www-authenticate"].rfind("Bearer", 0), 0u) << refused.body;
}

TEST(NewcomerProcessTest, TokenModeIsToldToPagesAndA401NamesTheScheme) {
  Service service;  // token identity, the default
  ASSERT_TRUE(service.Start());
  HttpClient client("127.0.0.1", service.port);
  auto config = client.Get("/api/v1/config");
  EXPECT_EQ(config.status, 200) << config.body;
  EXPECT_EQ(Str(config, "identity"), "token") << config.body;
  ASSERT_EQ(
      client.Post("/api/v1/admin/activities", R"({"id":"sale","stock":1})", service.admin).status,
      201);
  auto anonymous = client.Post("/api/v1/activities/sale/purchase", "");
  EXPECT_EQ(anonymous.status, 401) << anonymous.body;
  EXPECT_EQ(anonymous.headers["www-authenticate"].rfind("Bearer", 0), 0u)
      << "no WWW-Authenticate: Bearer on a 401";
}

// --- 8. Metrics that do not cry wolf ------------------------------------------------------------

// The value of the series `name` (with its labels) in Prometheus text, or -1.
double Series(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

TEST(NewcomerProcessTest, CreatingSalesAndIdlingCountsNoRedisErrorAndJobRunsAreByJob) {
  Service service(
      {"--prewarm-every-ms", "200", "--reconcile-every-ms", "300", "--expire-every-ms", "200"});
  ASSERT_TRUE(service.Start());
  HttpClient client("127.0.0.1", service.port);
  ASSERT_EQ(
      client.Post("/api/v1/admin/activities", R"({"id":"sale","stock":5})", service.admin).status,
      201);
  ASSERT_EQ(client
                .Post("/api/v1/admin/activities",
                      R"({"id":"draw","kind":"lottery","admission":"queue",
                            "prizes":[{"id":"p","weight":1,"stock":1}]})",
                      service.admin)
                .status,
            201);
  ASSERT_EQ(client.Get("/api/v1/admin/activities/sale", service.admin).status, 200);
  // Idle while every job has run a few times (bounded).
  std::string metrics;
  for (int i = 0; i < 100; ++i) {
    metrics = client.Get("/metrics").body;
    if (Series(metrics, R"(flashsale_job_runs_total{job="reconcile"})") >= 2 &&
        Series(metrics, R"(flashsale_job_runs_total{job="expire"})") >= 2 &&
        Series(metrics, R"(flashsale_job_runs_total{job="prewarm"})") >= 2) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_GE(Series(metrics, R"(flashsale_job_runs_total{job="reconcile"})"), 2) << metrics;
  EXPECT_GE(Series(metrics, R"(flashsale_job_runs_total{job="expire"})"), 2) << metrics;
  for (const char* kind : {"unavailable", "unknown_outcome", "remote"}) {
    EXPECT_EQ(Series(metrics, fmt::format(R"(flashsale_redis_errors_total{{kind="{}"}})", kind)), 0)
        << kind << "\n"
        << metrics;
  }
  EXPECT_EQ(Series(metrics, "flashsale_order_db_errors_total"), 0) << metrics;
}

// --- 3. A Redis that may evict stock ------------------------------------------------------------

TEST(NewcomerProcessTest, AnEvictingRedisIsRefusedUnlessAllowedExplicitly) {
  TempDir tmp;
  testing::RedisServer lru(
      testing::RedisServerOptions{.extra_args = {"--maxmemory-policy", "allkeys-lru"}});
  const std::string data_dir = tmp / "data";
  const Finished refused = RunToExit(
      ServeArgs(FreePort(), data_dir, {"--redis-url", lru.tcp_url()}), tmp, "refused.log");
  ASSERT_TRUE(refused.status.has_value());
  EXPECT_EQ(ExitCode(refused.status), 1) << refused.output;
  EXPECT_NE(refused.output.find("maxmemory-policy is allkeys-lru"), std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("--allow-evicting-redis"), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find("serving on"), std::string::npos) << refused.output;
  const Finished worker = RunToExit(
      {"worker", "--data-dir", data_dir, "--redis-url", lru.tcp_url()}, tmp, "worker.log");
  EXPECT_EQ(ExitCode(worker.status), 1) << worker.output;
  EXPECT_NE(worker.output.find("maxmemory-policy is allkeys-lru"), std::string::npos)
      << worker.output;

  {  // The override: it starts, and says what it risks.
    const uint16_t port = FreePort();
    Flashsale serve(
        ServeArgs(port, data_dir, {"--redis-url", lru.tcp_url(), "--allow-evicting-redis"}),
        tmp / "allowed.log", data_dir);
    ASSERT_TRUE(testing::WaitHealthy(serve, port, kStartupTimeout));
    EXPECT_NE(serve.Log().find("maxmemory-policy is allkeys-lru"), std::string::npos)
        << serve.Log();
  }
  // volatile-* evicts only keys with a TTL, which stock and orders never have: accepted.
  testing::RedisServer volatile_lru(
      testing::RedisServerOptions{.extra_args = {"--maxmemory-policy", "volatile-lru"}});
  const uint16_t port = FreePort();
  Flashsale serve(ServeArgs(port, tmp / "data2", {"--redis-url", volatile_lru.tcp_url()}),
                  tmp / "volatile.log", tmp / "data2");
  EXPECT_TRUE(testing::WaitHealthy(serve, port, kStartupTimeout));
}

// --- 3. Instances that share a secret and an admin token ----------------------------------------

TEST(NewcomerProcessTest, InstancesSharingASecretAcceptEachOthersTokens) {
  const std::string secret = "a-secret-shared-by-every-instance";
  const std::string admin = "an-admin-token-shared-by-every-instance";
  const std::vector<std::string> shared = {"--secret", secret, "--admin-token", admin};
  Service first(shared);
  Service second(shared);
  ASSERT_TRUE(first.Start());
  ASSERT_TRUE(second.Start());
  const std::map<std::string, std::string> admin_headers = {{"Authorization", "Bearer " + admin}};
  HttpClient a("127.0.0.1", first.port);
  HttpClient b("127.0.0.1", second.port);
  EXPECT_EQ(b.Get("/api/v1/admin/activities", admin_headers).status, 200);
  auto issued = a.Post("/api/v1/admin/tokens", R"({"user_id":"alice"})", admin_headers);
  ASSERT_EQ(issued.status, 200) << issued.body;
  const std::string from_a = Str(issued, "token");
  auto orders = b.Get("/api/v1/orders", {{"Authorization", "Bearer " + from_a}});
  EXPECT_EQ(orders.status, 200) << "a token from one instance refused by the other: "
                                << orders.body;
  EXPECT_EQ(Str(orders, "user_id"), "alice") << orders.body;
  // flashsale token with the same secret: accepted by both.
  const Finished cli =
      RunToExit({"token", "--user", "bob", "--secret", secret}, first.tmp, "token.log");
  ASSERT_EQ(ExitCode(cli.status), 0) << cli.output;
  const std::string from_cli = cli.output.substr(0, cli.output.find('\n'));
  for (HttpClient* client : {&a, &b}) {
    auto mine = client->Get("/api/v1/orders", {{"Authorization", "Bearer " + from_cli}});
    EXPECT_EQ(mine.status, 200) << mine.body;
  }
}

// --- 3. TLS to Redis (rediss://) ----------------------------------------------------------------

TEST(NewcomerProcessTest, RedissReachesATlsRedisAndRefusesACertificateItCannotVerify) {
  TempDir tmp;
  const std::string cert = tmp / "cert.pem";
  const std::string key = tmp / "key.pem";
  const std::string make_cert = fmt::format(
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout {} -out {} -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1",
      key, cert);
  ASSERT_EQ(std::system(make_cert.c_str()), 0) << make_cert;
  const uint16_t tls_port = FreePort();
  testing::RedisServer redis(testing::RedisServerOptions{
      .extra_args = {"--tls-port", std::to_string(tls_port), "--tls-cert-file", cert,
                     "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients",
                     "no"}});
  const std::string url = fmt::format("rediss://127.0.0.1:{}?cacert={}", tls_port, cert);
  {
    Service service({"--redis-url", url, "--identity", "gateway"});
    ASSERT_TRUE(service.Start());
    EXPECT_NE(service.serve.Log().find("rediss://127.0.0.1"), std::string::npos)
        << service.serve.Log();
    HttpClient client("127.0.0.1", service.port);
    auto ready = client.Get("/readyz");
    EXPECT_EQ(ready.status, 200) << ready.body;
    ASSERT_EQ(
        client.Post("/api/v1/admin/activities", R"({"id":"tls","stock":2})", service.admin).status,
        201);
    auto bought = client.Post("/api/v1/activities/tls/purchase", "", {{"X-User-Id", "ann"}});
    EXPECT_EQ(Str(bought, "status"), "reserved") << bought.body;
    // It went over TLS to that Redis: the plain port of the same server has the sale.
    const auto remaining = redis.Command({"GET", "fs:seckill:{tls}:stock"});
    ASSERT_NE(remaining, nullptr);
    EXPECT_EQ(std::string(remaining->str, remaining->len), "1");
  }
  // Without the CA, the self-signed certificate does not verify: not ready, saying why.
  Service unverified({"--redis-url", fmt::format("rediss://127.0.0.1:{}", tls_port)});
  ASSERT_TRUE(unverified.Start());
  HttpClient client("127.0.0.1", unverified.port);
  // The public answer says it in words; the admin sees the detail.
  auto ready = client.Get("/readyz");
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_EQ(ready.body.find("rediss://"), std::string::npos) << ready.body;
  auto detail = client.Get("/readyz", unverified.admin);
  EXPECT_EQ(detail.status, 503) << detail.body;
  EXPECT_NE(detail.body.find("certificate verify failed"), std::string::npos) << detail.body;
}

// --- 3. TLS to MySQL/MariaDB (?ssl-mode=, ?ssl-ca=) ---------------------------------------------

TEST(NewcomerProcessTest, ServeRecordsOrdersInMariaDbOverTlsAndRefusesACertificateItCannotVerify) {
  // The server refuses TCP without TLS: orders that land in it came over TLS.
  testing::MariaDbServer db(
      testing::MariaDbServerOptions{.tls = true, .require_secure_transport = true});
  const std::string url = db.UniqueDatabase();
  const std::string database = url.substr(url.rfind('/') + 1);
  {
    Service service(
        {"--db-url", url + "?ssl-mode=VERIFY_CA&ssl-ca=" + db.ca_path(), "--identity", "gateway"});
    ASSERT_TRUE(service.Start()) << service.serve.Log();
    HttpClient client("127.0.0.1", service.port);
    EXPECT_EQ(client.Get("/readyz").status, 200);
    ASSERT_EQ(
        client.Post("/api/v1/admin/activities", R"({"id":"tls","stock":2})", service.admin).status,
        201);
    auto bought = client.Post("/api/v1/activities/tls/purchase", "", {{"X-User-Id", "ann"}});
    EXPECT_EQ(Str(bought, "status"), "reserved") << bought.body;
    std::string orders = "0";
    for (int i = 0; i < 300 && orders == "0"; ++i) {  // up to 30 s for the consumer
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      orders = db.Scalar("SELECT COUNT(*) FROM orders WHERE user_id = 'ann'", database);
    }
    EXPECT_EQ(orders, "1");
  }
  // Another CA: serve does not start, and says why (without the password).
  TempDir tmp;
  const Finished refused =
      RunToExit(ServeArgs(FreePort(), tmp / "data",
                          {"--db-url", url + "?ssl-mode=VERIFY_CA&ssl-ca=" + db.other_ca_path()}),
                tmp, "refused.log");
  ASSERT_TRUE(refused.status.has_value()) << "serve is still running";
  EXPECT_NE(ExitCode(refused.status), 0) << refused.output;
  EXPECT_NE(refused.output.find("certificate"), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find(testing::MariaDbServer::kPassword), std::string::npos)
      << refused.output;
}

// --- 7. One CLI vocabulary ----------------------------------------------------------------------

TEST(NewcomerProcessTest, WorkerHelpListsOnlyWhatAWorkerUses) {
  TempDir tmp;
  const Finished help = RunToExit({"worker", "--help"}, tmp, "worker-help.log");
  EXPECT_EQ(ExitCode(help.status), 0) << help.output;
  // --listen: a worker serves /metrics, /healthz and /readyz on a port of its own.
  for (const char* present : {"--redis-url", "--db-url", "--key-namespace", "--consumers",
                              "--data-dir", "--reconcile-every-ms", "--listen"}) {
    EXPECT_NE(help.output.find(present), std::string::npos) << present << "\n" << help.output;
  }
  for (const char* absent : {"--demo", "--threads", "--identity", "--admin-token",
                             "--max-body-bytes", "--trust-forwarded-for"}) {
    EXPECT_EQ(help.output.find(absent), std::string::npos) << absent << "\n" << help.output;
  }
  // serve still has them all.
  const Finished serve = RunToExit({"serve", "--help"}, tmp, "serve-help.log");
  EXPECT_NE(serve.output.find("--listen"), std::string::npos) << serve.output;
  EXPECT_NE(serve.output.find("--demo"), std::string::npos) << serve.output;
}

TEST(NewcomerProcessTest, LoadSpeaksServesNamesAndAnExpiredTokenIsRefused) {
  TempDir tmp;
  const Finished help = RunToExit({"load", "--help"}, tmp, "load-help.log");
  EXPECT_EQ(ExitCode(help.status), 0) << help.output;
  EXPECT_NE(help.output.find("--key-namespace"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("--secret"), std::string::npos) << help.output;
  EXPECT_EQ(help.output.find("--token-secret"), std::string::npos) << help.output;
  EXPECT_EQ(help.output.find("--namespace "), std::string::npos) << help.output;
  // Token identity (serve's default) needs the secret: said with serve's flag name.
  const Finished token_load =
      RunToExit({"load", "--requests", "1", "--identity", "token", "--url", "http://127.0.0.1:1"},
                tmp, "load-token.log");
  EXPECT_EQ(ExitCode(token_load.status), 2) << token_load.output;
  EXPECT_NE(token_load.output.find("--secret"), std::string::npos) << token_load.output;
  // The old names still parse.
  const Finished old_names =
      RunToExit({"load", "--requests", "1", "--identity", "token", "--namespace", "fs",
                 "--token-secret", "0123456789abcdef0123", "--no-verify", "--url",
                 "http://127.0.0.1:1", "--connect-timeout-ms", "200"},
                tmp, "load-old.log");
  EXPECT_EQ(old_names.output.find("not expected"), std::string::npos) << old_names.output;
  EXPECT_EQ(old_names.output.find("token identity needs"), std::string::npos) << old_names.output;

  for (const char* ttl : {"-1", "0"}) {
    const Finished refused =
        RunToExit({"token", "--user", "alice", "--secret", "0123456789abcdef0123", "--ttl-s", ttl},
                  tmp, fmt::format("ttl{}.log", ttl));
    EXPECT_EQ(ExitCode(refused.status), 2) << ttl << ": " << refused.output;
    EXPECT_NE(refused.output.find("--ttl-s"), std::string::npos) << refused.output;
  }
}

TEST(NewcomerProcessTest, ActivityCommandsListAsATableUpdateRestockAndJobsAreNamed) {
  Service service;
  ASSERT_TRUE(service.Start());
  const std::string file = service.tmp / "sale.json";
  {
    std::ofstream out(file);
    out << R"({"id":"cli","title":"From the CLI","stock":4,"per_user_limit":2})";
  }
  const Finished created = service.Cli({"activity", "create", file}, "create.log");
  ASSERT_EQ(ExitCode(created.status), 0) << created.output;

  const Finished update_file = [&] {
    const std::string patch = service.tmp / "patch.json";
    std::ofstream(patch) << R"({"title":"Renamed","per_user_limit":3})";
    return service.Cli({"activity", "update", "cli", patch}, "update.log");
  }();
  EXPECT_EQ(ExitCode(update_file.status), 0) << update_file.output;
  const Finished stock = service.Cli({"activity", "stock", "cli", "6"}, "stock.log");
  EXPECT_EQ(ExitCode(stock.status), 0) << stock.output;
  const Finished items = service.Cli({"activity", "stock", "cli", "--items", "A,B"}, "items.log");
  EXPECT_EQ(ExitCode(items.status), 1) << items.output;
  EXPECT_NE(items.output.find("send units, not items"), std::string::npos) << items.output;

  // A table as on a terminal (--text; in a pipe the default is the API's JSON).
  const Finished table = service.Cli({"activity", "list", "--text"}, "list.log");
  ASSERT_EQ(ExitCode(table.status), 0) << table.output;
  EXPECT_NE(table.output.find("ID"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("REMAINING"), std::string::npos) << table.output;
  EXPECT_EQ(table.output.find('{'), std::string::npos) << "not a table:\n" << table.output;
  // The row: id, kind, state, remaining 10, reserved 0, total 10, limit 3, ..., the new title.
  const size_t row = table.output.find("\ncli ");
  ASSERT_NE(row, std::string::npos) << table.output;
  const std::string line = table.output.substr(row + 1, table.output.find('\n', row + 1) - row - 1);
  std::istringstream words(line);
  std::vector<std::string> cells{std::istream_iterator<std::string>(words), {}};
  ASSERT_GE(cells.size(), 7u) << line;
  EXPECT_EQ(cells[1], "counted") << line;
  EXPECT_EQ(cells[2], "open") << line;
  EXPECT_EQ(cells[3], "10") << line;
  EXPECT_EQ(cells[4], "0") << line;
  EXPECT_EQ(cells[5], "10") << line;
  EXPECT_EQ(cells[6], "3") << line;
  EXPECT_NE(line.find("Renamed"), std::string::npos) << line;

  const Finished json_list = service.Cli({"activity", "list", "--json"}, "list-json.log");
  ASSERT_EQ(ExitCode(json_list.status), 0) << json_list.output;
  EXPECT_NE(json_list.output.find(R"("activities":[)"), std::string::npos) << json_list.output;

  const Finished unknown = service.Cli({"job", "foo"}, "job-foo.log");
  EXPECT_NE(ExitCode(unknown.status), 0) << unknown.output;
  for (const char* job : {"prewarm", "reconcile", "expire"}) {
    EXPECT_NE(unknown.output.find(job), std::string::npos) << job << "\n" << unknown.output;
  }
}

}  // namespace
}  // namespace flashsale
