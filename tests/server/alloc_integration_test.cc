// Heap allocations of the hot request path, counted: this executable replaces the global
// operator new/delete with counting versions, runs the whole HTTP server in-process against a
// real redis-server (tests/server/server_fixture.h: no order consumer runs there), warms up on
// keep-alive connections, then counts what the server's threads allocate over the next requests
// of each kind: reserving purchases (huge stock, random users), lottery draws and sold-out
// purchases answered locally. The client is this test's thread, whose allocations are not counted.
//
// With FLASHSALE_ALLOC_TRACE=1 every counted allocation's call stack is kept, and the most
// frequent stacks are printed (symbolise them with addr2line or gdb): the way to find the sites.

#include <execinfo.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "server/server_fixture.h"

// glibc's own allocator, under the names it exports beside malloc.
extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t align, size_t size);
void __libc_free(void* p);
}

namespace {

std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};
thread_local bool tl_uncounted = false;  // the client's thread
thread_local bool tl_in_trace = false;   // inside backtrace(): its own allocations pass
bool g_trace = false;

// Call stacks of counted allocations, in a fixed table (recording must not allocate).
constexpr int kDepth = 14;
constexpr size_t kStacks = 4096;
struct Stack {
  std::atomic<uint64_t> hash{0};
  std::array<void*, kDepth> frames{};
  int depth = 0;
  size_t size = 0;  // of the first allocation seen there
  std::atomic<uint64_t> count{0};
};
Stack g_stacks[kStacks];

void Record(size_t size) {
  if (tl_in_trace) return;
  tl_in_trace = true;
  void* frames[kDepth + 2];
  const int depth = ::backtrace(frames, kDepth + 2);
  uint64_t hash = 1469598103934665603ull;
  for (int i = 2; i < depth; ++i)
    hash = (hash ^ reinterpret_cast<uintptr_t>(frames[i])) * 1099511628211ull;
  if (hash == 0) hash = 1;
  for (size_t probe = 0; probe < kStacks; ++probe) {
    Stack& slot = g_stacks[(hash + probe) % kStacks];
    uint64_t expected = 0;
    if (slot.hash.load() == hash || slot.hash.compare_exchange_strong(expected, hash) ||
        expected == hash) {
      if (slot.depth == 0) {
        slot.size = size;
        slot.depth = std::max(0, depth - 2);
        for (int i = 2; i < depth; ++i) slot.frames[i - 2] = frames[i];
      }
      slot.count.fetch_add(1);
      break;
    }
  }
  tl_in_trace = false;
}

void Count(size_t size) {
  if (g_counting.load(std::memory_order_relaxed) && !tl_uncounted && !tl_in_trace) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (g_trace) Record(size);
  }
}

void* Allocate(size_t size, size_t align) {
  Count(size);
  if (size == 0) size = 1;
  if (align <= alignof(std::max_align_t)) return __libc_malloc(size);
  return __libc_memalign(align, size);
}

}  // namespace

void* operator new(size_t size) {
  void* p = Allocate(size, 0);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t size) {
  void* p = Allocate(size, 0);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(size_t size, std::align_val_t align) {
  void* p = Allocate(size, static_cast<size_t>(align));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t size, std::align_val_t align) {
  void* p = Allocate(size, static_cast<size_t>(align));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(size_t size, const std::nothrow_t&) noexcept { return Allocate(size, 0); }
void* operator new[](size_t size, const std::nothrow_t&) noexcept { return Allocate(size, 0); }
void* operator new(size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return Allocate(size, static_cast<size_t>(align));
}
void* operator new[](size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return Allocate(size, static_cast<size_t>(align));
}
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  __libc_free(p);
}

// The C allocator too (hiredis and other C libraries allocate with malloc): an executable's
// definitions take the place of libc's for every library in the process.
extern "C" {
void* malloc(size_t size) {
  Count(size);
  return __libc_malloc(size);
}
void* calloc(size_t count, size_t size) {
  Count(count * size);
  return __libc_calloc(count, size);
}
void* realloc(void* p, size_t size) {
  Count(size);
  return __libc_realloc(p, size);
}
void* aligned_alloc(size_t align, size_t size) {
  Count(size);
  return __libc_memalign(align, size);
}
void* memalign(size_t align, size_t size) {
  Count(size);
  return __libc_memalign(align, size);
}
int posix_memalign(void** out, size_t align, size_t size) {
  Count(size);
  *out = __libc_memalign(align, size);
  return *out == nullptr ? ENOMEM : 0;
}
void free(void* p) { __libc_free(p); }
}

namespace flashsale::server {
namespace {

using testing::RedisServer;
using testing::ServerFixture;

// A keep-alive connection speaking raw HTTP/1.1 (no allocation per request on the client side
// either, though the client's thread is not counted anyway).
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    const int one = 1;
    if (fd_ >= 0) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    timeval timeout{10, 0};
    if (fd_ >= 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

  // Sends the request, reads one response; the status code (0: none) and the body in `body`.
  int Exchange(std::string_view request, std::string& body) {
    for (size_t sent = 0; sent < request.size();) {
      const ssize_t n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return 0;
      sent += static_cast<size_t>(n);
    }
    size_t have = 0;
    for (;;) {
      const std::string_view got(buffer_.data(), have);
      const size_t head_end = got.find("\r\n\r\n");
      if (head_end != std::string_view::npos) {
        const std::string_view key = "Content-Length: ";
        const size_t at = got.find(key);
        if (at == std::string_view::npos || at > head_end) return 0;
        size_t length = 0;
        std::from_chars(got.data() + at + key.size(), got.data() + head_end, length);
        if (have >= head_end + 4 + length) {
          int status = 0;
          std::from_chars(got.data() + 9, got.data() + 12, status);
          body.assign(got.substr(head_end + 4, length));
          if (have != head_end + 4 + length) return 0;  // nothing pipelined: no leftovers
          return status;
        }
      }
      if (have == buffer_.size()) return 0;
      const ssize_t n = ::recv(fd_, buffer_.data() + have, buffer_.size() - have, 0);
      if (n <= 0) return 0;
      have += static_cast<size_t>(n);
    }
  }

 private:
  int fd_ = -1;
  std::array<char, 16384> buffer_{};
};

std::string PostRequest(std::string_view target, std::string_view user) {
  std::string request = "POST ";
  request += target;
  request += " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-User-Id: ";
  request += user;
  request += "\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n";
  return request;
}

void PrintStacks() {
  std::vector<Stack*> used;
  for (auto& stack : g_stacks) {
    if (stack.count.load() > 0) used.push_back(&stack);
  }
  std::sort(used.begin(), used.end(),
            [](Stack* a, Stack* b) { return a->count.load() > b->count.load(); });
  for (size_t i = 0; i < used.size() && i < 120; ++i) {
    std::fprintf(stderr, "== %lu allocations (the first of %zu bytes) at:\n",
                 static_cast<unsigned long>(used[i]->count.load()), used[i]->size);
    ::backtrace_symbols_fd(used[i]->frames.data(), used[i]->depth, 2);
  }
}

class AllocTest : public ::testing::Test {
 protected:
  static constexpr int kConnections = 4;
  static constexpr int kWarmUp = 400;
  static constexpr int kMeasured = 400;

  static void SetUpTestSuite() {
    tl_uncounted = true;
    g_trace = std::getenv("FLASHSALE_ALLOC_TRACE") != nullptr;
    if (g_trace) {
      void* frames[4];
      ::backtrace(frames, 4);  // loads the unwinder before anything is counted
    }
    redis_ = new RedisServer();
  }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }
  void SetUp() override {
    testing::ServerFixtureOptions options;
    options.threads = 1;
    // The registry's poll reloads every activity from the store when the registry version has
    // moved; creating the activity moves it (and reloads on the admin's thread itself), so the
    // next poll reloads once more: about 190 allocations (SQLite's statements on the database
    // thread, the new snapshot) that fell into the counted window whenever the poll came late
    // (a loaded machine). Work of the server's own, not of a request: here the poll runs once, at
    // start, and not again while the test runs.
    options.server.registry_poll = std::chrono::hours(1);
    // Likewise the write of the report's answer counts (the map and rows it builds on the first
    // I/O thread); counting an answer itself allocates only for an activity's first.
    options.server.answers_every = std::chrono::hours(1);
    server_ = std::make_unique<ServerFixture>(*redis_, options);
  }

  void Create(const std::string& body) {
    auto created = server_->Client().Post("/api/v1/admin/activities", body, server_->Admin());
    ASSERT_EQ(created.status, 201) << created.body;
  }

  // Allocations per request of `count` requests built by `request_for(i)` on kConnections
  // keep-alive connections, after kWarmUp of them; each reply's status must be `status`.
  double Measure(const std::function<std::string(int)>& request_for, int status,
                 std::string_view expect_in_body, const char* name) {
    std::vector<std::unique_ptr<RawConnection>> connections;
    for (int i = 0; i < kConnections; ++i) {
      connections.push_back(std::make_unique<RawConnection>(server_->port()));
      EXPECT_TRUE(connections.back()->ok());
    }
    std::vector<std::string> requests;
    for (int i = 0; i < kWarmUp + kMeasured; ++i) requests.push_back(request_for(i));
    std::string body;
    body.reserve(4096);
    uint64_t before = 0;
    for (int i = 0; i < kWarmUp + kMeasured; ++i) {
      if (i == kWarmUp) {
        before = g_allocations.load();
        g_counting = true;
      }
      const int got = connections[i % kConnections]->Exchange(requests[i], body);
      EXPECT_EQ(got, status) << name << " request " << i << ": " << body;
      EXPECT_NE(body.find(expect_in_body), std::string::npos) << body;
      if (got != status) break;
    }
    g_counting = false;
    const uint64_t counted = g_allocations.load() - before;
    const double per_request = static_cast<double>(counted) / kMeasured;
    std::fprintf(stderr, "%s: %lu allocations over %d requests: %.2f per request\n", name,
                 static_cast<unsigned long>(counted), kMeasured, per_request);
    if (g_trace) PrintStacks();
    return per_request;
  }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
};
RedisServer* AllocTest::redis_ = nullptr;

// Every kind of request allocates nothing in steady state: 0 allocations over the 400 counted
// requests of each kind in the dev (debug) build on a quiet machine. With a release build
// compiling beside it, runs counted 0 to 5 allocations over the 400 reserves or draws (0 for
// sold-out purchases, which never reach Redis): traced to the Redis connection's async_send
// write op (256 bytes, Asio's hook_allocator) missing the recycling cache now and then, and once
// a 320-byte block not symbolised; left for now. The release build, nothing else running: 0 to 3
// over the 400 reserves or draws in five runs, every one that write op (Connection::StartWrite). So
// the reserve and draw bounds leave 0.05 per request (20 over the 400), the sold-out one 0: one
// allocation per request coming back, or one in ten, fails the test. What made it so, with what
// each site cost before (debug build, FLASHSALE_ALLOC_TRACE=1: reserve 1.56 per request, 1.08 of
// them the request's own and the rest the stray reload below; draw 3.62; sold out 0):
//   - the reply's order id (26 characters, longer than a short string) goes into
//     Reservation/DrawResult::order_id in a string from the thread's pool
//     (src/keyspace/activity_scripts.cc), and the purchase or draw result that ends up owning it
//     gives it back (service/purchase.h, service/draw.h): was 1 per reserve and per draw;
//   - coroutine frames fit Asio's recycling cache, which never keeps a frame over 1020 bytes and
//     evicts a cached one each time it allocates such a frame: DrawNow (src/service/draw.cc) was
//     1248 bytes in debug, its reply now built in a plain function and ConfirmTaken filling the
//     result in place (service/admission.h); ConfirmDurable's WAIT is a coroutine of its own,
//     made only when replicas are awaited (service/context.cc). Was 1 per draw for DrawNow, 1 per
//     draw for the coalescer's AsyncSubmit initiation frame and about 0.5 per draw for
//     ConfirmDurable (both evicted by DrawNow's);
//   - the Redis connection's in-flight queue is a ring (base/ring_queue.h), not a deque that
//     allocated a node as it slid: was about 0.09 per request.
// The coalescer (src/base/coalescer.h: per-lane queue and batch slots, replies filled in
// place, one posted completion per call) and the batch binding (src/keyspace/activity_scripts.cc:
// arguments in reused strings, results in the coalescer's slot, its handlers from Asio's recycling
// cache) allocate nothing in steady state either. The stray allocations a loaded machine used to
// add (about 190 over 400 requests of any kind) were the registry poll's reload after the test
// created its activity (SQLite's statements on the database thread, the new snapshot): see SetUp,
// where the poll is kept out of the window.
constexpr double kReserveBound = 0.05;
constexpr double kDrawBound = 0.05;
constexpr double kSoldOutBound = 0;

TEST_F(AllocTest, ReservingPurchase) {
  Create(R"({"id":"huge","stock":100000000,"per_user_limit":1})");
  std::mt19937_64 random(7);
  const double per_request = Measure(
      [&](int) {
        return PostRequest("/api/v1/activities/huge/purchase",
                           "u" + std::to_string(random() % 1000000000000ull));
      },
      200, "\"reserved\"", "reserve");
  EXPECT_LE(per_request, kReserveBound);
}

TEST_F(AllocTest, LotteryDraw) {
  Create(R"({"id":"luck","kind":"lottery","per_user_limit":1,"no_prize_weight":1,
             "prizes":[{"id":"gold","name":"A gold coin","weight":1,"stock":100000000}]})");
  std::mt19937_64 random(8);
  const double per_request = Measure(
      [&](int) {
        return PostRequest("/api/v1/activities/luck/draw",
                           "u" + std::to_string(random() % 1000000000000ull));
      },
      200, "\"order_id\"", "draw");
  EXPECT_LE(per_request, kDrawBound);
}

TEST_F(AllocTest, SoldOutAnsweredLocally) {
  Create(R"({"id":"gone","stock":1,"per_user_limit":1})");
  std::string body;
  {
    RawConnection first(server_->port());
    ASSERT_EQ(first.Exchange(PostRequest("/api/v1/activities/gone/purchase", "first"), body), 200)
        << body;
    // The first refusal comes from Redis and marks the activity sold out on this thread.
    ASSERT_EQ(first.Exchange(PostRequest("/api/v1/activities/gone/purchase", "second"), body), 200)
        << body;
  }
  std::mt19937_64 random(9);
  const double per_request = Measure(
      [&](int) {
        return PostRequest("/api/v1/activities/gone/purchase",
                           "u" + std::to_string(random() % 1000000000000ull));
      },
      200, "\"sold_out\"", "sold-out");
  EXPECT_LE(per_request, kSoldOutBound);
}

}  // namespace
}  // namespace flashsale::server
