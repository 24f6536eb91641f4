#include "base/failpoint.h"

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace flashsale::base {
namespace {

struct Failpoints {
  std::mutex mutex;
  std::map<std::string, long, std::less<>> countdown;  // 0: fire every time
  bool any = false;

  Failpoints() {
    const char* spec = std::getenv("FLASHSALE_FAILPOINTS");
    if (spec == nullptr) return;
    std::string_view rest(spec);
    while (!rest.empty()) {
      const size_t comma = std::min(rest.find(','), rest.size());
      std::string_view item = rest.substr(0, comma);
      rest.remove_prefix(std::min(comma + 1, rest.size()));
      const size_t colon = item.find(':');
      long count = 0;
      if (colon != std::string_view::npos) {
        std::from_chars(item.data() + colon + 1, item.data() + item.size(), count);
        item = item.substr(0, colon);
      }
      if (!item.empty()) countdown[std::string(item)] = count;
    }
    any = !countdown.empty();
  }
};

Failpoints& Instance() {
  static Failpoints failpoints;
  return failpoints;
}

}  // namespace

bool FailpointHit(std::string_view name) {
  Failpoints& failpoints = Instance();
  if (!failpoints.any) return false;
  std::lock_guard lock(failpoints.mutex);
  auto it = failpoints.countdown.find(name);
  if (it == failpoints.countdown.end()) return false;
  if (it->second == 0) return true;
  return --it->second == 0;
}

}  // namespace flashsale::base
