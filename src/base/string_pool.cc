#include "base/string_pool.h"

#include <array>
#include <utility>

namespace flashsale::base {

namespace {

// Enough for the replies a thread has in flight at once in the common case; beyond it strings
// are freed as usual.
constexpr size_t kPooled = 256;

struct Pool {
  std::array<std::string, kPooled> strings;
  size_t size = 0;
};

Pool& ThreadPool() {
  thread_local Pool pool;
  return pool;
}

}  // namespace

std::string TakeString() {
  Pool& pool = ThreadPool();
  if (pool.size == 0) return {};
  return std::move(pool.strings[--pool.size]);
}

void GiveString(std::string&& text) {
  Pool& pool = ThreadPool();
  if (pool.size == kPooled || text.capacity() > kMaxPooledCapacity ||
      text.capacity() <= std::string().capacity()) {
    return;
  }
  text.clear();
  pool.strings[pool.size++] = std::move(text);
}

}  // namespace flashsale::base
