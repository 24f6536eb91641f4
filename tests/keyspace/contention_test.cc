// 100,000 purchase attempts from random users, 64 concurrent callers on 4 pipelined connections,
// against stock 1,000: exactly 1,000 units go, no user over the limit, one order intent per unit,
// and stock never below zero at any moment a watcher looked.

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "keyspace/activity_fixture.h"
#include "support/reserve_load.h"

namespace flashsale::keyspace {
namespace {

using core::Outcome;
using testing::ActivityFixture;

class ContentionTest : public ActivityFixture {};

TEST_F(ContentionTest, ExactlyTheStockIsSoldUnderSixtyFourWayContention) {
  constexpr int64_t kStock = 1000;
  constexpr int64_t kLimit = 2;
  ASSERT_TRUE(SetUpActivity(Activity("flash", kStock, kLimit)).ok());
  const ActivityKeys keys = Keys("flash");

  // A watcher reads the stock counter over and over while the sale runs.
  std::atomic<bool> stop = false;
  std::atomic<int64_t> lowest = kStock, reads = 0;
  std::thread watcher([&] {
    while (!stop) {
      const int64_t stock = server_->Integer({"GET", keys.stock()});
      if (stock < lowest) lowest = stock;
      ++reads;
    }
  });

  testing::ReserveLoadOptions options;
  options.url = server_->unix_url();
  options.key_namespace = ns_;
  options.activity_id = "flash";
  options.connections = 4;
  options.callers_per_connection = 16;
  options.attempts = 100000;
  options.users = 5000;
  options.now_ms = 1500;
  const auto report = testing::RunReserveLoad(options);
  stop = true;
  watcher.join();

  ASSERT_EQ(report.caller_exceptions, 0);
  ASSERT_EQ(report.Unresolved(), 0);
  EXPECT_EQ(report.failed_calls, 0)
      << (report.sample_errors.empty() ? "" : report.sample_errors[0]);
  EXPECT_EQ(report.Count(Outcome::kReserved), kStock);
  EXPECT_EQ(report.Count(Outcome::kReserved) + report.Count(Outcome::kSoldOut) +
                report.Count(Outcome::kLimitReached),
            options.attempts);
  EXPECT_GT(report.Count(Outcome::kLimitReached), 0) << "random users should hit the limit";

  // No user over the limit, by the client's count and by Redis's.
  std::map<std::string, int64_t> per_user;
  std::set<std::string> reserved_orders;
  for (const auto& attempt : report.attempts) {
    if (attempt.outcome != Outcome::kReserved) continue;
    ++per_user[attempt.user_id];
    reserved_orders.insert(attempt.order_id);
  }
  for (const auto& [user, units] : per_user) EXPECT_LE(units, kLimit) << user;
  auto buyers = server_->Command({"HGETALL", keys.buyers()});
  int64_t buyer_units = 0;
  for (size_t i = 0; i + 1 < buyers->elements; i += 2) {
    const int64_t units = std::stoll(buyers->element[i + 1]->str);
    EXPECT_LE(units, kLimit) << buyers->element[i]->str;
    buyer_units += units;
  }
  EXPECT_EQ(buyer_units, kStock);

  // One intent per unit, and exactly the orders the callers were told were reserved.
  auto entries = server_->Command({"XRANGE", keys.stream(), "-", "+"});
  const auto intents = testing::StreamIntents(entries.get());
  EXPECT_EQ(static_cast<int64_t>(intents.size()), kStock);
  std::set<std::string> stream_orders;
  for (const auto& fields : intents) {
    ASSERT_TRUE(fields.contains("order_id"));
    EXPECT_TRUE(stream_orders.insert(fields.at("order_id")).second) << "order recorded twice";
  }
  EXPECT_EQ(stream_orders, reserved_orders);

  // Stock ends at zero and was never seen below it.
  EXPECT_EQ(server_->Integer({"GET", keys.stock()}), 0);
  EXPECT_GT(reads.load(), 0);
  EXPECT_GE(lowest.load(), 0);
  const auto status = Status("flash");
  EXPECT_EQ(status.total, status.remaining + status.reserved - status.released);
}

}  // namespace
}  // namespace flashsale::keyspace
