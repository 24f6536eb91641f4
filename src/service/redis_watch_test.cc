// The acknowledged-orders ring of the Redis watch: bounded by count and by age, lost orders
// forgotten, activity ids kept apart.
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

}  // namespace
}  // namespace flashsale::service
