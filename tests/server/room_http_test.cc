// Issue 37: the waiting room over real HTTP against a real server (real Redis, a SQLite record, a
// manual clock): the definition, one place per user, the fair order of the places taken before
// the start (checked statistically on 10,000 places with a fixed seed), admission at the rate,
// passes refused unless issued to this user for this activity and unexpired, sold out said to
// everyone waiting, and a restart of the server losing no place.

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <cmath>
#include <latch>
#include <map>
#include <thread>
#include <vector>

#include "server/server_fixture.h"

namespace flashsale::server {
namespace {

namespace json = boost::json;
using testing::HttpResult;
using testing::RedisServer;
using testing::ServerFixture;
using testing::ServerFixtureOptions;

constexpr int64_t kStart = ServerFixture::kStartMs + 60'000;  // a minute after the clock's start

json::object Object(const HttpResult& reply) {
  boost::system::error_code error;
  json::value value = json::parse(reply.body, error);
  if (error || !value.is_object()) {
    ADD_FAILURE() << "not a JSON object: " << reply.status << " " << reply.body;
    return {};
  }
  return value.as_object();
}

std::string Str(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

int64_t Int(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_int64() ? v->as_int64() : -1;
}

class RoomHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }

  void Start(ServerFixtureOptions options = {}) {
    server_ = std::make_unique<ServerFixture>(*redis_, std::move(options));
  }

  HttpResult Admin(std::string_view method, const std::string& target, std::string_view body = {}) {
    return server_->Client().Request(method, target, body, server_->Admin());
  }

  // A sale starting at kStart with a room open from the clock's start.
  void CreateSale(const std::string& id, int64_t stock, int64_t admit_per_s,
                  int64_t pass_ttl_ms = 60'000, int64_t max_waiting = 1'000'000) {
    const std::string body = fmt::format(
        R"({{"id":"{}","stock":{},"start_ms":{},"end_ms":{},"waiting_room":{{
            "opens_before_ms":60000,"admit_per_s":{},"pass_ttl_ms":{},"max_waiting":{}}}}})",
        id, stock, kStart, kStart + 3'600'000, admit_per_s, pass_ttl_ms, max_waiting);
    auto created = Admin("POST", "/api/v1/admin/activities", body);
    ASSERT_EQ(created.status, 201) << created.body;
  }

  static HttpResult Join(testing::HttpClient& client, const std::string& id,
                         const std::string& user) {
    return client.Post("/api/v1/activities/" + id + "/join", "", ServerFixture::User(user));
  }
  static HttpResult Wait(testing::HttpClient& client, const std::string& id,
                         const std::string& user, int64_t wait_ms = 0) {
    return client.Get(fmt::format("/api/v1/activities/{}/wait?wait_ms={}", id, wait_ms),
                      ServerFixture::User(user));
  }
  static HttpResult Buy(testing::HttpClient& client, const std::string& id, const std::string& user,
                        const std::string& pass) {
    auto headers = ServerFixture::User(user);
    if (!pass.empty()) headers["X-Waiting-Room-Pass"] = pass;
    return client.Post("/api/v1/activities/" + id + "/purchase", "", headers);
  }

  // The room's members, first place first (what the places are made of: a sorted set).
  std::vector<std::string> RoomOrder(const std::string& id) {
    const std::string key = fmt::format("{}:seckill:{{{}}}:room", server_->key_namespace(), id);
    auto reply = redis_->Command({"ZRANGE", key, "0", "-1"});
    std::vector<std::string> users;
    for (size_t i = 0; i < reply->elements; ++i) users.emplace_back(reply->element[i]->str);
    return users;
  }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
};

RedisServer* RoomHttpTest::redis_ = nullptr;

TEST_F(RoomHttpTest, TheDefinitionTakesShowsAndTurnsOffARoom) {
  Start();
  ASSERT_NO_FATAL_FAILURE(CreateSale("phone", 10, 5, 30'000, 100));
  auto got = Object(Admin("GET", "/api/v1/admin/activities/phone"));
  const auto& room = got.at("activity").as_object().at("waiting_room").as_object();
  EXPECT_EQ(Int(room, "opens_before_ms"), 60'000);
  EXPECT_EQ(Int(room, "admit_per_s"), 5);
  EXPECT_EQ(Int(room, "pass_ttl_ms"), 30'000);
  EXPECT_EQ(Int(room, "max_waiting"), 100);
  auto info = Object(server_->Client().Get("/api/v1/activities/phone"));
  EXPECT_TRUE(info.at("activity").as_object().at("waiting_room").is_object());
  // Off by default.
  ASSERT_EQ(Admin("POST", "/api/v1/admin/activities", R"({"id":"plain","stock":1})").status, 201);
  EXPECT_TRUE(Object(Admin("GET", "/api/v1/admin/activities/plain"))
                  .at("activity")
                  .as_object()
                  .at("waiting_room")
                  .is_null());
  // Bad values are a 400 naming the field; a lottery takes none.
  for (std::string_view bad :
       {R"({"id":"b1","stock":1,"waiting_room":{"admit_per_s":0}})",
        R"({"id":"b2","stock":1,"waiting_room":{"pass_ttl_ms":5}})",
        R"({"id":"b3","stock":1,"waiting_room":{"surprise":1}})",
        R"({"id":"b4","stock":1,"waiting_room":7})",
        R"({"id":"b5","kind":"lottery","prizes":[{"id":"p","name":"P","weight":1,"stock":1}],
            "waiting_room":{"admit_per_s":1}})"}) {
    auto refused = Admin("POST", "/api/v1/admin/activities", bad);
    EXPECT_EQ(refused.status, 400) << bad << " " << refused.body;
    EXPECT_NE(refused.body.find("waiting_room"), std::string::npos) << refused.body;
  }
  // PATCH null turns it off; the GET body with it goes back.
  auto off = Admin("PATCH", "/api/v1/admin/activities/phone", R"({"waiting_room":null})");
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_TRUE(Object(off).at("activity").as_object().at("waiting_room").is_null());
  auto on = Admin("PATCH", "/api/v1/admin/activities/phone",
                  R"({"waiting_room":{"admit_per_s":9,"opens_before_ms":60000}})");
  ASSERT_EQ(on.status, 200) << on.body;
  EXPECT_EQ(
      Int(Object(on).at("activity").as_object().at("waiting_room").as_object(), "admit_per_s"), 9);
  // Deleting a sale that sold nothing removes its room too.
  auto client = server_->Client();
  ASSERT_EQ(Join(client, "phone", "alice").status, 200);
  ASSERT_EQ(RoomOrder("phone").size(), 1u);
  auto deleted = Admin("DELETE", "/api/v1/admin/activities/phone");
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_TRUE(RoomOrder("phone").empty());
}

TEST_F(RoomHttpTest, JoinsOpenAtTheirTimeAndOnlyForARoom) {
  Start();
  const int64_t late_start = ServerFixture::kStartMs + 600'000;
  ASSERT_EQ(Admin("POST", "/api/v1/admin/activities",
                  fmt::format(R"({{"id":"later","stock":1,"start_ms":{},
                      "waiting_room":{{"opens_before_ms":60000,"admit_per_s":1}}}})",
                              late_start))
                .status,
            201);
  ASSERT_EQ(Admin("POST", "/api/v1/admin/activities", R"({"id":"plain","stock":1})").status, 201);
  auto client = server_->Client();
  auto early = Join(client, "later", "alice");
  EXPECT_EQ(early.status, 409) << early.body;
  server_->clock().Set(late_start - 60'000);
  EXPECT_EQ(Join(client, "later", "alice").status, 200);
  EXPECT_EQ(Join(client, "plain", "alice").status, 404);
  EXPECT_EQ(Join(client, "nothing", "alice").status, 404);
  auto not_joined = Object(Wait(client, "later", "bob"));
  EXPECT_EQ(Str(not_joined, "status"), "not_joined");
}

// Issue 37, point 4: joins are held to the activity's per-address (and per-user) GCRA rate, in
// buckets of their own: one address cannot take places for many users at once.
TEST_F(RoomHttpTest, JoinsFromOneAddressAreRateLimited) {
  Start();
  ASSERT_EQ(Admin("POST", "/api/v1/admin/activities",
                  fmt::format(R"({{"id":"phone","stock":5,"start_ms":{},
                      "address_rate":{{"per_second":1,"burst":2}},
                      "waiting_room":{{"opens_before_ms":60000,"admit_per_s":1}}}})",
                              kStart))
                .status,
            201);
  auto client = server_->Client();
  EXPECT_EQ(Join(client, "phone", "bot1").status, 200);
  EXPECT_EQ(Join(client, "phone", "bot2").status, 200);
  auto refused = Join(client, "phone", "bot3");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(Str(Object(refused), "status"), "rate_limited");
  EXPECT_EQ(refused.headers["retry-after"], "1");
  EXPECT_EQ(RoomOrder("phone").size(), 2u);
  server_->clock().Advance(1'000);  // the bucket refills: one more
  EXPECT_EQ(Join(client, "phone", "bot3").status, 200);
  EXPECT_EQ(RoomOrder("phone").size(), 3u);
}

// Issue 37, point 6: one place per user under 64 concurrent joins.
TEST_F(RoomHttpTest, SixtyFourConcurrentJoinsOfOneUserTakeOnePlace) {
  Start({.threads = 2});
  ASSERT_NO_FATAL_FAILURE(CreateSale("phone", 10, 5));
  constexpr int kJoins = 64;
  std::latch go(kJoins);
  std::vector<HttpResult> replies(kJoins);
  std::vector<std::thread> threads;
  for (int i = 0; i < kJoins; ++i) {
    threads.emplace_back([&, i] {
      auto client = server_->Client();
      go.arrive_and_wait();
      // Half of them as the same user, the other half as users of their own.
      replies[i] = Join(client, "phone", i % 2 == 0 ? "same" : fmt::format("u{}", i));
    });
  }
  for (auto& thread : threads) thread.join();
  int took = 0;
  for (int i = 0; i < kJoins; i += 2) {
    ASSERT_EQ(replies[i].status, 200) << replies[i].body;
    auto reply = Object(replies[i]);
    EXPECT_EQ(Str(reply, "status"), "drawing");
    if (reply.at("joined").as_bool()) ++took;
  }
  EXPECT_EQ(took, 1);
  const auto order = RoomOrder("phone");
  EXPECT_EQ(order.size(), 1u + kJoins / 2);
  EXPECT_EQ(std::count(order.begin(), order.end(), "same"), 1);
}

// Issue 37, point 6: fairness. 10,000 places taken before the start come out in a uniformly random
// order (a fixed seed: the same order each run), never the arrival order; places taken after the
// start go behind them in arrival order.
TEST_F(RoomHttpTest, PlacesTakenBeforeTheStartAreInAUniformlyRandomOrder) {
  Start({.threads = 1, .random_seed = 37});
  ASSERT_NO_FATAL_FAILURE(CreateSale("phone", 10, 100));
  constexpr int kPlaces = 10'000;
  auto client = server_->Client();
  for (int i = 0; i < kPlaces; ++i) {
    auto joined = Join(client, "phone", fmt::format("u{}", i));
    ASSERT_EQ(joined.status, 200) << joined.body;
  }
  // Before the start no place is shown: the order is not drawn yet.
  auto drawing = Object(Wait(client, "phone", "u0"));
  EXPECT_EQ(Str(drawing, "status"), "drawing");
  EXPECT_TRUE(drawing.at("place").is_null());
  EXPECT_EQ(Int(drawing, "waiting"), kPlaces);

  server_->clock().Set(kStart);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Join(client, "phone", fmt::format("late{}", i)).status, 200);
  }
  const auto order = RoomOrder("phone");
  ASSERT_EQ(order.size(), size_t{kPlaces} + 3);
  // The late ones: behind every early place, in arrival order.
  EXPECT_EQ(order[kPlaces], "late0");
  EXPECT_EQ(order[kPlaces + 1], "late1");
  EXPECT_EQ(order[kPlaces + 2], "late2");
  // place[i]: the 0-based place of the i-th to arrive.
  std::vector<int64_t> place(kPlaces);
  for (int p = 0; p < kPlaces; ++p) place[std::stoi(order[p].substr(1))] = p;

  // Not the arrival order, nor close to it: the rank correlation of arrival and place is near 0
  // (its standard deviation under a uniform order is 1/sqrt(n - 1) = 0.01).
  double sum_d2 = 0;
  for (int i = 0; i < kPlaces; ++i) {
    const double d = static_cast<double>(place[i] - i);
    sum_d2 += d * d;
  }
  const double n = kPlaces;
  const double spearman = 1 - 6 * sum_d2 / (n * (n * n - 1));
  EXPECT_LT(std::abs(spearman), 0.04) << spearman;
  // Uniform: the arrival deciles spread evenly over the place deciles. A chi-square test of the
  // 10x10 table (100 expected in each cell, 81 degrees of freedom): 131.0 is its 0.9999 quantile.
  std::vector<std::vector<int>> table(10, std::vector<int>(10, 0));
  for (int i = 0; i < kPlaces; ++i) ++table[i / 1000][place[i] / 1000];
  double chi2 = 0;
  for (const auto& row : table) {
    for (int count : row) chi2 += (count - 100.0) * (count - 100.0) / 100.0;
  }
  EXPECT_LT(chi2, 131.0);
  // And the first to arrive is not first by rule: the first ten arrivals' mean place is not in
  // the first tenth (under a uniform order it is near 5,000, with a deviation of about 900).
  double first_ten = 0;
  for (int i = 0; i < 10; ++i) first_ten += static_cast<double>(place[i]);
  EXPECT_GT(first_ten / 10, 1000.0);

  // The API says the same places: the first place is admitted at the start, the last waits.
  auto first = Object(Wait(client, "phone", order[0]));
  EXPECT_EQ(Str(first, "status"), "admitted");
  EXPECT_EQ(Int(first, "place"), 1);
  auto last = Object(Wait(client, "phone", "late2"));
  EXPECT_EQ(Str(last, "status"), "waiting");
  EXPECT_EQ(Int(last, "place"), kPlaces + 3);
  EXPECT_EQ(Int(last, "ahead"), kPlaces + 3 - 1 - 1);                // place 1 is admitted
  EXPECT_EQ(Int(last, "admit_at_ms"), kStart + (kPlaces + 2) * 10);  // 100 a second
  EXPECT_EQ(Int(last, "estimate_ms"), (kPlaces + 2) * 10);
}

// Issue 37, point 6: the admission rate over a minute of simulated time (the injected clock),
// within 5 %, as the buyers see it through GET .../wait.
TEST_F(RoomHttpTest, AdmitsAtTheRateOverAMinuteOfSimulatedTime) {
  Start();
  constexpr int64_t kRate = 20;
  ASSERT_NO_FATAL_FAILURE(CreateSale("phone", 10'000, kRate));
  auto client = server_->Client();
  constexpr int kPlaces = 1'500;
  for (int i = 0; i < kPlaces; ++i) {
    ASSERT_EQ(Join(client, "phone", fmt::format("u{}", i)).status, 200);
  }
  server_->clock().Set(kStart + 3'000);
  const auto order = RoomOrder("phone");
  ASSERT_EQ(order.size(), size_t{kPlaces});
  // Places are admitted in order: the admitted ones are a prefix. Count it at a moment.
  size_t prefix = 0;
  const auto count_admitted = [&] {
    while (prefix < order.size()) {
      auto view = Object(Wait(client, "phone", order[prefix]));
      if (Str(view, "status") != "admitted") {
        EXPECT_EQ(Str(view, "status"), "waiting");
        EXPECT_EQ(Int(view, "place"), static_cast<int64_t>(prefix) + 1);
        break;
      }
      EXPECT_FALSE(Str(view, "pass").empty());
      ++prefix;
    }
    return prefix;
  };
  const size_t at_begin = count_admitted();
  for (int second = 1; second <= 60; ++second) {
    server_->clock().Advance(1'000);
    count_admitted();
  }
  const double admitted = static_cast<double>(prefix - at_begin);
  EXPECT_NEAR(admitted, 60.0 * kRate, 60.0 * kRate * 0.05);
}

// Issue 37, point 6: a pass forged, expired, another user's or another activity's is refused with
// 403 pass_required, before Redis (the stock does not move); the admitted buyer's own buys.
TEST_F(RoomHttpTest, APurchaseNeedsItsOwnUnexpiredPass) {
  Start();
  ASSERT_NO_FATAL_FAILURE(CreateSale("phone", 10, 1, 5'000));
  ASSERT_NO_FATAL_FAILURE(CreateSale("laptop", 10, 1, 5'000));
  auto client = server_->Client();
  for (const char* user : {"alice", "bob"}) {
    ASSERT_EQ(Join(client, "phone", user).status, 200);
    ASSERT_EQ(Join(client, "laptop", user).status, 200);
  }
  server_->clock().Set(kStart + 10'000);  // both admitted in both
  const std::string alice_phone = Str(Object(Wait(client, "phone", "alice")), "pass");
  const std::string alice_laptop = Str(Object(Wait(client, "laptop", "alice")), "pass");
  ASSERT_FALSE(alice_phone.empty());
  ASSERT_FALSE(alice_laptop.empty());
  const std::string stock_key = fmt::format("{}:seckill:{{phone}}:stock", server_->key_namespace());
  const auto refused = [&](const std::string& user, const std::string& pass) {
    auto reply = Buy(client, "phone", user, pass);
    EXPECT_EQ(reply.status, 403) << reply.body;
    auto body = Object(reply);
    EXPECT_EQ(Str(body, "status"), "pass_required");
    EXPECT_EQ(Int(body, "code"), -13);
    EXPECT_EQ(redis_->String({"GET", stock_key}), "10");
  };
  refused("alice", "");              // none
  refused("bob", alice_phone);       // another user's
  refused("alice", alice_laptop);    // another activity's
  std::string forged = alice_phone;  // a later expiry, the same signature
  forged.replace(0, forged.find('.'), std::to_string(kStart + 999'999));
  refused("alice", forged);
  refused("alice", "1.abc");
  server_->clock().Advance(5'000);  // expired
  refused("alice", alice_phone);
  // A fresh pass from the room, and the purchase goes through.
  const std::string fresh = Str(Object(Wait(client, "phone", "alice")), "pass");
  auto bought = Buy(client, "phone", "alice", fresh);
  ASSERT_EQ(bought.status, 200) << bought.body;
  EXPECT_EQ(Str(Object(bought), "status"), "reserved");
  EXPECT_EQ(redis_->String({"GET", stock_key}), "9");
  // A sale without a room needs none.
  ASSERT_EQ(Admin("POST", "/api/v1/admin/activities",
                  fmt::format(R"({{"id":"plain","stock":1,"start_ms":{}}})", kStart))
                .status,
            201);
  EXPECT_EQ(Str(Object(Buy(client, "plain", "alice", "")), "status"), "reserved");
}

// Issue 37, point 2: when the stock is gone the room says so to everyone still waiting.
TEST_F(RoomHttpTest, ASellOutIsSaidToEveryoneWaiting) {
  Start();
  ASSERT_NO_FATAL_FAILURE(CreateSale("phone", 1, 1));
  auto client = server_->Client();
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Join(client, "phone", fmt::format("u{}", i)).status, 200);
  server_->clock().Set(kStart);
  const auto order = RoomOrder("phone");
  auto first = Object(Wait(client, "phone", order[0]));
  ASSERT_EQ(Str(first, "status"), "admitted");
  EXPECT_EQ(Str(Object(Wait(client, "phone", order[1])), "status"), "waiting");
  ASSERT_EQ(Str(Object(Buy(client, "phone", order[0], Str(first, "pass"))), "status"), "reserved");
  for (size_t i = 1; i < order.size(); ++i) {
    auto view = Object(Wait(client, "phone", order[i], 1000));
    EXPECT_EQ(Str(view, "status"), "sold_out") << i;
    EXPECT_EQ(Int(view, "place"), static_cast<int64_t>(i) + 1);
  }
}

// Issue 37, point 6: the room lives in Redis; a restart of the server mid-queue loses no place.
TEST_F(RoomHttpTest, ARestartOfTheServerMidQueueLosesNoPlace) {
  // A directory that outlives the first server (a fixture removes only a directory it made).
  std::string dir = (std::filesystem::temp_directory_path() / "flashsale-room-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  Start({.data_dir = dir});
  ASSERT_NO_FATAL_FAILURE(CreateSale("phone", 10, 2));
  {
    auto client = server_->Client();
    for (int i = 0; i < 50; ++i) {
      ASSERT_EQ(Join(client, "phone", fmt::format("u{}", i)).status, 200);
    }
  }
  server_->clock().Set(kStart + 1'000);
  std::map<std::string, int64_t> places;
  {
    auto client = server_->Client();
    for (int i = 0; i < 50; ++i) {
      const std::string user = fmt::format("u{}", i);
      places[user] = Int(Object(Wait(client, "phone", user)), "place");
      ASSERT_GT(places[user], 0);
    }
  }
  const std::string ns = server_->key_namespace();
  server_.reset();
  ASSERT_TRUE(std::filesystem::exists(dir + "/flashsale.db"));
  server_ = std::make_unique<ServerFixture>(
      *redis_, ServerFixtureOptions{.key_namespace = ns, .data_dir = dir});
  server_->clock().Set(kStart + 1'000);
  auto client = server_->Client();
  for (const auto& [user, place] : places) {
    auto view = Object(Wait(client, "phone", user));
    EXPECT_EQ(Int(view, "place"), place) << user;
    // Joining again is idempotent: the same place.
    auto rejoined = Object(Join(client, "phone", user));
    EXPECT_FALSE(rejoined.at("joined").as_bool());
    EXPECT_EQ(Int(rejoined, "place"), place) << user;
  }
  server_.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace flashsale::server
