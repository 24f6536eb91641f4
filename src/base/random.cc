#include "base/random.h"

#include <openssl/rand.h>

#include <stdexcept>

namespace flashsale::base {

uint64_t Random::Uniform(uint64_t bound) {
  // Reject the top partial range so every value in [0, bound) is equally likely.
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % bound);
  uint64_t value = Next();
  while (value >= limit) value = Next();
  return value % bound;
}

uint64_t SecureRandom::Next() {
  if (next_ == block_.size()) {
    // RAND_bytes fails only when the OS entropy source is broken; continuing would hand out
    // guessable ids, so this is one of the few places that throws.
    if (RAND_bytes(reinterpret_cast<unsigned char*>(block_.data()),
                   static_cast<int>(sizeof(block_))) != 1) {
      throw std::runtime_error("OpenSSL RAND_bytes failed: no secure randomness available");
    }
    next_ = 0;
  }
  return block_[next_++];
}

}  // namespace flashsale::base
