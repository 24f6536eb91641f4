// The row the order consumer writes for an intent (OrderRecordOf), with no server: what it writes
// to the record, and what it refuses (counted against the entry, then dead-lettered). Decoding the
// stream entry is keyspace's (keyspace/order_stream_test.cc); the consumer's whole batch is in
// order_consumer_test.cc.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "keyspace/order_stream.h"
#include "service/order_consumer.h"

namespace flashsale::service {
namespace {

using base::ErrorCode;
using keyspace::OrderIntent;

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

OrderIntent GoodIntent() {
  return OrderIntent{.entry_id = "1700-0",
                     .order_id = "o1",
                     .user_id = "alice",
                     .quantity = 2,
                     .created_ms = 1800,
                     .items = {"i1", "i2"},
                     .limit = 1,
                     .written = {3, 9}};
}

OrderIntent Win(int64_t draw) {
  return OrderIntent{.entry_id = "1700-0",
                     .order_id = "d1",
                     .user_id = "alice",
                     .quantity = 1,
                     .created_ms = 1800,
                     .items = {"cup"},
                     .draw = draw};
}

TEST(OrderRecordOfTest, AnIntentBecomesItsRow) {
  auto order = OrderRecordOf(GoodIntent(), SaleRecord(5));
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

TEST(OrderRecordOfTest, TheSecondIntentOfAnEntryHasItsPartInItsId) {
  OrderIntent intent = GoodIntent();
  intent.part = 2;
  auto order = OrderRecordOf(intent, SaleRecord(1));
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(order->stream_id, "1700-0/2");
}

TEST(OrderRecordOfTest, AnIntentWithoutItsLimitTakesTheActivitys) {
  OrderIntent intent = GoodIntent();
  intent.limit = 0;
  auto order = OrderRecordOf(intent, SaleRecord(3));
  ASSERT_TRUE(order.ok());
  EXPECT_FALSE(order->single_unit);
  order = OrderRecordOf(intent, SaleRecord(1));
  ASSERT_TRUE(order.ok());
  EXPECT_TRUE(order->single_unit);
}

TEST(OrderRecordOfTest, AnUnreadableIntentIsRefusedWithWhatDecodingSaid) {
  OrderIntent intent = GoodIntent();
  intent.unreadable = "unreadable intent: quantity 'x'";
  auto order = OrderRecordOf(intent, SaleRecord(1));
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(order.error().message, intent.unreadable);

  intent = GoodIntent();
  intent.limit = OrderIntent::kUnreadableNumber;
  order = OrderRecordOf(intent, SaleRecord(1));
  ASSERT_FALSE(order.ok());
  EXPECT_NE(order.error().message.find("limit"), std::string::npos) << order.error().message;
  // A win does not use the limit: an unreadable one does not keep it from the record.
  OrderIntent win = Win(2);
  win.limit = OrderIntent::kUnreadableNumber;
  EXPECT_TRUE(OrderRecordOf(win, LotteryRecord()).ok());
}

TEST(OrderRecordOfTest, AWinNeedsItsDrawNumberAndOnePrize) {
  auto order = OrderRecordOf(Win(2), LotteryRecord());
  ASSERT_TRUE(order.ok()) << order.error().ToString();
  EXPECT_EQ(order->draw_no, 2);
  EXPECT_EQ(order->items, std::vector<std::string>{"cup"});

  for (const int64_t draw : {int64_t{0}, OrderIntent::kUnreadableNumber}) {
    auto no_draw = OrderRecordOf(Win(draw), LotteryRecord());
    ASSERT_FALSE(no_draw.ok());
    EXPECT_EQ(no_draw.error().code, ErrorCode::kInvalidArgument);
  }
  OrderIntent two_prizes = Win(2);
  two_prizes.items.push_back("cup");
  EXPECT_FALSE(OrderRecordOf(two_prizes, LotteryRecord()).ok());
}

}  // namespace
}  // namespace flashsale::service
