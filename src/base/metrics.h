#pragma once
// Counters and latency histograms written by one thread and read by another (the /metrics
// scraper): relaxed atomics, with increments that are a plain load and store because there is
// only ever one writer. Cheap enough for the purchase path.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashsale::base {

class Counter {
 public:
  void Add(uint64_t n = 1) {  // single writer
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// Latency buckets (upper bounds, seconds) shared by every histogram, so shards can be summed.
inline constexpr std::array<double, 16> kLatencyBuckets = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025,   0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0};

class LatencyHistogram {
 public:
  void Record(std::chrono::nanoseconds latency);  // single writer

  struct Snapshot {
    std::array<uint64_t, kLatencyBuckets.size() + 1> buckets{};  // per bucket (not cumulative)
    uint64_t count = 0;
    double sum_seconds = 0;
    void Add(const Snapshot& other);
  };
  Snapshot Read() const;

 private:
  std::array<Counter, kLatencyBuckets.size() + 1> buckets_;
  Counter sum_ns_;
};

// Appends a Prometheus histogram's lines (name_bucket{labels,le=...}, _sum, _count).
void AppendPrometheusHistogram(std::string& out, std::string_view name, std::string_view labels,
                               const LatencyHistogram::Snapshot& snapshot);

}  // namespace flashsale::base
