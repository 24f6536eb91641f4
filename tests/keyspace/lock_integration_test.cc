// The distributed lock against a real redis-server (S0-5): tokens, compare-and-act release and
// extension, expiry, fencing of a stale holder's writes, and mutual exclusion among 16 contenders.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/use_awaitable.hpp>
#include <thread>

#include "base/random.h"
#include "keyspace/activity_fixture.h"
#include "keyspace/embedded_scripts.h"
#include "keyspace/lock.h"

namespace flashsale::keyspace {
namespace {

using namespace std::chrono_literals;
using testing::ActivityFixture;

class LockTest : public ActivityFixture {
 protected:
  DistributedLock Lock(const std::string& name) {
    return DistributedLock(*runner_, ns_ + ":{" + name + "}:lock", ns_ + ":{" + name + "}:fence");
  }
  std::optional<Lease> Acquire(DistributedLock& lock, std::chrono::milliseconds ttl = 10s) {
    auto lease = io_.Run(lock.TryAcquire(random_, ttl));
    if (!lease.ok()) throw std::runtime_error(lease.error().ToString());
    return *lease;
  }
  base::SeededRandom random_{7};
};

TEST_F(LockTest, OnlyTheHolderReleasesOrExtends) {
  DistributedLock lock = Lock("a");
  auto first = Acquire(lock);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(Acquire(lock).has_value());  // held

  Lease impostor = *first;
  impostor.token = "someone-else";
  EXPECT_FALSE(*io_.Run(lock.Release(impostor)));
  EXPECT_FALSE(*io_.Run(lock.Extend(impostor, 10s)));
  EXPECT_EQ(server_->Command({"GET", first->key})->str, first->token);  // still there

  EXPECT_TRUE(*io_.Run(lock.Extend(*first, 10s)));
  EXPECT_TRUE(*io_.Run(lock.Release(*first)));
  EXPECT_FALSE(*io_.Run(lock.Release(*first)));  // once
  auto second = Acquire(lock);
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(second->fence, first->fence);
}

TEST_F(LockTest, AHolderPausedPastItsLeaseLosesItAndItsLateWritesAreFenced) {
  // The lock of a fifo lottery's queue, and a draw by each holder with its fencing token.
  auto lottery = Activity("fifo", 0, 100);
  lottery.lottery = core::Lottery{.prizes = {{"p", "P", 1, 10}}};
  lottery.stock = 10;
  ASSERT_TRUE(SetUpActivity(lottery).ok());
  const ActivityKeys keys = Keys("fifo");
  DistributedLock lock(*runner_, keys.queue_lock(), keys.queue_fence());
  auto stale = Acquire(lock, 100ms);
  ASSERT_TRUE(stale.has_value());
  std::this_thread::sleep_for(300ms);  // "paused" (a GC, a stopped process) past the lease
  auto fresh = Acquire(lock, 10s);
  ASSERT_TRUE(fresh.has_value());
  EXPECT_GT(fresh->fence, stale->fence);

  // The stale holder wakes up: it cannot extend or release the new holder's lease ...
  EXPECT_FALSE(*io_.Run(lock.Extend(*stale, 10s)));
  EXPECT_FALSE(*io_.Run(lock.Release(*stale)));
  // ... and its draw is refused before anything is written.
  auto draw = [&](const std::string& order, int64_t fence) {
    const std::string user = "u-" + order;  // the request holds views: keep it alive
    DrawRequest request{.order_id = order, .user_id = user, .now_ms = 1500, .fence = fence};
    return io_.Run(scripts_->AsyncDraw("fifo", request, boost::asio::use_awaitable));
  };
  auto late = draw("late", stale->fence);
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(late.error().message.starts_with("FENCED")) << late.error().ToString();
  EXPECT_EQ(late.error().detail, base::ErrorDetail::kFenced) << late.error().ToString();
  EXPECT_EQ(Status("fifo").remaining, 10);
  EXPECT_EQ(server_->Integer({"HLEN", keys.buyers()}), 0);
  auto current = draw("current", fresh->fence);
  ASSERT_TRUE(current.ok()) << current.error().ToString();
  EXPECT_EQ(current->outcome, core::Outcome::kReserved);
}

TEST_F(LockTest, SixteenContendersNeverHoldTheLockAtOnce) {
  constexpr int kContenders = 16;
  constexpr int kRoundsEach = 25;
  std::atomic<int> holders = 0, most = 0, acquisitions = 0, overlaps = 0;
  std::vector<std::thread> threads;
  for (int c = 0; c < kContenders; ++c) {
    threads.emplace_back([&, c] {
      testing::IoThread io;
      auto connection = testing::Connect(io, server_->unix_url());
      redis::ScriptRunner runner(connection, Scripts());
      DistributedLock lock(runner, ns_ + ":{x}:lock", ns_ + ":{x}:fence");
      base::SeededRandom random(100 + c);
      int done = 0;
      const auto give_up = std::chrono::steady_clock::now() + 120s;
      while (done < kRoundsEach && std::chrono::steady_clock::now() < give_up) {
        auto lease = io.Run(lock.TryAcquire(random, 5s));
        if (!lease.ok() || !lease->has_value()) {
          std::this_thread::sleep_for(1ms);
          continue;
        }
        const int now_holding = ++holders;
        if (now_holding > 1) ++overlaps;
        int seen = most.load();
        while (now_holding > seen && !most.compare_exchange_weak(seen, now_holding)) {
        }
        ++acquisitions;
        std::this_thread::sleep_for(200us);  // the critical section
        --holders;
        auto released = io.Run(lock.Release(**lease));
        EXPECT_TRUE(released.ok() && *released);
        ++done;
      }
      testing::Stop(io, connection);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(acquisitions.load(), kContenders * kRoundsEach);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(most.load(), 1);
  // Every acquisition took a fencing token of its own.
  EXPECT_EQ(server_->Integer({"GET", ns_ + ":{x}:fence"}), kContenders * kRoundsEach);
}

}  // namespace
}  // namespace flashsale::keyspace
