#include "load/schedule.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace flashsale::load {
namespace {

// A monotonic clock moved by the test.
class ManualMonotonic final : public MonotonicClock {
 public:
  int64_t NowNs() const override { return now_; }
  void Set(int64_t now) { now_ = now; }

 private:
  int64_t now_ = 0;
};

constexpr int64_t kMs = 1'000'000;

TEST(OpenLoopScheduleTest, RequestsAreDueAtTheRateFromTheStart) {
  const OpenLoopSchedule schedule(1000, 5 * kMs);  // one per millisecond from t = 5 ms
  EXPECT_EQ(schedule.IntendedNs(0), 5 * kMs);
  EXPECT_EQ(schedule.IntendedNs(1), 6 * kMs);
  EXPECT_EQ(schedule.IntendedNs(1000), 1005 * kMs);
  EXPECT_EQ(schedule.DueBy(4 * kMs), 0);
  EXPECT_EQ(schedule.DueBy(5 * kMs), 1);
  EXPECT_EQ(schedule.DueBy(5 * kMs + kMs / 2), 1);
  EXPECT_EQ(schedule.DueBy(15 * kMs), 11);
}

TEST(OpenLoopScheduleTest, ARequestWaitsUntilDueAndALateOneCountsItsQueueing) {
  ManualMonotonic clock;
  const OpenLoopSchedule schedule(100, 0);  // one per 10 ms
  clock.Set(25 * kMs);
  EXPECT_EQ(schedule.WaitNs(3, clock.NowNs()), 5 * kMs);  // due at 30 ms
  EXPECT_EQ(schedule.WaitNs(2, clock.NowNs()), 0);        // due at 20 ms: late, send now
  // Request 2, sent late at 25 ms and answered at 27 ms, took 7 ms from the user's point of view
  // (coordinated omission would report the 2 ms of the round trip only).
  clock.Set(27 * kMs);
  EXPECT_EQ(schedule.LatencyNs(2, clock.NowNs()), 7 * kMs);
}

TEST(OpenLoopScheduleTest, ABurstSpreadsItsUsersOverTheWindow) {
  const OpenLoopSchedule burst = OpenLoopSchedule::Burst(1000, 2.0, 0);  // 1000 within 2 s
  EXPECT_DOUBLE_EQ(burst.rate(), 500);
  EXPECT_EQ(burst.IntendedNs(0), 0);
  EXPECT_EQ(burst.IntendedNs(999), 1998 * kMs);
  EXPECT_EQ(burst.DueBy(2000 * kMs), 1001);  // the window's end is where a 1001st would be
  // Within 0 seconds: everything is due at once.
  const OpenLoopSchedule at_once = OpenLoopSchedule::Burst(1000, 0, 7);
  EXPECT_EQ(at_once.IntendedNs(999), 7);
  EXPECT_EQ(at_once.DueBy(6), 0);
  EXPECT_GE(at_once.DueBy(7), 1000);
}

TEST(OpenLoopScheduleTest, DueByAgreesWithIntendedAtEveryStep) {
  const OpenLoopSchedule schedule(333.3, 1234);
  for (int64_t i = 0; i < 2000; ++i) {
    const int64_t at = schedule.IntendedNs(i);
    ASSERT_EQ(schedule.DueBy(at), i + 1) << i;
    ASSERT_EQ(schedule.DueBy(at - 1), i) << i;
  }
}

TEST(UserIdsTest, SequentialCyclesAndRandomStaysInRangeAndReplays) {
  base::SeededRandom unused(1);
  const UserIds sequential("u", 3, false);
  EXPECT_EQ(sequential.For(0, unused), "u0");
  EXPECT_EQ(sequential.For(2, unused), "u2");
  EXPECT_EQ(sequential.For(3, unused), "u0");

  const UserIds random("r", 50, true);
  base::SeededRandom first(42), second(42);
  std::set<std::string> seen;
  for (int i = 0; i < 500; ++i) {
    const std::string id = random.For(i, first);
    EXPECT_EQ(id, random.For(i, second));  // the same seed, the same users
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 50u);  // 500 draws among 50 reach them all
  for (const std::string& id : seen) EXPECT_LT(std::stoi(id.substr(1)), 50);
}

}  // namespace
}  // namespace flashsale::load
