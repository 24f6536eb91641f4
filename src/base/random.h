#pragma once
// Randomness, injected: order ids, lottery draws and backoff jitter take a Random&, so tests can
// replay a sequence. Instances are not thread-safe; give each thread its own.

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>

namespace flashsale::base {

class Random {
 public:
  virtual ~Random() = default;
  virtual uint64_t Next() = 0;
  // Uniform in [0, bound); bound > 0. Unbiased (rejection sampling).
  uint64_t Uniform(uint64_t bound);
};

// OpenSSL's CSPRNG, read in blocks. For anything a client could exploit by guessing: order ids,
// lottery draws, tokens.
class SecureRandom final : public Random {
 public:
  uint64_t Next() override;

 private:
  // 4 KiB a call: RAND_bytes's fixed cost (locks, parameter lookups) is paid once per 512 draws.
  std::array<uint64_t, 512> block_{};
  size_t next_ = block_.size();
};

// A fixed sequence from a seed, for tests and benchmarks.
class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed) : engine_(seed) {}
  uint64_t Next() override { return engine_(); }

 private:
  std::mt19937_64 engine_;
};

}  // namespace flashsale::base
