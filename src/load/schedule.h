#pragma once
// When requests are meant to be sent, and who sends them.
//
// Open loop (a fixed arrival rate) decides each request's send time in advance, whatever the
// server does: request i is due at start + i / rate. A request sent late (every connection was
// busy waiting on a slow server) still has its latency measured from its intended time, so
// queueing shows in the percentiles instead of being hidden (coordinated omission). A burst, N
// users arriving within T seconds of the opening, is the open loop at N / T per second, N
// requests.
//
// Time is injected (a MonotonicClock), so the schedule is tested without sleeping.

#include <cstdint>
#include <string>

#include "base/random.h"

namespace flashsale::load {

// Nanoseconds on a monotonic clock, from an arbitrary origin.
class MonotonicClock {
 public:
  virtual ~MonotonicClock() = default;
  virtual int64_t NowNs() const = 0;
};

// std::chrono::steady_clock.
class SteadyClock final : public MonotonicClock {
 public:
  int64_t NowNs() const override;
  static const SteadyClock& Instance();
};

class OpenLoopSchedule {
 public:
  // A rate of a request per nanosecond or more means everything is due at the start.
  static constexpr double kAtOnce = 1e9;

  // `rate_per_s` > 0; `start_ns` on the clock the caller uses.
  OpenLoopSchedule(double rate_per_s, int64_t start_ns);
  // `count` requests spread evenly over `within_s` seconds from `start_ns`.
  static OpenLoopSchedule Burst(int64_t count, double within_s, int64_t start_ns);

  // When request `index` (0-based) is due.
  int64_t IntendedNs(int64_t index) const;
  // How long to wait at `now_ns` before sending request `index` (0 when it is due or late).
  int64_t WaitNs(int64_t index, int64_t now_ns) const;
  // The latency of request `index` answered at `done_ns`: from its intended send time, not from
  // when it was actually sent.
  int64_t LatencyNs(int64_t index, int64_t done_ns) const { return done_ns - IntendedNs(index); }
  // How many requests are due by `now_ns`.
  int64_t DueBy(int64_t now_ns) const;
  double rate() const { return rate_; }

 private:
  double rate_;
  int64_t start_ns_;
};

// Which user sends request i: sequential (user i mod N, so N requests are N different users)
// or uniformly random among N (the randomness injected, one generator per thread).
class UserIds {
 public:
  UserIds(std::string prefix, int64_t users, bool random)
      : prefix_(std::move(prefix)), users_(users), random_(random) {}
  std::string For(int64_t index, base::Random& random) const;

 private:
  std::string prefix_;
  int64_t users_;
  bool random_;
};

}  // namespace flashsale::load
