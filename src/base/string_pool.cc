#include "base/string_pool.h"

#include <array>
#include <utility>

namespace flashsale::base {

namespace {

// Enough for the replies a thread has in flight at once in the common case; beyond it strings
// are freed as usual.
constexpr size_t kPooled = 256;

// Set when this thread's pool is destroyed (thread exit): a string given back later (by a static
// object destroyed after the thread's thread_locals) is simply freed. Trivially destructible, so
// it stays readable until the thread ends.
thread_local bool tl_pool_gone = false;

struct Pool {
  std::array<std::string, kPooled> strings;
  size_t size = 0;
  ~Pool() { tl_pool_gone = true; }
};

Pool& ThreadPool() {
  thread_local Pool pool;
  return pool;
}

}  // namespace

std::string TakeString() {
  if (tl_pool_gone) return {};
  Pool& pool = ThreadPool();
  if (pool.size == 0) return {};
  return std::move(pool.strings[--pool.size]);
}

void GiveString(std::string&& text) {
  if (tl_pool_gone) return;
  Pool& pool = ThreadPool();
  if (pool.size == kPooled || text.capacity() > kMaxPooledCapacity ||
      text.capacity() <= std::string().capacity()) {
    return;
  }
  text.clear();
  pool.strings[pool.size++] = std::move(text);
}

}  // namespace flashsale::base
