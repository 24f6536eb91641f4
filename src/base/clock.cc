#include "base/clock.h"

#include <chrono>

namespace flashsale::base {

int64_t SystemClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const SystemClock& SystemClock::Instance() {
  static const SystemClock kClock;
  return kClock;
}

}  // namespace flashsale::base
