#include "service/activity_guard.h"

#include <gtest/gtest.h>

#include "base/clock.h"

namespace flashsale::service {
namespace {

using core::WriteSeq;

TEST(ActivityGuardTest, TheFloorOnlyGrowsEpochFirst) {
  ActivityGuard guard;
  EXPECT_EQ(guard.floor(), (WriteSeq{0, 0}));
  guard.Raise({0, 7});
  guard.Raise({0, 3});  // lower: kept at 7
  EXPECT_EQ(guard.floor(), (WriteSeq{0, 7}));
  guard.Raise({2, 0});  // a later epoch is higher whatever its seq
  EXPECT_EQ(guard.floor(), (WriteSeq{2, 0}));
  guard.Raise({1, 1'000'000});
  EXPECT_EQ(guard.floor(), (WriteSeq{2, 0}));
}

TEST(ActivityGuardTest, PackingKeepsOrderAndSaturatesBelowWhatDoesNotFit) {
  const WriteSeq values[] = {{0, 0}, {0, 1}, {0, (int64_t{1} << 40) - 1}, {1, 0}, {3, 5}};
  for (size_t i = 0; i < std::size(values); ++i) {
    EXPECT_EQ(ActivityGuard::Unpack(ActivityGuard::Pack(values[i])), values[i]);
    if (i > 0) {
      EXPECT_LT(ActivityGuard::Pack(values[i - 1]), ActivityGuard::Pack(values[i]));
    }
  }
  // A seq past 40 bits is kept as the largest of its epoch; an epoch past its bits as the
  // largest value: both lower than the real one (a lower floor checks less, never refuses more).
  const WriteSeq big_seq{1, int64_t{1} << 41};
  EXPECT_LT(ActivityGuard::Unpack(ActivityGuard::Pack(big_seq)), big_seq);
  EXPECT_EQ(ActivityGuard::Unpack(ActivityGuard::Pack(big_seq)).epoch, 1);
  const WriteSeq big_epoch{int64_t{1} << 30, 0};
  EXPECT_LT(ActivityGuard::Unpack(ActivityGuard::Pack(big_epoch)), big_epoch);
  EXPECT_EQ(ActivityGuard::Pack({-1, 5}), 0u);
}

TEST(ActivityGuardsTest, FreezesOneActivityAndThawsItOnce) {
  base::ManualClock clock(1000);
  ActivityGuards guards(clock);
  ActivityGuard& a = guards.Of("a");
  ActivityGuard& b = guards.Of("b");
  EXPECT_EQ(&a, &guards.Of("a"));
  a.Raise({0, 9});
  EXPECT_TRUE(guards.Freeze("a", FreezeReason::kBehind, {0, 4}));
  EXPECT_FALSE(guards.Freeze("a", FreezeReason::kServer, {0, 4}));  // frozen already
  EXPECT_TRUE(a.frozen());
  EXPECT_FALSE(b.frozen());
  EXPECT_TRUE(guards.any_frozen());
  guards.CountRefused("a");
  guards.CountRefused("b");  // not frozen: nothing counted
  auto frozen = guards.Frozen();
  ASSERT_EQ(frozen.size(), 1u);
  EXPECT_EQ(frozen[0].activity_id, "a");
  EXPECT_EQ(frozen[0].reason, FreezeReason::kBehind);
  EXPECT_EQ(frozen[0].floor, (WriteSeq{0, 9}));
  EXPECT_EQ(frozen[0].redis_holds, (WriteSeq{0, 4}));
  EXPECT_EQ(frozen[0].refused, 1);
  EXPECT_EQ(guards.FrozenFloors().at("a"), (WriteSeq{0, 9}));

  clock.Advance(250);
  guards.Thaw("a", {3, 0}, 3, 2, 0);
  EXPECT_FALSE(a.frozen());
  EXPECT_FALSE(guards.any_frozen());
  EXPECT_EQ(a.floor(), (WriteSeq{3, 0}));
  auto history = guards.History();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].thawed_ms - history[0].since_ms, 250);
  EXPECT_EQ(history[0].orders_applied, 2);
  guards.Thaw("a", {3, 0}, 3, 0, 0);  // not frozen: nothing more
  EXPECT_EQ(guards.History().size(), 1u);

  std::string metrics;
  guards.AppendPrometheus(metrics);
  EXPECT_NE(
      metrics.find("flashsale_activity_freezes_total{activity=\"a\",reason=\"sequence_behind\"} 1"),
      std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace flashsale::service
