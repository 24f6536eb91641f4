// The order consumer's reading of an intent (ParseOrderIntent), with no server: what it writes to
// the record, and what it refuses as unreadable (counted against the entry, then dead-lettered).
// The rest of a batch's way (XREADGROUP, XACK, the failure counts) is Redis commands on the
// stream, not scripts: tests/pipeline covers it against a redis-server.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "keyspace/order_stream.h"
#include "service/order_consumer.h"

namespace flashsale::service {
namespace {

using base::ErrorCode;

store::ActivityRecord SaleRecord(int64_t limit) {
  store::ActivityRecord record;
  record.activity.id = "sale";
  record.activity.per_user_limit = limit;
  return record;
}

store::ActivityRecord LotteryRecord() {
  store::ActivityRecord record = SaleRecord(1);
  record.activity.id = "lottery";
  record.activity.lottery = core::Lottery{.prizes = {{"cup", "A cup", 1, 5}}};
  return record;
}

keyspace::StreamEntry Entry(std::vector<std::pair<std::string, std::string>> fields, int part = 0) {
  return keyspace::StreamEntry{.id = "1700-0", .fields = std::move(fields), .part = part};
}

keyspace::StreamEntry GoodEntry() {
  return Entry({{"order_id", "o1"},
                {"user_id", "alice"},
                {"quantity", "2"},
                {"ts", "1800"},
                {"items", "i1 i2"},
                {"limit", "1"},
                {std::string(keyspace::kWriteSeqField), "3.9"}});
}

// `entry` with the field `name` set to `value`.
keyspace::StreamEntry With(std::string name, std::string value) {
  keyspace::StreamEntry entry = GoodEntry();
  for (auto& [key, field] : entry.fields) {
    if (key == name) field = value;
  }
  return entry;
}

TEST(OrderIntentTest, AnIntentBecomesItsRow) {
  auto order = ParseOrderIntent(GoodEntry(), SaleRecord(5));
  ASSERT_TRUE(order.ok()) << order.error().ToString();
  EXPECT_EQ(order->order_id, "o1");
  EXPECT_EQ(order->user_id, "alice");
  EXPECT_EQ(order->activity_id, "sale");
  EXPECT_EQ(order->quantity, 2);
  EXPECT_EQ(order->created_ms, 1800);
  EXPECT_EQ(order->items, (std::vector<std::string>{"i1", "i2"}));
  EXPECT_EQ(order->stream_id, "1700-0");
  EXPECT_EQ(order->written.epoch, 3);
  EXPECT_EQ(order->written.seq, 9);
  // Sold under limit 1 (the intent's), whatever the activity's limit is now.
  EXPECT_TRUE(order->single_unit);
}

TEST(OrderIntentTest, TheSecondIntentOfAnEntryHasItsPartInItsId) {
  keyspace::StreamEntry entry = GoodEntry();
  entry.part = 2;
  auto order = ParseOrderIntent(entry, SaleRecord(1));
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(order->stream_id, "1700-0/2");
}

TEST(OrderIntentTest, AnIntentWithoutItsLimitTakesTheActivitys) {
  keyspace::StreamEntry entry = GoodEntry();
  std::erase_if(entry.fields, [](const auto& field) { return field.first == "limit"; });
  auto order = ParseOrderIntent(entry, SaleRecord(3));
  ASSERT_TRUE(order.ok());
  EXPECT_FALSE(order->single_unit);
}

TEST(OrderIntentTest, AnUnreadableIntentIsRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"order_id", ""},  {"order_id", "a b"}, {"user_id", ""}, {"quantity", "0"},
      {"quantity", "x"}, {"quantity", "101"}, {"ts", "soon"},  {"limit", "0"},
  };
  for (const auto& [field, value] : bad) {
    SCOPED_TRACE(field + "=" + value);
    auto order = ParseOrderIntent(With(field, value), SaleRecord(1));
    ASSERT_FALSE(order.ok());
    EXPECT_EQ(order.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(order.error().message.find(field), std::string::npos) << order.error().message;
  }
}

TEST(OrderIntentTest, AWinNeedsItsDrawNumberAndOnePrize) {
  keyspace::StreamEntry win = Entry({{"order_id", "d1"},
                                     {"user_id", "alice"},
                                     {"quantity", "1"},
                                     {"ts", "1800"},
                                     {"items", "cup"},
                                     {"draw", "2"}});
  auto order = ParseOrderIntent(win, LotteryRecord());
  ASSERT_TRUE(order.ok()) << order.error().ToString();
  EXPECT_EQ(order->draw_no, 2);
  EXPECT_EQ(order->items, std::vector<std::string>{"cup"});

  win.fields.back().second = "";  // no draw number
  auto no_draw = ParseOrderIntent(win, LotteryRecord());
  ASSERT_FALSE(no_draw.ok());
  EXPECT_EQ(no_draw.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashsale::service
