// The HTTP service end to end over real sockets: a real redis-server, a real SQLite file, the
// server's own threads. Each test drives it as a client would.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json/parse.hpp>
#include <set>
#include <thread>

#include "server/server_fixture.h"
#include "service/registry.h"

namespace flashsale::server {
namespace {

namespace json = boost::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::RedisServer;
using testing::ServerFixture;
using testing::ServerFixtureOptions;

json::value Json(const HttpResult& result) {
  boost::system::error_code error;
  json::value value = json::parse(result.body, error);
  if (error) return json::value(result.body);
  return value;
}

int64_t Int(const json::value& v, std::string_view key) { return v.at(key).as_int64(); }
std::string Str(const json::value& v, std::string_view key) {
  return std::string(v.at(key).as_string());
}

class HttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }
  void SetUp() override { Start({}); }

  void Start(ServerFixtureOptions options) {
    server_.reset();
    server_ = std::make_unique<ServerFixture>(*redis_, options);
  }

  // Creates an activity open now for an hour.
  HttpResult Create(const std::string& body) {
    return server_->Client().Post("/api/v1/admin/activities", body, server_->Admin());
  }
  HttpResult Buy(HttpClient& client, const std::string& activity, const std::string& user,
                 std::map<std::string, std::string> headers = {}, std::string body = "") {
    headers["X-User-Id"] = user;
    return client.Post("/api/v1/activities/" + activity + "/purchase", body, headers);
  }
  // The value of one series (name with its labels), or -1 when /metrics does not have it.
  int64_t Series(std::string_view series) {
    const std::string text = server_->metrics().RenderPrometheus();
    const std::string key = "\n" + std::string(series) + " ";
    const size_t at = text.find(key);
    return at == std::string::npos ? -1 : std::stoll(text.substr(at + key.size()));
  }
  int64_t RedisCommands() { return Series("flashsale_redis_commands_total"); }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
};
RedisServer* HttpTest::redis_ = nullptr;

TEST_F(HttpTest, CreateBuyAndReadBack) {
  auto created = Create(R"({"id":"phone","title":"A phone","stock":2,"per_user_limit":1})");
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(Str(Json(created).at("activity"), "id"), "phone");
  EXPECT_TRUE(Json(created).at("redis").at("loaded").as_bool());
  EXPECT_EQ(Int(Json(created).at("redis"), "remaining"), 2);

  HttpClient client = server_->Client();
  auto bought = Buy(client, "phone", "alice");
  ASSERT_EQ(bought.status, 200) << bought.body;
  const json::value reply = Json(bought);
  EXPECT_EQ(Int(reply, "code"), 1);
  EXPECT_EQ(Str(reply, "status"), "reserved");
  EXPECT_EQ(Int(reply, "remaining"), 1);
  const std::string order_id = Str(reply, "order_id");
  EXPECT_EQ(order_id.size(), 26u);

  auto again = Buy(client, "phone", "alice");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(Int(Json(again), "code"), 0);
  EXPECT_EQ(Str(Json(again), "status"), "already_purchased");

  // The buyer finds the order at once (before any database has it).
  auto orders = client.Get("/api/v1/orders", ServerFixture::User("alice"));
  ASSERT_EQ(orders.status, 200) << orders.body;
  const json::value orders_json = Json(orders);
  const auto& list = orders_json.at("orders").as_array();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(Str(list[0], "order_id"), order_id);
  EXPECT_EQ(Str(list[0], "state"), "reserved");
  EXPECT_EQ(
      Json(client.Get("/api/v1/orders", ServerFixture::User("bob"))).at("orders").as_array().size(),
      0u);

  auto info = client.Get("/api/v1/activities/phone");
  ASSERT_EQ(info.status, 200) << info.body;
  EXPECT_EQ(Str(Json(info).at("activity"), "title"), "A phone");
  EXPECT_EQ(Int(Json(info), "remaining"), 1);
  EXPECT_EQ(Int(Json(info), "server_time_ms"), ServerFixture::kStartMs);

  auto status = client.Get("/api/v1/admin/activities/phone", server_->Admin());
  ASSERT_EQ(status.status, 200) << status.body;
  const json::value status_json = Json(status);
  const auto& redis = status_json.at("redis");
  EXPECT_EQ(Int(redis, "remaining"), 1);
  EXPECT_EQ(Int(redis, "reserved"), 1);
  EXPECT_EQ(Int(redis, "stream_length"), 1);
}

TEST_F(HttpTest, EveryOutcomeHasItsCodeAndStatus) {
  const int64_t now = ServerFixture::kStartMs;
  ASSERT_EQ(Create(R"({"id":"one","stock":1})").status, 201);
  ASSERT_EQ(Create(fmt::format(R"({{"id":"later","stock":5,"start_ms":{},"end_ms":{}}})",
                               now + 60'000, now + 120'000))
                .status,
            201);
  // A window already over is refused at creation: this one ends a moment after now, and the
  // clock passes its end before "over" is bought from.
  ASSERT_EQ(Create(fmt::format(R"({{"id":"over","stock":5,"start_ms":{},"end_ms":{}}})",
                               now - 120'000, now + 1))
                .status,
            201);
  ASSERT_EQ(Create(R"({"id":"shut","stock":5,"open":false})").status, 201);

  HttpClient client = server_->Client();
  auto expect = [&](const std::string& activity, const std::string& user, int http, int code,
                    const std::string& word) {
    auto reply = Buy(client, activity, user);
    EXPECT_EQ(reply.status, http) << activity << ": " << reply.body;
    EXPECT_EQ(Int(Json(reply), "code"), code) << reply.body;
    EXPECT_EQ(Str(Json(reply), "status"), word) << reply.body;
  };
  expect("one", "u1", 200, 1, "reserved");
  expect("one", "u1", 200, 0, "already_purchased");
  expect("one", "u2", 200, -1, "sold_out");
  expect("later", "u1", 200, -2, "not_started");
  server_->clock().Advance(1);
  expect("over", "u1", 200, -3, "ended");
  expect("ghost", "u1", 404, -4, "unknown_activity");
  expect("shut", "u1", 200, -5, "closed");

  // The clock moves: the later sale opens.
  server_->clock().Advance(60'000);
  expect("later", "u1", 200, 1, "reserved");
}

TEST_F(HttpTest, ScriptCallsAndTheRequestsTheyCarriedAreCountedByKind) {
  ASSERT_EQ(Create(R"({"id":"counted","stock":10,"per_user_limit":1})").status, 201);
  EXPECT_EQ(Series("flashsale_script_calls_total{kind=\"reserve\"}"), 0);
  HttpClient client = server_->Client();
  // One client, one request at a time: nothing arrives while a call is in flight, so every
  // call carries one request.
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(Int(Json(Buy(client, "counted", "buyer" + std::to_string(i))), "code"), 1);
  }
  EXPECT_EQ(Series("flashsale_script_calls_total{kind=\"reserve\"}"), 5);
  EXPECT_EQ(Series("flashsale_script_requests_total{kind=\"reserve\"}"), 5);
  EXPECT_EQ(Series("flashsale_script_largest_batch{kind=\"reserve\"}"), 1);
  EXPECT_EQ(Series("flashsale_script_calls_total{kind=\"draw\"}"), 0);
}

TEST_F(HttpTest, RefusalsThatNeedNoRedisCostNoRedisCall) {
  // The registry's own polling (one GET every registry_poll) would be counted too: none here.
  ServerFixtureOptions quiet;
  quiet.server.registry_poll = std::chrono::hours(1);
  Start(quiet);
  ASSERT_EQ(Create(R"({"id":"flash","stock":1})").status, 201);
  HttpClient client = server_->Client();
  ASSERT_EQ(Int(Json(Buy(client, "flash", "first")), "code"), 1);
  // The first sold-out reply comes from Redis and sets this thread's flag...
  for (int i = 0; i < 4; ++i) Buy(client, "flash", "late" + std::to_string(i));
  const int64_t before = RedisCommands();
  for (int i = 0; i < 50; ++i) {
    auto reply = Buy(client, "flash", "later" + std::to_string(i));
    ASSERT_EQ(Int(Json(reply), "code"), -1);
  }
  for (int i = 0; i < 20; ++i) ASSERT_EQ(Buy(client, "ghost", "u").status, 404);
  // ...then the sold-out phase and unknown activities cost Redis nothing.
  EXPECT_EQ(RedisCommands(), before);
  const std::string metrics = server_->metrics().RenderPrometheus();
  EXPECT_NE(metrics.find("flashsale_local_refusals_total{reason=\"sold_out\"}"), std::string::npos);
  EXPECT_EQ(metrics.find("flashsale_local_refusals_total{reason=\"sold_out\"} 0\n"),
            std::string::npos);

  // Stock added (on any instance: through the registry version) clears the flag.
  auto added =
      client.Post("/api/v1/admin/activities/flash/stock", R"({"units":1})", server_->Admin());
  ASSERT_EQ(added.status, 200) << added.body;
  EXPECT_EQ(Int(Json(Buy(client, "flash", "newcomer")), "code"), 1);
}

TEST_F(HttpTest, IdempotencyKeyReturnsTheFirstResultOnAnyConnection) {
  ASSERT_EQ(Create(R"({"id":"idem","stock":5})").status, 201);
  HttpClient a = server_->Client();
  HttpClient b = server_->Client();
  auto first = Buy(a, "idem", "alice", {{"Idempotency-Key", "k-1"}});
  ASSERT_EQ(Int(Json(first), "code"), 1);
  auto retry = Buy(b, "idem", "alice", {{"Idempotency-Key", "k-1"}});
  ASSERT_EQ(retry.status, 200) << retry.body;
  EXPECT_EQ(Int(Json(retry), "code"), 1);
  EXPECT_EQ(Str(Json(retry), "order_id"), Str(Json(first), "order_id"));
  EXPECT_TRUE(Json(retry).at("replayed").as_bool());
  // Another user with the same key is another request.
  EXPECT_EQ(Int(Json(Buy(b, "idem", "bob", {{"Idempotency-Key", "k-1"}})), "code"), 1);
  auto status = a.Get("/api/v1/admin/activities/idem", server_->Admin());
  EXPECT_EQ(Int(Json(status).at("redis"), "reserved"), 2);
}

TEST_F(HttpTest, RateLimitAnswers429WithRetryAfter) {
  ASSERT_EQ(Create(R"({"id":"rl","stock":100,"per_user_limit":100,
                       "user_rate":{"per_second":1,"burst":2}})")
                .status,
            201);
  HttpClient client = server_->Client();
  EXPECT_EQ(Int(Json(Buy(client, "rl", "alice")), "code"), 1);
  EXPECT_EQ(Int(Json(Buy(client, "rl", "alice")), "code"), 1);
  auto limited = Buy(client, "rl", "alice");
  EXPECT_EQ(limited.status, 429) << limited.body;
  EXPECT_EQ(Int(Json(limited), "code"), -7);
  EXPECT_EQ(limited.headers["retry-after"], "1");
  // Other users have their own budget; time restores alice's.
  EXPECT_EQ(Int(Json(Buy(client, "rl", "bob")), "code"), 1);
  server_->clock().Advance(1000);
  EXPECT_EQ(Int(Json(Buy(client, "rl", "alice")), "code"), 1);
}

TEST_F(HttpTest, TokenMode) {
  ServerFixtureOptions options;
  options.mode = IdentityMode::kToken;
  Start(options);
  ASSERT_EQ(Create(R"({"id":"tok","stock":5})").status, 201);
  HttpClient client = server_->Client();
  auto none = client.Post("/api/v1/activities/tok/purchase", "");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(Str(Json(none), "status"), "unauthorized");
  // The gateway header means nothing in token mode.
  EXPECT_EQ(client.Post("/api/v1/activities/tok/purchase", "", {{"X-User-Id", "alice"}}).status,
            401);
  auto forged = client.Post("/api/v1/activities/tok/purchase", "",
                            {{"Authorization", "Bearer YWxpY2U.9999999999999.AAAA"}});
  EXPECT_EQ(forged.status, 401);

  auto issued =
      client.Post("/api/v1/admin/tokens", R"({"user_id":"alice","ttl_s":60})", server_->Admin());
  ASSERT_EQ(issued.status, 200) << issued.body;
  const std::string token = Str(Json(issued), "token");
  const std::map<std::string, std::string> auth = {{"Authorization", "Bearer " + token}};
  auto bought = client.Post("/api/v1/activities/tok/purchase", "", auth);
  ASSERT_EQ(bought.status, 200) << bought.body;
  EXPECT_EQ(Int(Json(bought), "code"), 1);
  EXPECT_EQ(Json(client.Get("/api/v1/orders", auth)).at("user_id").as_string(), "alice");
  server_->clock().Advance(61'000);
  EXPECT_EQ(client.Post("/api/v1/activities/tok/purchase", "", auth).status, 401);
}

TEST_F(HttpTest, AdminRoutesNeedTheAdminToken) {
  HttpClient client = server_->Client();
  EXPECT_EQ(client.Post("/api/v1/admin/activities", R"({"id":"x","stock":1})").status, 401);
  EXPECT_EQ(client
                .Post("/api/v1/admin/activities", R"({"id":"x","stock":1})",
                      {{"Authorization", "Bearer wrong"}})
                .status,
            401);
  EXPECT_EQ(client.Get("/api/v1/admin/activities", {{"X-User-Id", "alice"}}).status, 401);
  EXPECT_EQ(client.Get("/api/v1/admin/activities", server_->Admin()).status, 200);
}

TEST_F(HttpTest, AdminLifecycle) {
  HttpClient client = server_->Client();
  ASSERT_EQ(Create(R"({"id":"life","stock":1})").status, 201);
  auto duplicate = Create(R"({"id":"life","stock":1})");
  EXPECT_EQ(duplicate.status, 409) << duplicate.body;
  auto closed = client.Post("/api/v1/admin/activities/life/close", "", server_->Admin());
  ASSERT_EQ(closed.status, 200) << closed.body;
  EXPECT_EQ(Str(Json(closed).at("redis"), "state"), "closed");
  EXPECT_EQ(Int(Json(Buy(client, "life", "u")), "code"), -5);
  ASSERT_EQ(client.Post("/api/v1/admin/activities/life/open", "", server_->Admin()).status, 200);
  EXPECT_EQ(Int(Json(Buy(client, "life", "u")), "code"), 1);

  auto patched = client.Request("PATCH", "/api/v1/admin/activities/life",
                                R"({"per_user_limit":3,"title":"Renamed"})", server_->Admin());
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(Int(Json(patched).at("activity"), "per_user_limit"), 3);
  EXPECT_EQ(Int(Json(patched).at("activity"), "version"), 4);

  auto coupons = Create(R"({"id":"coupons","kind":"items","items":["C1","C2"]})");
  ASSERT_EQ(coupons.status, 201) << coupons.body;
  auto more = client.Post("/api/v1/admin/activities/coupons/stock", R"({"items":["C3"]})",
                          server_->Admin());
  ASSERT_EQ(more.status, 200) << more.body;
  EXPECT_EQ(Int(Json(more).at("redis"), "remaining"), 3);
  auto clash = client.Post("/api/v1/admin/activities/coupons/stock", R"({"items":["C1"]})",
                           server_->Admin());
  EXPECT_EQ(clash.status, 409) << clash.body;
  auto list = client.Get("/api/v1/admin/activities", server_->Admin());
  EXPECT_EQ(Json(list).at("activities").as_array().size(), 2u);
  EXPECT_EQ(client.Get("/api/v1/admin/activities/nope", server_->Admin()).status, 404);
}

TEST_F(HttpTest, ActivityInfoUsesTheVersionedCacheKey) {
  ASSERT_EQ(Create(R"({"id":"cached","stock":3,"title":"v1"})").status, 201);
  HttpClient client = server_->Client();
  ASSERT_EQ(client.Get("/api/v1/activities/cached").status, 200);
  // <namespace>:cache:seckill:activity:<md5 of {"activity_id":"cached"}>:v1
  auto keys = redis_->Command({"KEYS", server_->key_namespace() + ":cache:*"});
  ASSERT_EQ(keys->elements, 1u);
  const std::string key = keys->element[0]->str;
  EXPECT_TRUE(key.ends_with(":v1")) << key;
  EXPECT_NE(key.find(":cache:seckill:activity:"), std::string::npos);

  // A change bumps the version: readers move to a new key and see the new title.
  ASSERT_EQ(client
                .Request("PATCH", "/api/v1/admin/activities/cached", R"({"title":"v2"})",
                         server_->Admin())
                .status,
            200);
  auto info = client.Get("/api/v1/activities/cached");
  EXPECT_EQ(Str(Json(info).at("activity"), "title"), "v2");
  EXPECT_EQ(redis_->Command({"KEYS", server_->key_namespace() + ":cache:*:v2"})->elements, 1u);
}

TEST_F(HttpTest, AnotherInstanceSeesChangesThroughTheRegistryVersion) {
  // Two instances on one Redis and one database, as behind a load balancer.
  ServerFixtureOptions second_options;
  second_options.key_namespace = server_->key_namespace();
  second_options.data_dir = server_->data_dir();
  second_options.server.registry_poll = std::chrono::milliseconds(20);
  ServerFixture second(*redis_, second_options);
  ASSERT_EQ(Create(R"({"id":"shared","stock":1})").status, 201);
  HttpClient other = second.Client();
  HttpResult reply;
  for (int i = 0; i < 200; ++i) {
    reply = Buy(other, "shared", "carol");
    if (reply.status != 404) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Int(Json(reply), "code"), 1) << reply.body;
}

TEST_F(HttpTest, HealthReadinessAndMetrics) {
  HttpClient client = server_->Client();
  EXPECT_EQ(client.Get("/healthz").status, 200);
  auto ready = client.Get("/readyz");
  EXPECT_EQ(ready.status, 200) << ready.body;
  auto metrics = client.Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_TRUE(metrics.headers["content-type"].starts_with("text/plain"));
  EXPECT_NE(metrics.body.find("flashsale_http_requests_total{route=\"readyz\",status=\"ok\"} 1"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("flashsale_http_request_duration_seconds_bucket{route=\"healthz\""),
            std::string::npos);
  EXPECT_NE(metrics.body.find("flashsale_redis_command_duration_seconds_count"), std::string::npos);
  EXPECT_NE(client.Get("/").body.find("flashsale"), std::string::npos);
}

TEST_F(HttpTest, WebFilesAreServedWithTheirTypeAndRevalidated) {
  HttpClient client = server_->Client();
  auto page = client.Get("/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_EQ(page.headers["cache-control"], "no-cache");
  const std::string etag = page.headers["etag"];
  ASSERT_EQ(etag.size(), 34u) << etag;  // a quoted MD5
  EXPECT_NE(page.body.find("/web/buyer.js"), std::string::npos);
  // An unchanged file costs a 304 with no body; a stale ETag gets the file again.
  auto same = client.Get("/", {{"If-None-Match", etag}});
  EXPECT_EQ(same.status, 304);
  EXPECT_TRUE(same.body.empty());
  EXPECT_EQ(same.headers["etag"], etag);
  EXPECT_EQ(client.Get("/", {{"If-None-Match", "\"0123\""}}).status, 200);

  auto dashboard = client.Get("/dashboard");
  EXPECT_EQ(dashboard.status, 200);
  EXPECT_NE(dashboard.body.find("/web/dashboard.js"), std::string::npos);
  EXPECT_EQ(client.Get("/web/buyer.js").headers["content-type"], "text/javascript; charset=utf-8");
  EXPECT_EQ(client.Get("/web/style.css").headers["content-type"], "text/css; charset=utf-8");
  EXPECT_EQ(client.Get("/web/README.md").status, 404);  // only the page's own files
  EXPECT_EQ(client.Get("/web/..%2Fsecret").status, 404);
  EXPECT_EQ(client.Post("/dashboard", "").status, 405);
}

TEST_F(HttpTest, RedisDownIs503AndNothingIsLost) {
  // A private Redis this test may kill.
  auto own_redis = std::make_unique<RedisServer>(
      testing::RedisServerOptions{.appendonly = true, .appendfsync = "always"});
  ServerFixture server(*own_redis);
  HttpClient client = server.Client();
  ASSERT_EQ(
      client.Post("/api/v1/admin/activities", R"({"id":"fragile","stock":10})", server.Admin())
          .status,
      201);
  ASSERT_EQ(Int(Json(Buy(client, "fragile", "a")), "code"), 1);
  own_redis->Kill();
  auto down = Buy(client, "fragile", "b");
  EXPECT_EQ(down.status, 503) << down.body;
  EXPECT_TRUE(down.headers.contains("retry-after"));
  EXPECT_EQ(client.Get("/readyz").status, 503);
  own_redis->Start();
  HttpResult after;
  for (int i = 0; i < 300; ++i) {
    after = Buy(client, "fragile", "b");
    if (after.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Int(Json(after), "code"), 1) << after.body;
  auto status = client.Get("/api/v1/admin/activities/fragile", server.Admin());
  EXPECT_EQ(Int(Json(status).at("redis"), "reserved"), 2);
  EXPECT_EQ(Int(Json(status).at("redis"), "stream_length"), 2);
}

TEST_F(HttpTest, ConcurrentPurchasesSellExactlyTheStock) {
  constexpr int kStock = 300;
  constexpr int kConnections = 32;
  constexpr int kAttemptsEach = 40;
  ASSERT_EQ(Create(fmt::format(R"({{"id":"rush","stock":{},"per_user_limit":2}})", kStock)).status,
            201);
  std::atomic<int> reserved = 0, sold_out = 0, limited = 0, other = 0;
  std::mutex mutex;
  std::set<std::string> orders;
  std::vector<std::thread> threads;
  for (int c = 0; c < kConnections; ++c) {
    threads.emplace_back([&, c] {
      HttpClient client = server_->Client();
      for (int i = 0; i < kAttemptsEach; ++i) {
        auto reply = Buy(client, "rush", "user" + std::to_string((c * 7 + i) % 500));
        if (reply.status != 200) {
          ++other;
          continue;
        }
        const json::value v = Json(reply);
        switch (Int(v, "code")) {
          case 1: {
            ++reserved;
            std::lock_guard lock(mutex);
            orders.insert(Str(v, "order_id"));
            break;
          }
          case -1:
            ++sold_out;
            break;
          case 0:
            ++limited;
            break;
          default:
            ++other;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(reserved.load(), kStock);
  EXPECT_EQ(orders.size(), static_cast<size_t>(kStock));
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(reserved + sold_out + limited, kConnections * kAttemptsEach);
  auto status = server_->Client().Get("/api/v1/admin/activities/rush", server_->Admin());
  const json::value status_json = Json(status);
  const auto& redis = status_json.at("redis");
  EXPECT_EQ(Int(redis, "remaining"), 0);
  EXPECT_EQ(Int(redis, "reserved"), kStock);
  EXPECT_EQ(Int(redis, "orders"), kStock);
  // An intent per order, in as many entries as reserve calls: concurrent purchases share calls.
  EXPECT_GE(Int(redis, "stream_length"), 1);
  EXPECT_LE(Int(redis, "stream_length"), kStock);
}

TEST_F(HttpTest, StopFinishesRequestsInFlight) {
  ASSERT_EQ(Create(R"({"id":"drain","stock":1000,"per_user_limit":1000})").status, 201);
  std::atomic<bool> stop = false;
  std::atomic<int> ok = 0, failed = 0;
  std::thread load([&] {
    HttpClient client = server_->Client();
    while (!stop) {
      auto reply = Buy(client, "drain", "u");
      if (reply.status == 200) {
        ++ok;
      } else if (reply.status != 0) {
        ++failed;  // an answer other than success or a closed connection
      }
    }
  });
  while (ok < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_->Stop();  // returns once connections are drained
  stop = true;
  load.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(server_->Client().Get("/healthz").status, 0) << "still accepting after Stop";
}

}  // namespace
}  // namespace flashsale::server
