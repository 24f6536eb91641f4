#include "base/metrics.h"

#include <fmt/format.h>

namespace flashsale::base {

void LatencyHistogram::Record(std::chrono::nanoseconds latency) {
  const double seconds = std::chrono::duration<double>(latency).count();
  size_t bucket = 0;
  while (bucket < kLatencyBuckets.size() && seconds > kLatencyBuckets[bucket]) ++bucket;
  buckets_[bucket].Add();
  sum_ns_.Add(static_cast<uint64_t>(latency.count() > 0 ? latency.count() : 0));
}

LatencyHistogram::Snapshot LatencyHistogram::Read() const {
  Snapshot snapshot;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    snapshot.buckets[i] = buckets_[i].value();
    snapshot.count += snapshot.buckets[i];
  }
  snapshot.sum_seconds = static_cast<double>(sum_ns_.value()) / 1e9;
  return snapshot;
}

void LatencyHistogram::Snapshot::Add(const Snapshot& other) {
  for (size_t i = 0; i < buckets.size(); ++i) buckets[i] += other.buckets[i];
  count += other.count;
  sum_seconds += other.sum_seconds;
}

void AppendPrometheusHistogram(std::string& out, std::string_view name, std::string_view labels,
                               const LatencyHistogram::Snapshot& snapshot) {
  const std::string prefix = labels.empty() ? "" : std::string(labels) + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
    cumulative += snapshot.buckets[i];
    out +=
        fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, prefix, kLatencyBuckets[i], cumulative);
  }
  out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n", name, prefix, snapshot.count);
  const std::string braces = labels.empty() ? "" : fmt::format("{{{}}}", labels);
  out += fmt::format("{}_sum{} {}\n", name, braces, snapshot.sum_seconds);
  out += fmt::format("{}_count{} {}\n", name, braces, snapshot.count);
}

}  // namespace flashsale::base
