#include "load/histogram.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

namespace flashsale::load {
namespace {

// Within the histogram's precision (1/128 of the value) of `expected`.
::testing::AssertionResult Near(int64_t actual, int64_t expected) {
  const int64_t slack = expected / 128 + 1;
  if (std::llabs(actual - expected) <= slack) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << actual << " is not within " << slack << " of " << expected;
}

TEST(HistogramTest, EmptyReportsZero) {
  Histogram histogram;
  EXPECT_EQ(histogram.count(), 0);
  EXPECT_EQ(histogram.Percentile(0.5), 0);
  EXPECT_EQ(histogram.Percentile(0.999), 0);
  EXPECT_EQ(histogram.max(), 0);
  EXPECT_EQ(histogram.min(), 0);
}

TEST(HistogramTest, SmallValuesAreExact) {
  Histogram histogram;
  for (int64_t v = 1; v <= 100; ++v) histogram.Record(v);
  EXPECT_EQ(histogram.Percentile(0.5), 50);
  EXPECT_EQ(histogram.Percentile(0.9), 90);
  EXPECT_EQ(histogram.Percentile(0.99), 99);
  EXPECT_EQ(histogram.Percentile(1.0), 100);
  EXPECT_EQ(histogram.Percentile(0.0), 1);
  EXPECT_EQ(histogram.min(), 1);
  EXPECT_DOUBLE_EQ(histogram.mean(), 50.5);
}

TEST(HistogramTest, PercentilesOfMillisecondsWithinOnePercent) {
  // 1 ms .. 10 s in steps of 1 ms: the q-th percentile is q * 10000 ms.
  Histogram histogram;
  for (int64_t ms = 1; ms <= 10000; ++ms) histogram.Record(ms * 1'000'000);
  EXPECT_EQ(histogram.count(), 10000);
  EXPECT_TRUE(Near(histogram.Percentile(0.5), 5000 * 1'000'000LL));
  EXPECT_TRUE(Near(histogram.Percentile(0.9), 9000 * 1'000'000LL));
  EXPECT_TRUE(Near(histogram.Percentile(0.99), 9900 * 1'000'000LL));
  EXPECT_TRUE(Near(histogram.Percentile(0.999), 9990 * 1'000'000LL));
  EXPECT_EQ(histogram.Percentile(1.0), 10000 * 1'000'000LL);  // never above the max
  EXPECT_EQ(histogram.max(), 10000 * 1'000'000LL);
}

TEST(HistogramTest, ATailShowsInTheHighPercentilesOnly) {
  // 990 fast answers (1 ms) and 10 slow ones (2 s): p99 is still fast, p99.9 is slow.
  Histogram histogram;
  for (int i = 0; i < 990; ++i) histogram.Record(1'000'000);
  for (int i = 0; i < 10; ++i) histogram.Record(2'000'000'000);
  EXPECT_TRUE(Near(histogram.Percentile(0.5), 1'000'000));
  EXPECT_TRUE(Near(histogram.Percentile(0.99), 1'000'000));
  EXPECT_TRUE(Near(histogram.Percentile(0.991), 2'000'000'000));
  EXPECT_TRUE(Near(histogram.Percentile(0.999), 2'000'000'000));
}

TEST(HistogramTest, MergeEqualsRecordingEverythingInOne) {
  Histogram a, b, all;
  for (int64_t v = 0; v < 5000; ++v) {
    const int64_t value = v * 7919 % 100000 * 1000;
    (v % 2 ? a : b).Record(value);
    all.Record(value);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_EQ(a.min(), all.min());
  for (double q : {0.1, 0.5, 0.9, 0.99, 0.999}) EXPECT_EQ(a.Percentile(q), all.Percentile(q)) << q;
}

TEST(HistogramTest, BucketsTileTheRangeWithoutGaps) {
  for (size_t b = 0; b + 1 < Histogram::kBuckets; ++b) {
    ASSERT_EQ(Histogram::BucketHigh(b) + 1, Histogram::BucketLow(b + 1)) << b;
    ASSERT_EQ(Histogram::BucketOf(Histogram::BucketLow(b)), b);
    ASSERT_EQ(Histogram::BucketOf(Histogram::BucketHigh(b)), b);
  }
  // Out of range: clamped into the last bucket, never out of bounds.
  Histogram histogram;
  histogram.Record(-5);
  histogram.Record(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(histogram.count(), 2);
  EXPECT_EQ(histogram.Percentile(0.5), 0);
}

}  // namespace
}  // namespace flashsale::load
