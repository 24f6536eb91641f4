#include "service/reconcile.h"

#include <gtest/gtest.h>

namespace flashsale::service {
namespace {

store::OrderRecord Order(std::string id, int64_t quantity, store::OrderState state) {
  store::OrderRecord order;
  order.order_id = std::move(id);
  order.quantity = quantity;
  order.state = state;
  return order;
}

keyspace::OrderRecordEntry InRedis(std::string id, int64_t quantity, char state) {
  keyspace::OrderRecordEntry entry;
  entry.state = state;
  entry.user_id = "u-" + id;
  entry.order.order_id = std::move(id);
  entry.order.quantity = quantity;
  return entry;
}

keyspace::ActivityStatus Status(int64_t remaining, int64_t reserved, int64_t released) {
  keyspace::ActivityStatus status;
  status.found = true;
  status.remaining = remaining;
  status.reserved = reserved;
  status.released = released;
  return status;
}

TEST(AccountTest, InvariantHoldsWithAnIntentNotYetInTheRecord) {
  const std::vector<store::OrderRecord> orders = {Order("a", 1, store::OrderState::kReserved),
                                                  Order("b", 2, store::OrderState::kPaid)};
  const std::vector<keyspace::OrderRecordEntry> records = {
      InRedis("a", 1, 'R'), InRedis("b", 2, 'R'), InRedis("c", 1, 'R')};
  ReconcileReport report;
  report.initial = 10;
  report.db_live = 3;
  const Accounting accounting = Account(Status(6, 4, 0), records, orders, report);
  EXPECT_EQ(report.remaining, 6);
  EXPECT_EQ(report.not_in_db, 1);
  EXPECT_EQ(report.cancelled_not_returned, 0);
  EXPECT_EQ(report.drift, 0);
  EXPECT_TRUE(report.notes.empty());
  EXPECT_TRUE(accounting.to_release.empty());
  ASSERT_EQ(accounting.lost_candidates.size(), 1u);
  EXPECT_EQ(accounting.lost_candidates[0]->order.order_id, "c");
}

TEST(AccountTest, ACancelledOrderWhoseUnitsRedisHoldsIsToRelease) {
  const std::vector<store::OrderRecord> orders = {Order("a", 2, store::OrderState::kReserved),
                                                  Order("b", 1, store::OrderState::kCancelled)};
  const std::vector<keyspace::OrderRecordEntry> records = {InRedis("a", 2, 'R'),
                                                           InRedis("b", 1, 'R')};
  ReconcileReport report;
  report.initial = 5;
  report.db_live = 2;
  const Accounting accounting = Account(Status(2, 3, 0), records, orders, report);
  EXPECT_EQ(report.not_in_db, 0);
  EXPECT_EQ(report.cancelled_not_returned, 1);
  EXPECT_EQ(report.drift, 0);
  ASSERT_EQ(accounting.to_release.size(), 1u);
  EXPECT_EQ(accounting.to_release[0]->order.order_id, "b");
  EXPECT_TRUE(accounting.lost_candidates.empty());
}

TEST(AccountTest, DriftAndAReleasedButLiveOrderAreReportedNotRepaired) {
  const std::vector<store::OrderRecord> orders = {Order("a", 1, store::OrderState::kReserved)};
  const std::vector<keyspace::OrderRecordEntry> records = {InRedis("a", 1, 'X')};
  ReconcileReport report;
  report.initial = 5;
  report.db_live = 1;
  const Accounting accounting = Account(Status(4, 2, 1), records, orders, report);
  EXPECT_EQ(report.not_in_db, 1);
  EXPECT_EQ(report.drift, -1);
  ASSERT_EQ(report.notes.size(), 2u);
  EXPECT_NE(report.notes[0].find("1 orders are released in Redis but live in the record"),
            std::string::npos)
      << report.notes[0];
  EXPECT_NE(report.notes[1].find("drift -1: more units"), std::string::npos) << report.notes[1];
  EXPECT_TRUE(accounting.to_release.empty());
  EXPECT_TRUE(accounting.lost_candidates.empty());
}

}  // namespace
}  // namespace flashsale::service
