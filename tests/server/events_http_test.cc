// Issue 35, point 1: the pull feed of order events, GET /api/v1/admin/events, over real HTTP
// against a real server, its SQLite record written by a second connection as the order pipeline
// and the payment path would.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <thread>

#include "server/server_fixture.h"
#include "store/sqlite_store.h"

namespace flashsale::server {
namespace {

namespace json = boost::json;
using testing::RedisServer;
using testing::ServerFixture;

class EventsHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }
  void SetUp() override {
    server_ = std::make_unique<ServerFixture>(*redis_);
    auto record = store::SqliteStore::Open(server_->data_dir() + "/flashsale.db");
    ASSERT_TRUE(record.ok()) << record.error().ToString();
    record_ = std::move(*record);
  }

  void Insert(const std::string& order_id, const std::string& activity_id, int64_t now_ms) {
    store::OrderRecord order{.order_id = order_id,
                             .activity_id = activity_id,
                             .user_id = "u-" + order_id,
                             .quantity = 1,
                             .created_ms = now_ms,
                             .stream_id = "1-" + order_id};
    auto inserted = record_->InsertOrders(std::span(&order, 1), now_ms);
    ASSERT_TRUE(inserted.ok()) << inserted.error().ToString();
  }

  // The reply's JSON; fails the test unless it is a 200.
  json::object Events(const std::string& query) {
    auto reply = server_->Client().Request("GET", "/api/v1/admin/events" + query, {},
                                           server_->Admin(), std::chrono::seconds(30));
    EXPECT_EQ(reply.status, 200) << reply.body;
    return json::parse(reply.body).as_object();
  }

  static std::vector<std::string> Ids(const json::object& page) {
    std::vector<std::string> ids;
    for (const auto& event : page.at("events").as_array()) {
      ids.emplace_back(event.at("id").as_string());
    }
    return ids;
  }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
  std::unique_ptr<store::SqliteStore> record_;
};
RedisServer* EventsHttpTest::redis_ = nullptr;

TEST_F(EventsHttpTest, TheFeedPagesThroughEveryEventByCursor) {
  auto empty = Events("");
  EXPECT_TRUE(empty.at("events").as_array().empty());
  EXPECT_EQ(empty.at("next").as_int64(), 0);

  Insert("a1", "east", 100);
  Insert("b1", "west", 110);
  ASSERT_EQ(*record_->PayOrder("a1", 200), store::PayOutcome::kPaid);

  auto first = Events("?limit=2");
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"a1/reserved", "b1/reserved"}));
  const json::object& event = first.at("events").as_array()[0].as_object();
  EXPECT_EQ(event.at("order_id").as_string(), "a1");
  EXPECT_EQ(event.at("activity_id").as_string(), "east");
  EXPECT_EQ(event.at("state").as_string(), "reserved");
  EXPECT_EQ(event.at("at_ms").as_int64(), 100);
  const int64_t next = first.at("next").as_int64();
  EXPECT_EQ(next, first.at("events").as_array()[1].at("seq").as_int64());

  auto second = Events("?after=" + std::to_string(next) + "&limit=2");
  EXPECT_EQ(Ids(second), (std::vector<std::string>{"a1/paid"}));
  auto done = Events("?limit=5&after=" + std::to_string(second.at("next").as_int64()));
  EXPECT_TRUE(done.at("events").as_array().empty());
  EXPECT_EQ(done.at("next").as_int64(), second.at("next").as_int64()) << "the cursor stays";
}

// A reader waiting with wait_ms gets the event written while it waits, in the same reply.
TEST_F(EventsHttpTest, ALongPollAnswersWithTheEventWrittenWhileItWaits) {
  json::object page;
  std::thread reader([&] { page = Events("?wait_ms=20000"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // not a timing assertion
  Insert("late", "east", 500);
  reader.join();
  EXPECT_EQ(Ids(page), (std::vector<std::string>{"late/reserved"}));

  // Nothing comes: an empty page once the (short) wait is over, the cursor unchanged.
  auto idle = Events("?wait_ms=200&after=" + std::to_string(page.at("next").as_int64()));
  EXPECT_TRUE(idle.at("events").as_array().empty());
  EXPECT_EQ(idle.at("next").as_int64(), page.at("next").as_int64());
}

TEST_F(EventsHttpTest, OnlyAnOperatorReadsTheFeedAndABadQueryIsA400) {
  EXPECT_EQ(server_->Client().Get("/api/v1/admin/events", {}).status, 401);
  EXPECT_EQ(server_->Client().Get("/api/v1/admin/events", ServerFixture::User("alice")).status,
            401);
  for (const char* query : {"?after=-1", "?limit=0", "?limit=1001", "?wait_ms=25001", "?after=x",
                            "?cursor=1", "?after=1&after=2", "?after", "?limit=5&"}) {
    auto reply =
        server_->Client().Get(std::string("/api/v1/admin/events") + query, server_->Admin());
    EXPECT_EQ(reply.status, 400) << query << ": " << reply.body;
  }
}

// The webhook deliveries that kept failing, as the relay parked them: listed, and retried on
// demand (of one receiver, or all).
TEST_F(EventsHttpTest, ParkedWebhookDeliveriesAreListedAndRetriedOnDemand) {
  auto client = server_->Client();
  auto none = client.Get("/api/v1/admin/webhooks/parked", server_->Admin());
  EXPECT_EQ(none.status, 200);
  EXPECT_TRUE(json::parse(none.body).at("parked").as_array().empty());

  Insert("k1", "east", 100);
  auto events = record_->EventsAfter(0, 10);
  ASSERT_EQ(events->size(), 1u);
  store::ParkedEvent parked{.receiver = "http://127.0.0.1:9/hook", .event = (*events)[0]};
  parked.attempts = 5;
  parked.last_error = "answered 503";
  ASSERT_TRUE(
      record_->SaveDelivery({.receiver = parked.receiver, .cursor = 1, .parked = {parked}}, 200)
          .ok());

  auto listed = client.Get("/api/v1/admin/webhooks/parked", server_->Admin());
  ASSERT_EQ(listed.status, 200) << listed.body;
  const json::value page = json::parse(listed.body);
  const auto& entries = page.at("parked").as_array();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].at("receiver").as_string(), "http://127.0.0.1:9/hook");
  EXPECT_EQ(entries[0].at("attempts").as_int64(), 5);
  EXPECT_EQ(entries[0].at("last_error").as_string(), "answered 503");
  EXPECT_EQ(entries[0].at("event").at("id").as_string(), "k1/reserved");
  EXPECT_FALSE(entries[0].at("retry").as_bool());

  auto other = client.Post("/api/v1/admin/webhooks/retry", R"({"receiver":"http://elsewhere/"})",
                           server_->Admin());
  EXPECT_EQ(other.status, 200);
  EXPECT_EQ(json::parse(other.body).at("retried").as_int64(), 0);
  auto all = client.Post("/api/v1/admin/webhooks/retry", "", server_->Admin());
  EXPECT_EQ(all.status, 200);
  EXPECT_EQ(json::parse(all.body).at("retried").as_int64(), 1);
  EXPECT_TRUE((*record_->ParkedEvents("", 10))[0].retry);
  EXPECT_EQ(client.Post("/api/v1/admin/webhooks/retry", R"({"url":"x"})", server_->Admin()).status,
            400);
  EXPECT_EQ(client.Post("/api/v1/admin/webhooks/retry", "", {}).status, 401);
}

}  // namespace
}  // namespace flashsale::server
