#include "base/ring_queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace flashsale::base {
namespace {

std::vector<int> Contents(const RingQueue<std::unique_ptr<int>>& ring) {
  std::vector<int> out;
  for (const auto& value : ring) out.push_back(*value);
  return out;
}

TEST(RingQueueTest, FirstInFirstOutAcrossWrapsAndGrowth) {
  RingQueue<std::unique_ptr<int>> ring;
  EXPECT_TRUE(ring.empty());
  int next_in = 0, next_out = 0;
  // Slides around the ring many times while holding up to 40 (growing twice past 16).
  for (int round = 0; round < 200; ++round) {
    const int push = round % 7 + 1 + (round == 50 ? 35 : 0);
    for (int i = 0; i < push; ++i) ring.push_back(std::make_unique<int>(next_in++));
    while (ring.size() > static_cast<size_t>(round % 5)) {
      ASSERT_EQ(*ring.front(), next_out++);
      ring.pop_front();
    }
  }
  std::vector<int> expected;
  for (int i = next_out; i < next_in; ++i) expected.push_back(i);
  EXPECT_EQ(Contents(ring), expected);
  EXPECT_EQ(ring.capacity(), 64u);
}

TEST(RingQueueTest, SlidingWithinCapacityKeepsTheSlots) {
  RingQueue<std::unique_ptr<int>> ring;
  for (int i = 0; i < 3; ++i) ring.push_back(std::make_unique<int>(i));
  const size_t capacity = ring.capacity();
  for (int i = 3; i < 1000; ++i) {
    ring.push_back(std::make_unique<int>(i));
    EXPECT_EQ(*ring.front(), i - 3);
    ring.pop_front();
  }
  EXPECT_EQ(ring.capacity(), capacity);
  EXPECT_EQ(Contents(ring), (std::vector<int>{997, 998, 999}));
}

TEST(RingQueueTest, IterationMutatesInPlaceAndClearDestroys) {
  auto shared = std::make_shared<int>(7);
  RingQueue<std::shared_ptr<int>> ring;
  for (int i = 0; i < 20; ++i) ring.push_back(std::shared_ptr<int>(shared));
  ring.pop_front();
  EXPECT_EQ(shared.use_count(), 20);
  int seen = 0;
  for (auto& value : ring) {
    if (seen++ % 2 == 0) value.reset();
  }
  EXPECT_EQ(seen, 19);
  EXPECT_EQ(shared.use_count(), 10);
  ring.clear();
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(shared.use_count(), 1);
  ring.push_back(std::shared_ptr<int>(shared));
  EXPECT_EQ(*ring.front(), 7);
}

}  // namespace
}  // namespace flashsale::base
