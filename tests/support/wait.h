#pragma once
// Bounded waits for tests: poll a condition until it holds or the timeout passes (never an
// unbounded loop), and the milliseconds since a start, for the figures drills print.

#include <chrono>
#include <cstdint>
#include <thread>

namespace flashsale::testing {

// True once `done()` holds; false when `timeout` passed first. Polls every `step`.
template <typename Predicate>
bool Eventually(Predicate done, std::chrono::milliseconds timeout,
                std::chrono::milliseconds step = std::chrono::milliseconds(20)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(step);
  }
  return true;
}

inline int64_t MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

}  // namespace flashsale::testing
