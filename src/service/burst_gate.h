#pragma once
// Burst deferral for one activity's order consumer: while the activity's stream grows faster
// than a rate (a burst of purchases), its consumer leaves it unread, for at most a bounded time
// at once; then it reads and persists until it has caught up, after which it may defer again.
//
// Why: reading costs Redis time (XREADGROUP builds the batch and records each entry as pending,
// which Redis also writes to its AOF), and during a burst that is time taken from the purchases,
// whose script runs on the same Redis thread. The intents wait in the stream, the outbox, as
// durable as the reservations themselves (docs/durability.md).
//
// The rate is the stream's growth (XLEN) over windows of at least `kWindow`; the consumer's own
// trims shrink the stream, so after one the next look starts a new window (Restart). A burst is
// told early: a window not yet over that has already grown at the rate, by at least a tenth of
// a full window's growth, is one (until a whole window says otherwise), so a burst's first
// quarter second is not spent persisting its first thousands of orders. Its end is told only
// by a whole window. Pure logic: the caller gives the lengths and the times.

#include <chrono>
#include <cstdint>
#include <optional>

namespace flashsale::service {

class BurstGate {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kWindow{250};
  // The growth that tells a burst before its window is over: this share of a whole window's.
  static constexpr double kEarlyShare = 0.1;

  // `rate`: entries a second from which the stream is a burst (0: never deferred); `longest`:
  // the longest deferral at once.
  BurstGate(int64_t rate, std::chrono::milliseconds longest) : rate_(rate), longest_(longest) {}

  // The stream's length now; true: leave it unread this time.
  bool Defer(int64_t length, Clock::time_point now);
  // The last read came back short: the consumer has caught up (a deferral may start again).
  void CaughtUp() { catching_up_ = false; }
  // The stream was trimmed (or its length is otherwise not comparable): a new window.
  void Restart() { window_length_.reset(); }

  bool deferring() const { return deferring_since_.has_value(); }

 private:
  int64_t rate_;
  std::chrono::milliseconds longest_;
  std::optional<int64_t> window_length_;  // the length at the window's start
  Clock::time_point window_start_{};
  bool burst_ = false;  // what the last full window measured
  std::optional<Clock::time_point> deferring_since_;
  bool catching_up_ = false;  // a deferral ran its longest: read until caught up
};

}  // namespace flashsale::service
