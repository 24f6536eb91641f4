// Issue 35, point 4: the report after the sale, GET /api/v1/admin/activities/{id}/report, over real
// HTTP against a real server whose SQLite record is written by a second connection as the order
// pipeline would; and the page /report that draws it.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "server/server_fixture.h"
#include "store/sqlite_store.h"
#include "support/wait.h"

namespace flashsale::server {
namespace {

namespace json = boost::json;
using testing::RedisServer;
using testing::ServerFixture;

constexpr int64_t kStart = 1700000000000;

class ReportHttpTest : public ::testing::Test {
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
    ASSERT_EQ(Admin("POST", "/api/v1/admin/activities",
                    R"({"id":"sale","stock":3,"per_user_limit":5,"start_ms":1700000000000,
                    "end_ms":4000000000000})")
                  .status,
              201);
    ASSERT_EQ(Admin("POST", "/api/v1/admin/activities", R"({"id":"luck","kind":"lottery",
                    "prizes":[{"id":"gold","name":"Gold","weight":1,"stock":3}]})")
                  .status,
              201);
  }

  static store::OrderRecord Order(const std::string& id, const std::string& activity,
                                  int64_t created_ms, std::vector<std::string> items = {}) {
    return {.order_id = id,
            .activity_id = activity,
            .user_id = "u-" + id,
            .quantity = 1,
            .items = std::move(items),
            .created_ms = created_ms,
            .stream_id = "1-" + id};
  }

  testing::HttpResult Admin(std::string_view method, const std::string& target,
                            std::string_view body = {}) {
    return server_->Client().Request(method, target, body, server_->Admin(),
                                     std::chrono::seconds(30));
  }

  json::object Report(const std::string& activity) {
    auto reply = Admin("GET", "/api/v1/admin/activities/" + activity + "/report");
    EXPECT_EQ(reply.status, 200) << reply.body;
    EXPECT_EQ(reply.headers["content-type"], "application/json");
    boost::system::error_code error;
    json::value value = json::parse(reply.body, error);
    if (error || !value.is_object()) {
      ADD_FAILURE() << "not JSON: " << reply.body;
      return {};
    }
    return value.as_object();
  }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
  std::unique_ptr<store::SqliteStore> record_;
};

RedisServer* ReportHttpTest::redis_ = nullptr;

TEST_F(ReportHttpTest, ReportsBucketsTotalsAndTheTimeToSellOut) {
  // Before any order: no buckets, not sold out.
  json::object empty = Report("sale");
  EXPECT_EQ(empty.at("orders").as_int64(), 0);
  EXPECT_TRUE(empty.at("sell_out_ms").is_null());
  EXPECT_TRUE(empty.at("first_order_ms").is_null());
  EXPECT_TRUE(empty.at("buckets").as_array().empty());

  std::vector<store::OrderRecord> orders = {Order("o1", "sale", kStart + 1500),
                                            Order("o2", "sale", kStart + 1700),
                                            Order("o3", "sale", kStart + 4200)};
  ASSERT_TRUE(record_->InsertOrders(orders, kStart + 5000).ok());
  ASSERT_EQ(*record_->PayOrder("o1", kStart + 6000), store::PayOutcome::kPaid);
  const std::vector<store::RefusedOrder> refused = {{"r1", "sale"}};
  ASSERT_TRUE(record_->RecordRefused(refused, kStart + 7000).ok());

  json::object report = Report("sale");
  EXPECT_EQ(report.at("activity_id").as_string(), "sale");
  EXPECT_FALSE(report.at("lottery").as_bool());
  EXPECT_EQ(report.at("stock").as_int64(), 3);
  EXPECT_EQ(report.at("units_sold").as_int64(), 3);
  EXPECT_EQ(report.at("orders").as_int64(), 3);
  EXPECT_EQ(report.at("first_order_ms").as_int64(), kStart + 1500);
  EXPECT_EQ(report.at("last_order_ms").as_int64(), kStart + 4200);
  EXPECT_EQ(report.at("sell_out_ms").as_int64(), 4200);
  EXPECT_EQ(report.at("step_s").as_int64(), 1);
  const json::array& buckets = report.at("buckets").as_array();
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].at("second").as_int64(), kStart / 1000 + 1);
  EXPECT_EQ(buckets[0].at("orders").as_int64(), 2);
  EXPECT_EQ(buckets[1].at("second").as_int64(), kStart / 1000 + 4);
  EXPECT_EQ(buckets[1].at("orders").as_int64(), 1);
  const json::object& states = report.at("states").as_object();
  EXPECT_EQ(states.at("paid").at("orders").as_int64(), 1);
  EXPECT_EQ(states.at("reserved").at("units").as_int64(), 2);
  EXPECT_FALSE(states.contains("cancelled"));
  EXPECT_EQ(report.at("refused").as_int64(), 1);
  EXPECT_TRUE(report.at("prizes").as_array().empty());

  // An order expires: a unit is back, the sale is no longer sold out.
  ASSERT_EQ(record_->CancelUnpaid("sale", kStart + 2000, 10, kStart + 8000)->size(), 1u);  // o2
  json::object after = Report("sale");
  EXPECT_EQ(after.at("units_sold").as_int64(), 2);
  EXPECT_TRUE(after.at("sell_out_ms").is_null());
  EXPECT_EQ(after.at("states").at("cancelled").at("orders").as_int64(), 1);
}

TEST_F(ReportHttpTest, ReportsALotterysPrizesWon) {
  auto w1 = Order("w1", "luck", kStart, {"gold"});
  w1.draw_no = 1;
  auto w2 = Order("w2", "luck", kStart + 10, {"gold"});
  w2.draw_no = 1;
  ASSERT_TRUE(record_->InsertOrders(std::vector<store::OrderRecord>{w1, w2}, kStart + 20).ok());
  json::object report = Report("luck");
  EXPECT_TRUE(report.at("lottery").as_bool());
  const json::array& prizes = report.at("prizes").as_array();
  ASSERT_EQ(prizes.size(), 1u);
  EXPECT_EQ(prizes[0].at("prize_id").as_string(), "gold");
  EXPECT_EQ(prizes[0].at("name").as_string(), "Gold");
  EXPECT_EQ(prizes[0].at("won").as_int64(), 2);
}

// The answers buyers got, by status word, with the refusals flagged: counted as the server
// answers, written to the record every answers_every and when the server stops; an answer about
// an id that names no activity leaves no row.
TEST_F(ReportHttpTest, CountsTheAnswersBuyersGotAndTheRefusals) {
  auto buy = [&](const std::string& activity, const std::string& user) {
    return server_->Client()
        .Request("POST", "/api/v1/activities/" + activity + "/purchase", R"({"quantity":1})",
                 ServerFixture::User(user), std::chrono::seconds(30))
        .status;
  };
  for (const char* user : {"u1", "u2", "u3"}) EXPECT_EQ(buy("sale", user), 200) << user;
  for (const char* user : {"u4", "u5"}) EXPECT_EQ(buy("sale", user), 200) << user;  // sold_out
  EXPECT_EQ(buy("nope", "u1"), 404);

  json::object report;
  auto counted = [&] {
    report = Report("sale");
    int64_t all = 0;
    for (const json::value& answer : report.at("answers").as_array()) {
      all += answer.at("count").as_int64();
    }
    return all == 5;
  };
  ASSERT_TRUE(testing::Eventually(counted, std::chrono::seconds(20))) << json::serialize(report);
  const json::array& answers = report.at("answers").as_array();
  ASSERT_EQ(answers.size(), 2u) << json::serialize(report);
  EXPECT_EQ(answers[0].at("status").as_string(), "reserved");
  EXPECT_EQ(answers[0].at("count").as_int64(), 3);
  EXPECT_FALSE(answers[0].at("refusal").as_bool());
  EXPECT_EQ(answers[1].at("status").as_string(), "sold_out");
  EXPECT_EQ(answers[1].at("count").as_int64(), 2);
  EXPECT_TRUE(answers[1].at("refusal").as_bool());

  // Answered just before the server stops: written as it stops.
  EXPECT_EQ(buy("sale", "u6"), 200);  // sold_out
  server_->Stop();
  auto stored = record_->ReportOrders("sale");
  ASSERT_TRUE(stored.ok()) << stored.error().ToString();
  // (Ties by word.)
  EXPECT_EQ(stored->answers,
            (std::vector<std::pair<std::string, int64_t>>{{"reserved", 3}, {"sold_out", 3}}));
  EXPECT_TRUE(record_->ReportOrders("nope")->answers.empty());
}

TEST_F(ReportHttpTest, RefusesWithoutTheAdminTokenAndForAnUnknownActivity) {
  EXPECT_EQ(server_->Client().Get("/api/v1/admin/activities/sale/report").status, 401);
  EXPECT_EQ(Admin("GET", "/api/v1/admin/activities/nope/report").status, 404);
  EXPECT_EQ(Admin("GET", "/api/v1/admin/activities/bad!id/report").status, 400);
}

TEST_F(ReportHttpTest, ServesTheReportPage) {
  auto page = server_->Client().Get("/report?activity=sale");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("/web/report.js"), std::string::npos);
  auto script = server_->Client().Get("/web/report.js");
  EXPECT_EQ(script.status, 200);
  EXPECT_NE(script.body.find("/report"), std::string::npos);
}

}  // namespace
}  // namespace flashsale::server
