#include "core/activity.h"

#include <gtest/gtest.h>

#include "core/outcome.h"

namespace flashsale::core {
namespace {

Activity Valid() {
  Activity a;
  a.id = "phone-2026";
  a.start_ms = 1000;
  a.end_ms = 2000;
  a.per_user_limit = 2;
  a.stock = 10;
  return a;
}

TEST(ActivityTest, WindowIsHalfOpen) {
  const auto a = Valid();
  EXPECT_EQ(a.PositionAt(999), WindowPosition::kBefore);
  EXPECT_EQ(a.PositionAt(1000), WindowPosition::kOpen);
  EXPECT_EQ(a.PositionAt(1999), WindowPosition::kOpen);
  EXPECT_EQ(a.PositionAt(2000), WindowPosition::kAfter);
}

TEST(ActivityTest, ValidatesDefinitions) {
  EXPECT_TRUE(Validate(Valid()).ok());

  auto bad_id = Valid();
  bad_id.id = "a:b";
  EXPECT_FALSE(Validate(bad_id).ok());

  auto empty_window = Valid();
  empty_window.end_ms = empty_window.start_ms;
  EXPECT_FALSE(Validate(empty_window).ok());

  auto no_limit = Valid();
  no_limit.per_user_limit = 0;
  EXPECT_FALSE(Validate(no_limit).ok());

  auto negative = Valid();
  negative.stock = -1;
  EXPECT_FALSE(Validate(negative).ok());
  auto huge = Valid();
  huge.stock = kMaxUnits + 1;
  EXPECT_FALSE(Validate(huge).ok());

  auto far = Valid();
  far.end_ms = kMaxTimeMs + 1;
  EXPECT_FALSE(Validate(far).ok());

  auto crawl = Valid();
  crawl.user_rate = {1e-300, 1};  // a rate so slow its interval overflows Redis's PX
  EXPECT_FALSE(Validate(crawl).ok());
  crawl.user_rate = {0, 1};  // off
  EXPECT_TRUE(Validate(crawl).ok());

  auto items = Valid();
  items.kind = StockKind::kItemised;
  items.items = {"C-1", "C-2"};
  EXPECT_TRUE(Validate(items).ok());
  EXPECT_EQ(items.InitialUnits(), 2);
  items.items.push_back("C-1");
  auto duplicate = Validate(items);
  ASSERT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.error().message.find("C-1"), std::string::npos);
  items.items = {"has space"};
  EXPECT_FALSE(Validate(items).ok());
}

TEST(ActivityTest, ValidatesPurchases) {
  EXPECT_TRUE(ValidatePurchase("alice", 1).ok());
  EXPECT_FALSE(ValidatePurchase("", 1).ok());
  EXPECT_FALSE(ValidatePurchase("al|ce", 1).ok());
  EXPECT_FALSE(ValidatePurchase("alice", 0).ok());
  EXPECT_FALSE(ValidatePurchase("alice", kMaxQuantityPerPurchase + 1).ok());
}

TEST(OutcomeTest, CodesRoundTrip) {
  for (int code = -8; code <= 2; ++code) {
    auto outcome = OutcomeFromCode(code);
    ASSERT_TRUE(outcome.has_value()) << code;
    EXPECT_EQ(static_cast<int>(*outcome), code);
    EXPECT_NE(StatusWord(*outcome), "unknown");
  }
  // The replay's order states a script reports; the service's own codes are not a script's.
  for (const Outcome outcome : {Outcome::kCancelled, Outcome::kRefused, Outcome::kKeyReused}) {
    EXPECT_EQ(OutcomeFromCode(static_cast<int>(outcome)), outcome);
  }
  EXPECT_FALSE(OutcomeFromCode(3).has_value());
  EXPECT_FALSE(OutcomeFromCode(4).has_value());
  EXPECT_FALSE(OutcomeFromCode(-9).has_value());
  EXPECT_FALSE(OutcomeFromCode(-13).has_value());
  EXPECT_EQ(StatusWord(Outcome::kKeyReused), "idempotency_key_reused");
  EXPECT_EQ(StatusWord(Outcome::kPaid), "paid");
  EXPECT_EQ(StatusWord(Outcome::kCompensationDue), "compensation_due");
  EXPECT_EQ(StatusWord(Outcome::kCancelled), "cancelled");
  EXPECT_EQ(StatusWord(Outcome::kRefused), "refused");
  EXPECT_EQ(DrawStatusWord(Outcome::kRefused), "refused");
  EXPECT_TRUE(IsOrderState(Outcome::kPaid));
  EXPECT_FALSE(IsOrderState(Outcome::kNoPrize));
  EXPECT_EQ(StatusWord(Outcome::kLimitReached), "already_purchased");
  EXPECT_EQ(StatusWord(Outcome::kSoldOut), "sold_out");
  EXPECT_EQ(DrawStatusWord(Outcome::kReserved), "won");
  EXPECT_EQ(DrawStatusWord(Outcome::kNoPrize), "no_prize");
  EXPECT_EQ(DrawStatusWord(Outcome::kLimitReached), "limit_reached");
  EXPECT_EQ(DrawStatusWord(Outcome::kSoldOut), "sold_out");
}

Activity ValidLottery() {
  Activity a = Valid();
  a.lottery =
      Lottery{.prizes = {{"gold", "Gold", 1, 2}, {"mug", "Mug", 9, 8}}, .no_prize_weight = 90};
  a.stock = 10;
  return a;
}

TEST(LotteryTest, ValidatesPrizeTables) {
  EXPECT_TRUE(Validate(ValidLottery()).ok());
  EXPECT_EQ(KindName(ValidLottery()), "lottery");
  EXPECT_EQ(ValidLottery().InitialUnits(), 10);
  auto mutate = [](auto change) {
    Activity a = ValidLottery();
    change(a);
    return Validate(a).ok();
  };
  EXPECT_FALSE(mutate([](Activity& a) { a.stock = 11; }));  // not the prizes' total
  EXPECT_FALSE(mutate([](Activity& a) { a.lottery->prizes.clear(); }));
  EXPECT_FALSE(mutate([](Activity& a) { a.lottery->prizes[1].id = "gold"; }));
  EXPECT_FALSE(mutate([](Activity& a) { a.lottery->prizes[0].id = "a b"; }));
  EXPECT_FALSE(mutate([](Activity& a) { a.lottery->prizes[0].weight = 0; }));
  EXPECT_FALSE(mutate([](Activity& a) { a.lottery->prizes[0].weight = kMaxWeight + 1; }));
  EXPECT_FALSE(mutate([](Activity& a) { a.lottery->prizes[0].name = ""; }));
  EXPECT_FALSE(mutate([](Activity& a) { a.lottery->no_prize_weight = -1; }));
  EXPECT_FALSE(mutate([](Activity& a) { a.lottery->queue_capacity = 0; }));
  EXPECT_FALSE(mutate([](Activity& a) { a.kind = StockKind::kItemised; }));
  EXPECT_TRUE(mutate([](Activity& a) { a.lottery->no_prize_weight = 0; }));
  EXPECT_EQ(AdmissionFrom("fifo"), Admission::kFifo);
  EXPECT_FALSE(AdmissionFrom("lifo").has_value());
}

}  // namespace
}  // namespace flashsale::core
