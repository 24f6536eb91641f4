// Lotteries over HTTP end to end (real sockets, a real redis-server, a real SQLite file): the
// draw route and its outcomes, draw limits, idempotency keys, the local sold-out answer, routes
// that do not fit the activity, concurrent draws from many connections, and admission queues:
// tickets, pending polls, the queue cap and ticket ownership.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json/parse.hpp>
#include <map>
#include <thread>

#include "server/server_fixture.h"

namespace flashsale::server {
namespace {

namespace json = boost::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::RedisServer;
using testing::ServerFixture;

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

class LotteryHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }
  void SetUp() override {
    // No registry polling: a test counts the Redis commands a local refusal does not make.
    testing::ServerFixtureOptions options;
    options.server.registry_poll = std::chrono::hours(1);
    server_ = std::make_unique<ServerFixture>(*redis_, options);
  }

  HttpResult Create(const std::string& body) {
    return server_->Client().Post("/api/v1/admin/activities", body, server_->Admin());
  }
  static HttpResult DrawAs(HttpClient& client, const std::string& activity, const std::string& user,
                           std::map<std::string, std::string> headers = {}) {
    headers["X-User-Id"] = user;
    return client.Post("/api/v1/activities/" + activity + "/draw", "", headers);
  }
  uint64_t RedisCommands() {
    const std::string text = server_->metrics().RenderPrometheus();
    const std::string_view key = "\nflashsale_redis_commands_total ";
    const size_t at = text.find(key);
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + key.size()));
  }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
};
RedisServer* LotteryHttpTest::redis_ = nullptr;

TEST_F(LotteryHttpTest, DrawsWinNameThePrizeAndCountAgainstTheLimit) {
  auto created = Create(
      R"({"id":"spring","title":"Spring draw","kind":"lottery","per_user_limit":2,
          "prizes":[{"id":"gold","name":"A gold coin","weight":1,"stock":3}]})");
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(Str(Json(created).at("activity"), "kind"), "lottery");
  EXPECT_EQ(Int(Json(created).at("redis"), "remaining"), 3);

  HttpClient client = server_->Client();
  // No "no prize" weight: every draw wins while prizes last.
  auto won = DrawAs(client, "spring", "alice");
  ASSERT_EQ(won.status, 200) << won.body;
  const json::value reply = Json(won);
  EXPECT_EQ(Int(reply, "code"), 1);
  EXPECT_EQ(Str(reply, "status"), "won");
  EXPECT_EQ(Str(reply.at("prize"), "id"), "gold");
  EXPECT_EQ(Str(reply.at("prize"), "name"), "A gold coin");
  EXPECT_EQ(Int(reply, "draws"), 1);
  EXPECT_EQ(Int(reply, "remaining"), 2);
  ASSERT_EQ(Int(Json(DrawAs(client, "spring", "alice")), "code"), 1);
  auto limited = DrawAs(client, "spring", "alice");
  EXPECT_EQ(limited.status, 200);
  EXPECT_EQ(Int(Json(limited), "code"), 0);
  EXPECT_EQ(Str(Json(limited), "status"), "limit_reached");
  EXPECT_EQ(Int(Json(limited), "draws"), 2);

  // The win is the user's order at once, with the prize as its item.
  auto orders = client.Get("/api/v1/orders", ServerFixture::User("alice"));
  ASSERT_EQ(orders.status, 200);
  const json::value orders_json = Json(orders);
  ASSERT_EQ(orders_json.at("orders").as_array().size(), 2u);
  EXPECT_EQ(orders_json.at("orders").as_array()[0].at("items").as_array()[0].as_string(), "gold");

  // The last prize, then every prize gone: -1, and from then on without a Redis round trip.
  ASSERT_EQ(Int(Json(DrawAs(client, "spring", "bob")), "code"), 1);
  auto gone = DrawAs(client, "spring", "carol");
  EXPECT_EQ(Int(Json(gone), "code"), -1);
  EXPECT_EQ(Str(Json(gone), "status"), "sold_out");
  const uint64_t before = RedisCommands();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(Int(Json(DrawAs(client, "spring", "dave")), "code"), -1);
  }
  EXPECT_EQ(RedisCommands(), before);
}

TEST_F(LotteryHttpTest, NoPrizeIsItsOwnOutcomeAndIdempotencyKeysReplay) {
  ASSERT_EQ(Create(R"({"id":"slim","kind":"lottery","no_prize_weight":1000000000,
                      "prizes":[{"id":"p","name":"P","weight":1,"stock":1}]})")
                .status,
            201);
  HttpClient client = server_->Client();
  const std::map<std::string, std::string> key = {{"Idempotency-Key", "k-1"}};
  auto first = DrawAs(client, "slim", "erin", key);
  ASSERT_EQ(first.status, 200) << first.body;
  // One chance in 10^9 of a win: a draw that wins nothing is code 2, and still a draw.
  EXPECT_EQ(Int(Json(first), "code"), 2);
  EXPECT_EQ(Str(Json(first), "status"), "no_prize");
  EXPECT_EQ(Int(Json(first), "draws"), 1);
  auto retry = DrawAs(client, "slim", "erin", key);
  EXPECT_EQ(Int(Json(retry), "code"), 2);
  EXPECT_TRUE(Json(retry).at("replayed").as_bool());
  EXPECT_EQ(Str(Json(retry), "order_id"), Str(Json(first), "order_id"));
  // Not a second draw: the limit (1) is not reached by the retry, but a new draw is refused.
  EXPECT_EQ(Int(Json(DrawAs(client, "slim", "erin")), "code"), 0);
}

TEST_F(LotteryHttpTest, RoutesThatDoNotFitTheActivityAre400AndBadDefinitionsToo) {
  ASSERT_EQ(Create(R"({"id":"draw1","kind":"lottery",
                      "prizes":[{"id":"p","name":"P","weight":1,"stock":1}]})")
                .status,
            201);
  ASSERT_EQ(Create(R"({"id":"sale1","stock":5})").status, 201);
  HttpClient client = server_->Client();
  auto buy = client.Post("/api/v1/activities/draw1/purchase", "", ServerFixture::User("u"));
  EXPECT_EQ(buy.status, 400) << buy.body;
  EXPECT_NE(Str(Json(buy), "error").find("lottery"), std::string::npos);
  auto draw = DrawAs(client, "sale1", "u");
  EXPECT_EQ(draw.status, 400) << draw.body;
  EXPECT_EQ(DrawAs(client, "nope", "u").status, 404);
  EXPECT_EQ(
      client.Post("/api/v1/activities/draw1/draw", R"({"x":1})", ServerFixture::User("u")).status,
      400);
  // A lottery's stock is its prizes'.
  auto restock =
      client.Post("/api/v1/admin/activities/draw1/stock", R"({"units":5})", server_->Admin());
  EXPECT_EQ(restock.status, 400) << restock.body;
  for (const char* bad : {
           R"({"id":"b1","kind":"lottery"})",
           R"({"id":"b2","kind":"lottery","prizes":[]})",
           R"({"id":"b3","kind":"lottery","prizes":[{"id":"p","weight":0,"stock":1}]})",
           R"({"id":"b4","kind":"lottery","prizes":[{"id":"p","weight":1,"stock":-1}]})",
           R"({"id":"b5","kind":"lottery","prizes":[{"id":"p","weight":1,"stock":1},
               {"id":"p","weight":1,"stock":1}]})",
           R"({"id":"b6","kind":"lottery","prizes":[{"id":"p","weight":1,"stock":1}],"stock":3})",
           R"({"id":"b7","kind":"lottery","prizes":[{"id":"p","weight":1,"stock":1}],
               "admission":"lifo"})",
           R"({"id":"b8","stock":1,"no_prize_weight":3})",
           R"({"id":"b9","kind":"lottery","prizes":[{"id":"a b","weight":1,"stock":1}]})",
           R"({"id":"b10","kind":"lottery","prizes":"p"})",
       }) {
    auto refused = Create(bad);
    EXPECT_EQ(refused.status, 400) << bad << " -> " << refused.body;
  }
}

TEST_F(LotteryHttpTest, ConcurrentDrawsFromManyConnectionsIssueExactlyThePrizes) {
  ASSERT_EQ(Create(R"({"id":"rush","kind":"lottery","no_prize_weight":2,
                      "prizes":[{"id":"a","name":"A","weight":1,"stock":20},
                                {"id":"b","name":"B","weight":1,"stock":30}]})")
                .status,
            201);
  std::atomic<int> won_a = 0, won_b = 0, no_prize = 0, gone = 0, other = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client = server_->Client();
      for (int i = 0; i < 40; ++i) {
        auto reply = DrawAs(client, "rush", fmt::format("t{}-u{}", t, i));
        const json::value body = Json(reply);
        const int64_t code = reply.status == 200 ? Int(body, "code") : 99;
        if (code == 1) {
          (Str(body.at("prize"), "id") == "a" ? won_a : won_b)++;
        } else if (code == 2) {
          ++no_prize;
        } else if (code == -1) {
          ++gone;
        } else {
          ++other;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(won_a.load(), 20);
  EXPECT_EQ(won_b.load(), 30);
  EXPECT_EQ(won_a + won_b + no_prize + gone, 320);
  auto status = server_->Client().Get("/api/v1/admin/activities/rush", server_->Admin());
  EXPECT_EQ(Int(Json(status).at("redis"), "remaining"), 0);
  EXPECT_EQ(Int(Json(status).at("redis"), "stream_length"), 50);
}

TEST_F(LotteryHttpTest, AQueuedDrawGetsATicketThatOnlyItsOwnerCanPoll) {
  // No queue consumer runs in this fixture: tickets stay pending, and the queue fills up.
  ASSERT_EQ(Create(R"({"id":"q","kind":"lottery","admission":"queue","queue_capacity":3,
                      "prizes":[{"id":"p","name":"P","weight":1,"stock":10}]})")
                .status,
            201);
  HttpClient client = server_->Client();
  auto queued = DrawAs(client, "q", "alice", {{"Idempotency-Key", "once"}});
  ASSERT_EQ(queued.status, 202) << queued.body;
  EXPECT_EQ(Str(Json(queued), "status"), "queued");
  const std::string ticket = Str(Json(queued), "ticket");
  const std::string url = Str(Json(queued), "ticket_url");
  EXPECT_EQ(url, "/api/v1/activities/q/tickets/" + ticket);
  // 202 Accepted points at where the outcome will be (RFC 9110 15.3.3): the ticket.
  EXPECT_EQ(queued.headers["location"], url);
  // A retry with the same key joins no second time: the same ticket.
  auto again = DrawAs(client, "q", "alice", {{"Idempotency-Key", "once"}});
  EXPECT_EQ(Str(Json(again), "ticket"), ticket);

  auto pending = client.Get(url, ServerFixture::User("alice"));
  EXPECT_EQ(pending.status, 202) << pending.body;
  EXPECT_EQ(Str(Json(pending), "status"), "pending");
  auto waited = client.Get(url + "?wait_ms=200", ServerFixture::User("alice"));
  EXPECT_EQ(waited.status, 202);
  EXPECT_EQ(client.Get(url, ServerFixture::User("mallory")).status, 404);
  EXPECT_EQ(client.Get("/api/v1/activities/q/tickets/nope", ServerFixture::User("alice")).status,
            404);
  EXPECT_EQ(client.Get(url + "?wait_ms=99999", ServerFixture::User("alice")).status, 400);
  EXPECT_EQ(client.Get(url + "?sleep=1", ServerFixture::User("alice")).status, 400);
  EXPECT_EQ(client.Get(url).status, 401);

  // The cap: 3 entries wait; the next draw is told to come back, nothing is queued.
  ASSERT_EQ(DrawAs(client, "q", "bob").status, 202);
  ASSERT_EQ(DrawAs(client, "q", "carol").status, 202);
  auto full = DrawAs(client, "q", "dave");
  EXPECT_EQ(full.status, 503) << full.body;
  EXPECT_EQ(Int(Json(full), "code"), -8);
  EXPECT_EQ(full.headers["retry-after"], "1");
  const std::string queue_key = fmt::format("{}:seckill:{{q}}:queue", server_->key_namespace());
  EXPECT_EQ(redis_->Integer({"XLEN", queue_key}), 3);
}

}  // namespace
}  // namespace flashsale::server
