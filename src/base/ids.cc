#include "base/ids.h"

#include <array>
#include <cstdint>

#include "base/string_pool.h"

namespace flashsale::base {
namespace {

constexpr std::string_view kCrockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

// Writes the low 5*digits bits of value as base32 digits into out[0..digits).
void Encode(uint64_t value, int digits, char* out) {
  for (int i = digits - 1; i >= 0; --i) {
    out[i] = kCrockford[value & 31];
    value >>= 5;
  }
}

}  // namespace

std::string OrderIdGenerator::Next() {
  constexpr uint64_t kMask40 = (uint64_t{1} << 40) - 1;
  const auto ms = static_cast<uint64_t>(clock_.NowMs()) & ((uint64_t{1} << 48) - 1);
  std::string id = TakeString();  // a pooled string: no allocation when one is given back
  id.assign(26, '0');
  Encode(ms, 10, id.data());                            // 48 bits of time (top 2 bits zero)
  Encode(random_.Next() & kMask40, 8, id.data() + 10);  // 40 random bits
  Encode(random_.Next() & kMask40, 8, id.data() + 18);  // 40 more
  return id;
}

bool IsValidId(std::string_view id) {
  // A table of the allowed bytes: one load a character (every request checks its user id).
  static constexpr auto kAllowed = [] {
    std::array<bool, 256> allowed{};
    for (int c = 0; c < 256; ++c) {
      allowed[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '.' || c == ':' || c == '@' || c == '-';
    }
    return allowed;
  }();
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!kAllowed[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

}  // namespace flashsale::base
