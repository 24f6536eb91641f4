#include "service/burst_gate.h"

namespace flashsale::service {

bool BurstGate::Defer(int64_t length, Clock::time_point now) {
  if (rate_ <= 0) return false;
  if (!window_length_) {
    window_length_ = length;
    window_start_ = now;
  } else if (now - window_start_ >= kWindow) {
    const double seconds = std::chrono::duration<double>(now - window_start_).count();
    const int64_t grown = length - *window_length_;
    // Shrunk (trimmed by another consumer, or the stream lost): no burst can be told.
    burst_ = grown > 0 && static_cast<double>(grown) / seconds >= static_cast<double>(rate_);
    window_length_ = length;
    window_start_ = now;
  } else if (!burst_) {
    // Within the window: already grown at the rate, by enough to be more than a clump.
    const double seconds = std::chrono::duration<double>(now - window_start_).count();
    const double grown = static_cast<double>(length - *window_length_);
    const double rate = static_cast<double>(rate_);
    burst_ = seconds > 0 &&
             grown >= rate * kEarlyShare * std::chrono::duration<double>(kWindow).count() &&
             grown / seconds >= rate;
  }
  if (!burst_) {
    deferring_since_.reset();
    return false;
  }
  if (catching_up_) return false;
  if (!deferring_since_) deferring_since_ = now;
  if (now - *deferring_since_ >= longest_) {
    // Deferred as long as it may: persist until caught up (CaughtUp), then defer again.
    deferring_since_.reset();
    catching_up_ = true;
    return false;
  }
  return true;
}

}  // namespace flashsale::service
