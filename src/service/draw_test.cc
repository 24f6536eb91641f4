// A drawn prize named from the activity record, with no server.

#include "service/draw.h"

#include <gtest/gtest.h>

namespace flashsale::service {
namespace {

store::ActivityRecord LotteryRecord() {
  store::ActivityRecord record;
  record.activity.id = "spring";
  record.activity.lottery =
      core::Lottery{.prizes = {{"cup", "A tea cup", 1, 5}, {"pen", "A pen", 3, 10}}};
  return record;
}

TEST(NamePrizeTest, TheRecordNamesThePrize) {
  const store::ActivityRecord record = LotteryRecord();
  const WonPrize prize = NamePrize(&record, "pen");
  EXPECT_EQ(prize.id, "pen");
  EXPECT_EQ(prize.name, "A pen");
}

TEST(NamePrizeTest, APrizeTheRecordLacksIsNamedByItsId) {
  const store::ActivityRecord record = LotteryRecord();
  EXPECT_EQ(NamePrize(&record, "gone").name, "gone");
  EXPECT_EQ(NamePrize(nullptr, "cup").name, "cup");
  store::ActivityRecord sale;
  sale.activity.id = "sale";
  EXPECT_EQ(NamePrize(&sale, "cup").name, "cup");
}

}  // namespace
}  // namespace flashsale::service
