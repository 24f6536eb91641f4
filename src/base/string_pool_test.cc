#include "base/string_pool.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace flashsale::base {
namespace {

TEST(StringPoolTest, AStringGivenBackIsTakenAgainEmptyWithItsStorage) {
  std::string text(1000, 'x');
  const char* storage = text.data();
  GiveString(std::move(text));
  std::string again = TakeString();
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(again.data(), storage);
  EXPECT_GE(again.capacity(), 1000u);
}

TEST(StringPoolTest, SmallAndHugeStringsAreNotKept) {
  while (TakeString().capacity() > std::string().capacity()) {
  }  // empty this thread's pool
  GiveString(std::string("short"));
  EXPECT_EQ(TakeString().capacity(), std::string().capacity());
  GiveString(std::string(kMaxPooledCapacity + 1, 'x'));
  EXPECT_EQ(TakeString().capacity(), std::string().capacity());
}

TEST(StringPoolTest, EachThreadHasItsOwnPool) {
  while (TakeString().capacity() > std::string().capacity()) {
  }
  GiveString(std::string(500, 'x'));
  size_t other_capacity = 0;
  std::thread other([&] { other_capacity = TakeString().capacity(); });
  other.join();
  EXPECT_EQ(other_capacity, std::string().capacity());
  EXPECT_GE(TakeString().capacity(), 500u);
}

}  // namespace
}  // namespace flashsale::base
