#include "base/ids.h"

#include <gtest/gtest.h>

#include <set>

namespace flashsale::base {
namespace {

TEST(OrderIdTest, UniqueSortedByTimeAndFixedLength) {
  ManualClock clock(1'700'000'000'000);
  SeededRandom random(42);
  OrderIdGenerator ids(clock, random);
  std::set<std::string> seen;
  std::string previous;
  for (int i = 0; i < 10000; ++i) {
    if (i % 100 == 0) clock.Advance(1);
    std::string id = ids.Next();
    ASSERT_EQ(id.size(), 26u);
    ASSERT_TRUE(IsValidId(id)) << id;
    ASSERT_TRUE(seen.insert(id).second) << "duplicate " << id;
    // Ids of a later millisecond sort after every id of an earlier one.
    if (i % 100 == 0 && !previous.empty()) {
      ASSERT_LT(previous, id);
    }
    previous = id;
  }
}

TEST(OrderIdTest, SameSeedSameSequence) {
  ManualClock clock(5);
  SeededRandom a(7), b(7);
  OrderIdGenerator ids_a(clock, a), ids_b(clock, b);
  EXPECT_EQ(ids_a.Next(), ids_b.Next());
}

TEST(IdTest, AcceptsOnlySafeCharacters) {
  EXPECT_TRUE(IsValidId("user-42_x.y:z@q"));
  EXPECT_FALSE(IsValidId(""));
  EXPECT_FALSE(IsValidId(std::string(65, 'a')));
  EXPECT_TRUE(IsValidId(std::string(64, 'a')));
  for (std::string bad : {"a b", "a|b", "a{b", "a}b", "a\nb", "a/b", "é"}) {
    EXPECT_FALSE(IsValidId(bad)) << bad;
  }
}

TEST(RandomTest, UniformStaysInRange) {
  SeededRandom random(1);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(random.Uniform(7), 7u);
  SecureRandom secure;
  EXPECT_NE(secure.Next(), secure.Next());
}

}  // namespace
}  // namespace flashsale::base
