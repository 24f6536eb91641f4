#include "load/schedule.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace flashsale::load {

int64_t SteadyClock::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const SteadyClock& SteadyClock::Instance() {
  static const SteadyClock clock;
  return clock;
}

OpenLoopSchedule::OpenLoopSchedule(double rate_per_s, int64_t start_ns)
    : rate_(rate_per_s > 0 ? rate_per_s : 1), start_ns_(start_ns) {}

OpenLoopSchedule OpenLoopSchedule::Burst(int64_t count, double within_s, int64_t start_ns) {
  // within 0: all at once, i.e. as fast as the connections allow.
  const double rate =
      within_s > 0 ? static_cast<double>(std::max<int64_t>(count, 1)) / within_s : kAtOnce;
  return OpenLoopSchedule(rate, start_ns);
}

int64_t OpenLoopSchedule::IntendedNs(int64_t index) const {
  if (rate_ >= kAtOnce) return start_ns_;
  return start_ns_ + static_cast<int64_t>(std::llround(static_cast<double>(index) * 1e9 / rate_));
}

int64_t OpenLoopSchedule::WaitNs(int64_t index, int64_t now_ns) const {
  return std::max<int64_t>(0, IntendedNs(index) - now_ns);
}

int64_t OpenLoopSchedule::DueBy(int64_t now_ns) const {
  if (now_ns < start_ns_) return 0;
  if (rate_ >= kAtOnce) return std::numeric_limits<int64_t>::max();
  // Request i is due when start + i/rate <= now; count them (i = 0 is due at the start).
  auto due =
      static_cast<int64_t>(std::floor(static_cast<double>(now_ns - start_ns_) * rate_ / 1e9)) + 1;
  // Rounding in IntendedNs may put the last one a nanosecond either side: settle it exactly.
  while (due > 0 && IntendedNs(due - 1) > now_ns) --due;
  while (IntendedNs(due) <= now_ns) ++due;
  return due;
}

std::string UserIds::For(int64_t index, base::Random& random) const {
  const uint64_t users = static_cast<uint64_t>(std::max<int64_t>(users_, 1));
  const uint64_t n = random_ ? random.Uniform(users) : static_cast<uint64_t>(index) % users;
  return prefix_ + std::to_string(n);
}

}  // namespace flashsale::load
