// The acknowledged-orders ring of the Redis watch: bounded by count and by age, lost orders
// forgotten, activity ids kept apart. A node's event shown per activity (server_changed) until
// that node's repair is confirmed.
#include "service/redis_watch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/clock.h"

namespace flashsale::service {
namespace {

TEST(RedisWatchAcknowledgedTest, KeepsTheNewestUpToItsBound) {
  base::ManualClock clock(1'000'000);
  RedisWatch watch(clock);
  const size_t extra = 3;
  for (size_t i = 0; i < RedisWatch::kAcknowledgedKept + extra; ++i) {
    watch.Acknowledged(i % 2 == 0 ? "even" : "odd", "o" + std::to_string(i));
  }
  const auto kept = watch.AcknowledgedOrders();
  EXPECT_EQ(kept.at("even").size() + kept.at("odd").size(), RedisWatch::kAcknowledgedKept);
  EXPECT_EQ(kept.at("odd").front(), "o3");  // o0, o1 and o2 went
  EXPECT_EQ(kept.at("even").front(), "o4");
  EXPECT_EQ(kept.at("odd").back(), "o" + std::to_string(RedisWatch::kAcknowledgedKept + 1));
}

TEST(RedisWatchAcknowledgedTest, ForgetsWhatIsTooOldAndWhatWasCountedLost) {
  base::ManualClock clock(1'000'000);
  RedisWatch watch(clock);
  watch.Acknowledged("a", "old");
  clock.Advance(RedisWatch::kAcknowledgedMaxAgeMs + 1);
  watch.Acknowledged("a", "o1");
  watch.Acknowledged("b", "o2");
  watch.Acknowledged("a", "o3");
  watch.Acknowledged("a", std::string(RedisWatch::kIdBytes + 1, 'x'));  // not an id: not kept
  EXPECT_EQ(watch.AcknowledgedOrders().at("a"), (std::vector<std::string>{"o1", "o3"}));
  watch.CountAcknowledgedLost({"o1", "o2"});
  const auto kept = watch.AcknowledgedOrders();
  EXPECT_EQ(kept.at("a"), (std::vector<std::string>{"o3"}));
  EXPECT_FALSE(kept.contains("b"));
}

TEST(RedisWatchNodeEventTest, AnActivityOfANodesEventIsFrozenUntilThatNodeIsConfirmed) {
  base::ManualClock clock(1'000'000);
  RedisWatch watch(clock);
  EXPECT_TRUE(watch.OnServer("n1:1", "r1"));  // startup: nothing sells until confirmed
  watch.OnServer("n2:2", "r2");
  watch.FreezeForNode("a", "n1:1");  // the startup's freeze is not shown per activity
  EXPECT_TRUE(watch.activities().Frozen().empty());
  watch.Confirm(std::vector<std::string>{"r1", "r2"}, 1, {});
  EXPECT_FALSE(watch.frozen());

  watch.OnPromoted("n1:1", "r1");  // the same run_id, promoted: an event
  watch.FreezeForNode("a", "n1:1");
  watch.FreezeForNode("b", "n2:2");  // its node had no event: not frozen
  const auto frozen = watch.activities().Frozen();
  ASSERT_EQ(frozen.size(), 1u);
  EXPECT_EQ(frozen[0].activity_id, "a");
  EXPECT_EQ(frozen[0].reason, FreezeReason::kServer);
  EXPECT_EQ(frozen[0].node, "n1:1");
  EXPECT_TRUE(watch.activities().Of("a").frozen());
  EXPECT_TRUE(watch.activities().FrozenFloors().empty());  // its repair is the node's

  clock.Advance(250);
  watch.Confirm(std::vector<std::string>{"r1"}, 2, {});
  EXPECT_FALSE(watch.activities().Of("a").frozen());
  EXPECT_FALSE(watch.activities().any_frozen());
  const auto history = watch.activities().History();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].thawed_ms - history[0].since_ms, 250);
  EXPECT_EQ(history[0].repair_epoch, 2);
  watch.FreezeForNode("a", "n1:1");  // confirmed: not frozen again
  EXPECT_FALSE(watch.activities().any_frozen());
}

// Each I/O thread's router reports a promotion when its own map shows it: the second report, after
// the repair ran, is a second event, confirmed by that repair's markers. Its figures are the same
// repair's, counted once in the totals (/metrics).
TEST(RedisWatchNodeEventTest, ARepairThatConfirmsTwoEventsIsCountedOnce) {
  base::ManualClock clock(1'000'000);
  RedisWatch watch(clock);
  watch.OnServer("n1:1", "r1");
  watch.Confirm("r1", 1, {});
  RepairSummary summary;
  summary.orders_applied = 23;
  summary.acknowledged_lost = 2;
  summary.epoch = 3;
  watch.OnPromoted("n1:1", "r1");
  watch.Confirm("r1", 3, summary);  // repaired here
  watch.OnPromoted("n1:1", "r1");   // another router's report of the same promotion
  EXPECT_TRUE(watch.frozen());
  watch.Confirm("r1", 3, summary);  // confirmed by the same repair's marker
  EXPECT_FALSE(watch.frozen());
  std::string metrics;
  watch.AppendPrometheus(metrics);
  EXPECT_NE(metrics.find("flashsale_repair_orders_applied_total 23\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("flashsale_repair_acknowledged_lost_total 2\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("flashsale_redis_events_total 2\n"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace flashsale::service
