// The holes an audit found (issue 15), each driven from outside over real sockets against a real
// redis-server and a real SQLite file: the definition checks, the identity headers, what the
// API returns being accepted back.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <string>
#include <thread>

#include "base/crypto.h"
#include "server/server_fixture.h"

namespace flashsale::server {
namespace {

namespace json = boost::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::RedisServer;
using testing::SendRaw;
using testing::ServerFixture;
using testing::ServerFixtureOptions;
using testing::StatusCodes;

json::value Json(const HttpResult& result) {
  boost::system::error_code error;
  json::value value = json::parse(result.body, error);
  if (error) return json::value(result.body);
  return value;
}

std::string ErrorText(const HttpResult& result) {
  const json::value value = Json(result);
  if (!value.is_object() || !value.as_object().contains("error")) return result.body;
  return std::string(value.at("error").as_string());
}

class AuditTest : public ::testing::Test {
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
  HttpResult Create(const std::string& body) {
    return server_->Client().Post("/api/v1/admin/activities", body, server_->Admin());
  }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
};
RedisServer* AuditTest::redis_ = nullptr;

uint64_t Counter(ServerFixture& server, std::string_view name) {
  const std::string text = server.metrics().RenderPrometheus();
  const std::string key = "\n" + std::string(name) + " ";
  const size_t at = text.find(key);
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + key.size()));
}

// Point 8: cancelled wins were never returned to the prize stock, so a payment window on a
// lottery destroyed prizes. It is refused at creation and by PATCH, naming the field.
TEST_F(AuditTest, PaymentWindowOnALotteryIsRefused) {
  auto created = Create(R"({"id":"lw","kind":"lottery","payment_window_ms":60000,
                            "prizes":[{"id":"p","name":"P","weight":1,"stock":3}]})");
  EXPECT_EQ(created.status, 400) << created.body;
  EXPECT_NE(ErrorText(created).find("payment_window_ms"), std::string::npos) << created.body;

  ASSERT_EQ(Create(R"({"id":"lw2","kind":"lottery",
                       "prizes":[{"id":"p","name":"P","weight":1,"stock":3}]})")
                .status,
            201);
  auto patched = server_->Client().Request("PATCH", "/api/v1/admin/activities/lw2",
                                           R"({"payment_window_ms":60000})", server_->Admin());
  EXPECT_EQ(patched.status, 400) << patched.body;
  EXPECT_NE(ErrorText(patched).find("payment_window_ms"), std::string::npos) << patched.body;
  // Zero (never expire) stays accepted, and sales keep their windows.
  EXPECT_EQ(server_->Client()
                .Request("PATCH", "/api/v1/admin/activities/lw2", R"({"payment_window_ms":0})",
                         server_->Admin())
                .status,
            200);
  EXPECT_EQ(Create(R"({"id":"sw","stock":3,"payment_window_ms":60000})").status, 201);
}

// Point 11: a prize id with ':' passed validation, then the setup script refused it (503).
TEST_F(AuditTest, PrizeIdsWithAColonAre400) {
  auto created = Create(R"({"id":"colon","kind":"lottery",
                            "prizes":[{"id":"a:b","name":"AB","weight":1,"stock":3}]})");
  EXPECT_EQ(created.status, 400) << created.body;
  EXPECT_NE(ErrorText(created).find("a:b"), std::string::npos) << created.body;
  // The same lottery with a plain id is created and loaded.
  auto plain = Create(R"({"id":"colon","kind":"lottery",
                          "prizes":[{"id":"a_b","name":"AB","weight":1,"stock":3}]})");
  EXPECT_EQ(plain.status, 201) << plain.body;
}

// Point 12: with two X-User-Id headers the first one bought; a gateway that appends instead of
// replacing let the client choose its user. Also two Authorization headers in token mode.
TEST_F(AuditTest, MoreThanOneIdentityHeaderIs400) {
  ASSERT_EQ(Create(R"({"id":"twice","stock":5})").status, 201);
  const std::string two_users =
      "POST /api/v1/activities/twice/purchase HTTP/1.1\r\nHost: x\r\nX-User-Id: mallory\r\n"
      "X-User-Id: alice\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  const std::string raw = SendRaw(server_->port(), two_users);
  EXPECT_EQ(StatusCodes(raw), std::vector<int>{400}) << raw;
  // Nobody bought: both users still can.
  HttpClient client = server_->Client();
  for (const char* user : {"mallory", "alice"}) {
    auto bought = client.Post("/api/v1/activities/twice/purchase", "", ServerFixture::User(user));
    EXPECT_EQ(std::string(Json(bought).at("status").as_string()), "reserved")
        << user << ": " << bought.body;
  }

  ServerFixtureOptions token_mode;
  token_mode.mode = IdentityMode::kToken;
  Start(token_mode);
  ASSERT_EQ(Create(R"({"id":"twice2","stock":5})").status, 201);
  const std::string a = server_->identity().signer.Issue("alice", ServerFixture::kStartMs + 60'000);
  const std::string b = server_->identity().signer.Issue("bob", ServerFixture::kStartMs + 60'000);
  const std::string two_tokens = fmt::format(
      "POST /api/v1/activities/twice2/purchase HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n"
      "Authorization: Bearer {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
      a, b);
  const std::string raw2 = SendRaw(server_->port(), two_tokens);
  EXPECT_EQ(StatusCodes(raw2), std::vector<int>{400}) << raw2;
}

// Point 12: an optional secret shared by the gateway and the service. Set, a request without it
// or with a wrong one is 401 and buys nothing; with it, the gateway's user buys.
TEST_F(AuditTest, GatewaySecretWhenSetIsRequired) {
  ServerFixtureOptions options;
  options.gateway_secret = "s3cret-between-gateway-and-service";
  Start(options);
  ASSERT_EQ(Create(R"({"id":"gw","stock":5})").status, 201);
  HttpClient client = server_->Client();
  auto none = client.Post("/api/v1/activities/gw/purchase", "", ServerFixture::User("u1"));
  EXPECT_EQ(none.status, 401) << none.body;
  auto wrong = client.Post("/api/v1/activities/gw/purchase", "",
                           {{"X-User-Id", "u1"}, {"X-Gateway-Secret", "guess"}});
  EXPECT_EQ(wrong.status, 401) << wrong.body;
  auto right = client.Post("/api/v1/activities/gw/purchase", "",
                           {{"X-User-Id", "u1"}, {"X-Gateway-Secret", options.gateway_secret}});
  EXPECT_EQ(right.status, 200) << right.body;
  EXPECT_EQ(Json(right).at("status").as_string(), "reserved") << right.body;
}

// Point 13: public replies said which Redis (socket path, host, port) or database failed. They
// now say what happened in words; the details are for the log and the admin.
TEST_F(AuditTest, PublicErrorRepliesNameNoInternalEndpoint) {
  auto own_redis = std::make_unique<RedisServer>();
  ServerFixture server(*own_redis);
  HttpClient client = server.Client();
  ASSERT_EQ(client.Post("/api/v1/admin/activities", R"({"id":"hidden","stock":10})", server.Admin())
                .status,
            201);
  ASSERT_EQ(client
                .Post("/api/v1/admin/activities",
                      R"({"id":"hiddenl","kind":"lottery",
                          "prizes":[{"id":"p","name":"P","weight":1,"stock":3}]})",
                      server.Admin())
                .status,
            201);
  own_redis->Kill();
  const std::vector<std::string> secrets = {
      own_redis->dir(), own_redis->socket_path(), "unix:", "redis.sock", "127.0.0.1",
      "sqlite:",        server.data_dir()};
  auto expect_clean = [&](const HttpResult& reply, const std::string& what) {
    EXPECT_EQ(reply.status, 503) << what << ": " << reply.body;
    for (const std::string& secret : secrets) {
      EXPECT_EQ(reply.body.find(secret), std::string::npos)
          << what << " names '" << secret << "': " << reply.body;
    }
  };
  expect_clean(client.Post("/api/v1/activities/hidden/purchase", "", ServerFixture::User("a")),
               "purchase");
  expect_clean(client.Post("/api/v1/activities/hiddenl/draw", "", ServerFixture::User("a")),
               "draw");
  expect_clean(client.Get("/readyz"), "readyz");
  // The admin still learns which Redis failed.
  auto admin_ready = client.Get("/readyz", server.Admin());
  EXPECT_EQ(admin_ready.status, 503) << admin_ready.body;
  EXPECT_NE(admin_ready.body.find(own_redis->socket_path()), std::string::npos) << admin_ready.body;
}

// Point 7: attempt 1 of a reserve (or a draw) is sent and Redis dies before answering (its
// outcome is unknown: it may have reserved); attempt 2 fails fast as unavailable. The buyer was
// told 503 "unavailable" (safe to retry, nothing done) without the order id. Once an attempt's
// outcome is unknown, the reply says unknown_outcome and carries the order id.
TEST_F(AuditTest, AnUnknownOutcomeStaysUnknownAndCarriesTheOrderId) {
  for (const std::string kind : {"purchase", "draw"}) {
    auto own_redis = std::make_unique<RedisServer>();
    ServerFixtureOptions options;
    options.threads = 1;
    options.server.registry_poll = std::chrono::hours(1);  // no command but the test's
    options.redis_command_timeout = std::chrono::seconds(30);
    ServerFixture server(*own_redis, options);
    HttpClient client = server.Client();
    const std::string body =
        kind == "purchase"
            ? R"({"id":"lost","stock":10})"
            : R"({"id":"lost","kind":"lottery","prizes":[{"id":"p","name":"P","weight":1,"stock":3}]})";
    ASSERT_EQ(client.Post("/api/v1/admin/activities", body, server.Admin()).status, 201);
    const uint64_t before = Counter(server, "flashsale_redis_commands_total");
    own_redis->Pause();
    HttpResult reply;
    std::thread buyer([&] {
      HttpClient own = server.Client();
      reply = own.Post("/api/v1/activities/lost/" + kind, "", ServerFixture::User("u"));
    });
    // Once the script is sent (Redis, stopped, holds it unread), Redis dies.
    for (int i = 0; i < 2000 && Counter(server, "flashsale_redis_commands_total") == before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    own_redis->Kill();
    buyer.join();
    EXPECT_EQ(reply.status, 503) << kind << ": " << reply.body;
    const json::value answer = Json(reply);
    if (!answer.is_object()) {
      ADD_FAILURE() << kind << ": " << reply.body;
      continue;
    }
    EXPECT_EQ(std::string(answer.at("status").as_string()), "unknown_outcome")
        << kind << ": " << reply.body;
    if (!answer.as_object().contains("order_id")) {
      ADD_FAILURE() << kind << ": no order_id in " << reply.body;
      continue;
    }
    EXPECT_EQ(answer.at("order_id").as_string().size(), 26u) << kind << ": " << reply.body;
  }
}

// Point 5: one user looping POST .../draw filled a queued lottery's admission queue and
// everyone else got 503. A user holds at most as many pending tickets as draws left to them.
// (No queue consumer runs in this fixture: tickets stay pending.)
TEST_F(AuditTest, OneUserCannotFillAnAdmissionQueue) {
  ASSERT_EQ(Create(R"({"id":"qq","kind":"lottery","admission":"queue","queue_capacity":5,
                       "per_user_limit":2,
                       "prizes":[{"id":"p","name":"P","weight":1,"stock":10}]})")
                .status,
            201);
  HttpClient client = server_->Client();
  auto draw = [&](const std::string& user) {
    return client.Post("/api/v1/activities/qq/draw", "", ServerFixture::User(user));
  };
  int queued = 0;
  int refused = 0;
  for (int i = 0; i < 10; ++i) {
    auto reply = draw("greedy");
    if (reply.status == 202) {
      ++queued;
    } else {
      ++refused;
      if (reply.status != 200) ADD_FAILURE() << "draw " << i << ": " << reply.body;
    }
  }
  EXPECT_EQ(queued, 2) << "tickets pending for one user with two draws";
  EXPECT_EQ(refused, 8);
  auto last = draw("greedy");
  EXPECT_EQ(last.status, 200) << last.body;
  const json::value answer = Json(last);
  if (answer.is_object() && answer.as_object().contains("status")) {
    EXPECT_EQ(std::string(answer.at("status").as_string()), "limit_reached") << last.body;
  }
  // Everyone else still gets in.
  for (const char* user : {"a", "b", "c"}) {
    auto reply = draw(user);
    EXPECT_EQ(reply.status, 202) << user << ": " << reply.body;
  }
}

// Point 14: no cap on open connections (each idle one may live 60 s). Past the cap a new
// connection is refused at once (a minimal 503, then closed), counted in /metrics, and the
// connections held are still served.
TEST_F(AuditTest, ConnectionsPastTheCapAreRefusedAndCounted) {
  ServerFixtureOptions options;
  options.max_connections = 4;
  Start(options);
  std::vector<std::unique_ptr<HttpClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<HttpClient>("127.0.0.1", server_->port()));
    ASSERT_EQ(held.back()->Get("/healthz").status, 200) << "held connection " << i;
  }
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  for (int i = 0; i < 3; ++i) {
    const std::string raw = SendRaw(server_->port(), request);
    const std::vector<int> codes = StatusCodes(raw);
    EXPECT_TRUE(codes.empty() || codes == std::vector<int>{503}) << "extra " << i << ": " << raw;
  }
  uint64_t refused = 0;
  for (int i = 0; i < 500 && refused < 3; ++i) {
    refused = Counter(*server_, "flashsale_http_connections_refused_total");
    if (refused < 3) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(refused, 3u);
  // The held connections are served all along.
  for (auto& client : held) EXPECT_EQ(client->Get("/healthz").status, 200);
  // One closes: a new connection is served again.
  held.pop_back();
  std::vector<int> codes;
  for (int i = 0; i < 500; ++i) {
    codes = StatusCodes(SendRaw(server_->port(), request));
    if (codes == std::vector<int>{200}) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(codes, std::vector<int>{200});
}

// Point 15: the secret that signs tokens also keyed the ids in Redis key names (idempotency
// tokens, rate-limit keys). The key name of an Idempotency-Key must not be the HMAC of the user
// and key under the raw secret.
TEST_F(AuditTest, KeyIdsInRedisAreNotKeyedWithTheRawSecret) {
  ASSERT_EQ(Create(R"({"id":"keyed","stock":5})").status, 201);
  HttpClient client = server_->Client();
  auto bought = client.Post("/api/v1/activities/keyed/purchase", "",
                            {{"X-User-Id", "alice"}, {"Idempotency-Key", "k1"}});
  ASSERT_EQ(bought.status, 200) << bought.body;
  const std::string prefix = fmt::format("{}:seckill:{{keyed}}:idem:", server_->key_namespace());
  const std::string raw =
      base::HexEncode(base::HmacSha256("test-secret", "alice\nk1")).substr(0, 32);
  EXPECT_EQ(redis_->Integer({"EXISTS", prefix + raw}), 0) << prefix + raw;
  // The idempotency record is there, under another name.
  auto keys = redis_->Command({"KEYS", prefix + "*"});
  EXPECT_EQ(keys->elements, 1u);
}

// Point 1: a create loads Redis, then the database insert fails; Redis keeps that stock. Here
// Redis is left as the first attempt's setup script leaves it (1000 units counted, or 3 items),
// and the create is sent again with another stock: it must be refused (409, saying what Redis
// holds), never recorded with 100 while Redis sells 1000.
TEST_F(AuditTest, ACreateRefusesWhenRedisHoldsAnotherStock) {
  const std::string ns = server_->key_namespace();
  auto leave_loaded = [&](const std::string& id, const std::string& kind, int64_t units) {
    const std::string prefix = fmt::format("{}:seckill:{{{}}}:", ns, id);
    redis_->Command({"HSET",     prefix + "meta",
                     "start_ms", "0",
                     "end_ms",   "4000000000000",
                     "limit",    "1",
                     "state",    "open",
                     "kind",     kind,
                     "total",    std::to_string(units),
                     "reserved", "0",
                     "released", "0",
                     "version",  "1"});
    if (kind == "counted") {
      redis_->Command({"SET", prefix + "stock", std::to_string(units)});
    } else {
      for (int64_t i = 0; i < units; ++i) {
        redis_->Command({"RPUSH", prefix + "items", fmt::format("OLD{}", i)});
      }
    }
  };
  leave_loaded("half", "counted", 1000);
  auto counted = Create(R"({"id":"half","stock":100})");
  EXPECT_EQ(counted.status, 409) << counted.body;
  EXPECT_NE(ErrorText(counted).find("1000"), std::string::npos) << counted.body;

  leave_loaded("halfi", "items", 3);
  auto items = Create(R"({"id":"halfi","kind":"items","items":["A","B"]})");
  EXPECT_EQ(items.status, 409) << items.body;

  leave_loaded("halfk", "items", 3);
  auto kind = Create(R"({"id":"halfk","stock":3})");
  EXPECT_EQ(kind.status, 409) << kind.body;

  // Creating it again as the first attempt was (the same stock) completes it.
  auto same = Create(R"({"id":"half","stock":1000})");
  EXPECT_EQ(same.status, 201) << same.body;
}

// Point 1, two concurrent creates of one id with different stocks: whichever is recorded,
// Redis holds its stock.
TEST_F(AuditTest, ConcurrentCreatesLeaveRedisMatchingTheRecord) {
  for (int round = 0; round < 10; ++round) {
    const std::string id = fmt::format("race{}", round);
    HttpResult first, second;
    std::thread a([&] {
      HttpClient client("127.0.0.1", server_->port());
      first = client.Post("/api/v1/admin/activities",
                          fmt::format(R"({{"id":"{}","stock":1000}})", id), server_->Admin());
    });
    std::thread b([&] {
      HttpClient client("127.0.0.1", server_->port());
      second = client.Post("/api/v1/admin/activities",
                           fmt::format(R"({{"id":"{}","stock":100}})", id), server_->Admin());
    });
    a.join();
    b.join();
    EXPECT_TRUE(first.status == 201 || second.status == 201)
        << id << ": " << first.body << " / " << second.body;
    auto status = server_->Client().Get("/api/v1/admin/activities/" + id, server_->Admin());
    ASSERT_EQ(status.status, 200) << status.body;
    const json::value state = Json(status);
    EXPECT_EQ(state.at("redis").at("total").as_int64(),
              state.at("activity").at("total_units").as_int64())
        << id << ": " << status.body;
  }
}

// Point 2: the local sold-out flag was cleared only by a registry change; units returned to
// Redis without one (expiry's or reconciliation's release script) were never sold again by an
// I/O thread that had seen the sale sold out. Here every thread has seen it (one thread), a unit
// is put back in Redis as the release script does (INCR of the stock, no registry change), and
// time passes: the unit sells again. The sold-out phase itself stays local (no Redis command).
TEST_F(AuditTest, UnitsBackInRedisAreSoldAgainAfterSoldOut) {
  ServerFixtureOptions options;
  options.threads = 1;
  options.server.registry_poll = std::chrono::hours(1);
  Start(options);
  ASSERT_EQ(Create(R"({"id":"back","stock":1})").status, 201);
  HttpClient client = server_->Client();
  auto buy = [&](const std::string& user) {
    return Json(client.Post("/api/v1/activities/back/purchase", "", ServerFixture::User(user)));
  };
  ASSERT_EQ(buy("u1").at("code").as_int64(), 1);
  ASSERT_EQ(buy("u2").at("code").as_int64(), -1);  // from Redis: marks it sold out here
  const uint64_t before = Counter(*server_, "flashsale_redis_commands_total");
  for (int i = 0; i < 20; ++i) EXPECT_EQ(buy(fmt::format("s{}", i)).at("code").as_int64(), -1);
  EXPECT_EQ(Counter(*server_, "flashsale_redis_commands_total"), before)
      << "sold-out answers went to Redis";

  // A unit comes back (expiry or reconciliation released it): Redis sells it again.
  const std::string stock = fmt::format("{}:seckill:{{back}}:stock", server_->key_namespace());
  ASSERT_EQ(redis_->Integer({"INCR", stock}), 1);
  server_->clock().Advance(5000);
  const json::value again = buy("u3");
  EXPECT_EQ(again.at("code").as_int64(), 1) << json::serialize(again);
  EXPECT_EQ(redis_->Integer({"DECRBY", stock, "0"}), 0);
}

// Point 16: what GET .../admin/activities/{id} returns, POST (under a new id) and PATCH accept
// back: total_units, null rates, the version and times, a lottery's prizes.
TEST_F(AuditTest, AnActivityRoundTrips) {
  for (const std::string& body : {
           std::string(R"({"id":"rt","title":"Round","stock":7,"per_user_limit":2,
                           "user_rate":{"per_second":5,"burst":10},"payment_window_ms":60000})"),
           std::string(R"({"id":"rt","title":"Round","kind":"lottery","per_user_limit":1,
                           "prizes":[{"id":"p","name":"P","weight":1,"stock":2}],
                           "no_prize_weight":3,"admission":"queue","queue_capacity":10})"),
       }) {
    Start({});
    ASSERT_EQ(Create(body).status, 201) << body;
    HttpClient client = server_->Client();
    auto got = client.Get("/api/v1/admin/activities/rt", server_->Admin());
    ASSERT_EQ(got.status, 200) << got.body;
    json::object activity = Json(got).at("activity").as_object();

    auto patched = client.Request("PATCH", "/api/v1/admin/activities/rt", json::serialize(activity),
                                  server_->Admin());
    EXPECT_EQ(patched.status, 200) << patched.body;

    activity["id"] = "rt2";
    auto posted =
        client.Post("/api/v1/admin/activities", json::serialize(activity), server_->Admin());
    ASSERT_EQ(posted.status, 201) << posted.body;
    json::object copy = Json(posted).at("activity").as_object();
    for (const char* field : {"kind", "title", "start_ms", "end_ms", "per_user_limit", "open",
                              "total_units", "user_rate", "address_rate", "payment_window_ms"}) {
      EXPECT_EQ(copy.at(field), activity.at(field)) << field << " in " << posted.body;
    }
    if (activity.contains("prizes")) {
      EXPECT_EQ(copy.at("prizes"), activity.at("prizes"));
    }
    EXPECT_EQ(Json(posted).at("redis").at("total").as_int64(), activity.at("total_units"));

    // A PATCH that would change what PATCH cannot change is refused, naming the field.
    activity["id"] = "rt";
    activity["total_units"] = 1000;
    auto changed = client.Request("PATCH", "/api/v1/admin/activities/rt", json::serialize(activity),
                                  server_->Admin());
    EXPECT_EQ(changed.status, 400) << changed.body;
    EXPECT_NE(ErrorText(changed).find("total_units"), std::string::npos) << changed.body;
  }
}

}  // namespace
}  // namespace flashsale::server
