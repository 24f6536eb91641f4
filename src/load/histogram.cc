#include "load/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace flashsale::load {

namespace {
constexpr uint64_t kSubCount = uint64_t{1} << Histogram::kSubBits;
}  // namespace

size_t Histogram::BucketOf(uint64_t value) {
  if (value < kLinear) return static_cast<size_t>(value);
  const int top = std::bit_width(value) - 1;  // >= kSubBits + 1
  if (top >= kMaxBits) return kBuckets - 1;
  const int shift = top - kSubBits;
  const uint64_t sub = (value >> shift) - kSubCount;  // 0..kSubCount-1
  return static_cast<size_t>(kLinear + static_cast<uint64_t>(top - kSubBits - 1) * kSubCount + sub);
}

uint64_t Histogram::BucketLow(size_t bucket) {
  if (bucket < kLinear) return bucket;
  const uint64_t rest = bucket - kLinear;
  const int shift = static_cast<int>(rest / kSubCount) + 1;
  return (kSubCount + rest % kSubCount) << shift;
}

uint64_t Histogram::BucketHigh(size_t bucket) {
  if (bucket < kLinear) return bucket;
  const int shift = static_cast<int>((bucket - kLinear) / kSubCount) + 1;
  return BucketLow(bucket) + (uint64_t{1} << shift) - 1;
}

void Histogram::Record(int64_t value) {
  value = std::max<int64_t>(value, 0);
  ++buckets_[BucketOf(static_cast<uint64_t>(value))];
  min_ = count_ == 0 ? value : std::min(min_, value);
  max_ = std::max(max_, value);
  sum_ += value;
  ++count_;
}

void Histogram::Merge(const Histogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
  count_ += other.count_;
}

int64_t Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // The rank of the value asked for, 1-based: at least one value.
  const auto rank =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * static_cast<double>(count_) - 1e-9)));
  int64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      return std::min(static_cast<int64_t>(BucketHigh(i)), max_);
    }
  }
  return max_;
}

}  // namespace flashsale::load
