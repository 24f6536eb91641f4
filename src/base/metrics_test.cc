#include "base/metrics.h"

#include <gtest/gtest.h>

namespace flashsale::base {
namespace {

using namespace std::chrono_literals;

TEST(MetricsTest, HistogramBucketsAndPrometheusText) {
  LatencyHistogram histogram;
  histogram.Record(30us);   // <= 50 us
  histogram.Record(700us);  // <= 1 ms
  histogram.Record(10s);    // +Inf
  const auto snapshot = histogram.Read();
  EXPECT_EQ(snapshot.count, 3u);
  EXPECT_NEAR(snapshot.sum_seconds, 10.00073, 1e-9);

  std::string text;
  AppendPrometheusHistogram(text, "x_seconds", "route=\"a\"", snapshot);
  EXPECT_NE(text.find("x_seconds_bucket{route=\"a\",le=\"5e-05\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{route=\"a\",le=\"0.001\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{route=\"a\",le=\"5\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{route=\"a\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_count{route=\"a\"} 3\n"), std::string::npos);
}

TEST(MetricsTest, CounterAddsAndSnapshotsSum) {
  Counter counter;
  counter.Add();
  counter.Add(4);
  EXPECT_EQ(counter.value(), 5u);
  LatencyHistogram a, b;
  a.Record(1ms);
  b.Record(2ms);
  auto sum = a.Read();
  sum.Add(b.Read());
  EXPECT_EQ(sum.count, 2u);
}

}  // namespace
}  // namespace flashsale::base
