#include "service/burst_gate.h"

#include <gtest/gtest.h>

namespace flashsale::service {
namespace {

using namespace std::chrono_literals;
using Clock = BurstGate::Clock;

TEST(BurstGateTest, OffWithoutARate) {
  BurstGate gate(0, 10s);
  const auto t = Clock::time_point{} + 1h;
  EXPECT_FALSE(gate.Defer(0, t));
  EXPECT_FALSE(gate.Defer(1'000'000, t + 1s));
}

TEST(BurstGateTest, DefersWhileTheStreamGrowsFastAndReadsOnceItSlows) {
  BurstGate gate(1000, 10s);  // a burst: 1,000 entries a second or more
  auto t = Clock::time_point{} + 1h;
  EXPECT_FALSE(gate.Defer(0, t)) << "the first look knows no rate";
  // 500 in 250 ms: 2,000 a second.
  EXPECT_TRUE(gate.Defer(500, t += 250ms));
  EXPECT_TRUE(gate.deferring());
  // Within a window the last measurement holds.
  EXPECT_TRUE(gate.Defer(510, t += 100ms));
  EXPECT_TRUE(gate.Defer(1000, t += 150ms));
  // 100 in 250 ms: 400 a second, the burst is over.
  EXPECT_FALSE(gate.Defer(1100, t += 250ms));
  EXPECT_FALSE(gate.deferring());
  // Exactly the rate counts as a burst.
  EXPECT_TRUE(gate.Defer(1350, t += 250ms));
}

TEST(BurstGateTest, ABurstIsToldBeforeItsWindowIsOverItsEndOnlyByAWholeWindow) {
  BurstGate gate(2000, 10s);  // a whole window's growth at the rate: 500
  auto t = Clock::time_point{} + 1h;
  EXPECT_FALSE(gate.Defer(0, t));
  // 40 in 10 ms is 4,000 a second, but less than a tenth of a window's 500: a clump.
  EXPECT_FALSE(gate.Defer(40, t += 10ms));
  // 60 in 20 ms: 3,000 a second and more than 50: a burst, 230 ms before the window ends.
  EXPECT_TRUE(gate.Defer(60, t += 10ms));
  // It holds within the window even without growth; a whole window without it ends it.
  EXPECT_TRUE(gate.Defer(60, t += 100ms));
  EXPECT_FALSE(gate.Defer(100, t += 130ms)) << "100 in the whole 250 ms window: 400 a second";
  // Fast growth late in a window but slower than the rate over its part so far: no burst.
  EXPECT_FALSE(gate.Defer(100, t += 200ms));
  EXPECT_FALSE(gate.Defer(190, t += 40ms)) << "90 in 240 ms: 375 a second";
}

TEST(BurstGateTest, ADeferralEndsAfterItsLongestAndWaitsForTheConsumerToCatchUp) {
  BurstGate gate(100, 1s);
  auto t = Clock::time_point{} + 1h;
  int64_t length = 0;
  gate.Defer(length, t);
  // A burst of 1,000 a second that goes on.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(gate.Defer(length += 250, t += 250ms)) << i;
  // 1 s after the deferral began: read, and keep reading while the burst lasts.
  EXPECT_FALSE(gate.Defer(length += 250, t += 250ms));
  EXPECT_FALSE(gate.Defer(length += 250, t += 250ms));
  EXPECT_FALSE(gate.Defer(length += 250, t += 250ms));
  // Caught up: the next deferral may begin.
  gate.CaughtUp();
  EXPECT_TRUE(gate.Defer(length += 250, t += 250ms));
}

TEST(BurstGateTest, AShrinkingStreamIsNoBurstAndARestartStartsANewWindow) {
  BurstGate gate(100, 10s);
  auto t = Clock::time_point{} + 1h;
  gate.Defer(10'000, t);
  EXPECT_FALSE(gate.Defer(5'000, t += 250ms)) << "trimmed by someone: not a burst";
  EXPECT_TRUE(gate.Defer(5'100, t += 250ms));
  // Our own trim: the next look is a new window's start, the burst measured still holds.
  gate.Restart();
  EXPECT_TRUE(gate.Defer(100, t += 10ms));
  EXPECT_FALSE(gate.Defer(100, t += 250ms)) << "no growth over the new window";
}

}  // namespace
}  // namespace flashsale::service
