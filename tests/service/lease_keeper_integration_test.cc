// LeaseKeeper on a real redis-server: a short lease stays held while the run works, runs out
// after the run stops (so a holder that died blocks the next one for one lease at most), and a
// lease taken over by another holder is reported lost.

#include <gtest/gtest.h>

#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "base/random.h"
#include "keyspace/embedded_scripts.h"
#include "keyspace/lock.h"
#include "redis/scripts.h"
#include "service/lease_keeper.h"
#include "support/io_thread.h"
#include "support/redis_helpers.h"
#include "support/redis_server.h"
#include "support/wait.h"

namespace flashsale::service {
namespace {

namespace asio = boost::asio;
using testing::Eventually;
using testing::IoThread;
using testing::RedisServer;
using namespace std::chrono_literals;

class LeaseKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    connection_ = testing::Connect(io_, redis_.unix_url());
    runner_ = std::make_unique<redis::ScriptRunner>(connection_, keyspace::Scripts());
    const std::string ns = testing::UniqueNamespace();
    lock_key_ = ns + ":{lease}:lock";
    lock_ = std::make_shared<keyspace::DistributedLock>(*runner_, lock_key_, ns + ":{lease}:fence");
  }
  void TearDown() override {
    if (keeper_) io_.Call([&] { keeper_->Stop(); });
    testing::Stop(io_, connection_);
  }

  // Takes the lock for `ttl` and starts a keeper extending it to `ttl` every `every`.
  void TakeAndKeep(std::chrono::milliseconds ttl, std::chrono::milliseconds every) {
    auto taken = io_.Run(Take(ttl));
    ASSERT_TRUE(taken.ok()) << taken.error().ToString();
    ASSERT_TRUE(taken->has_value());
    lease_ = **taken;
    keeper_ =
        io_.Call([&] { return LeaseKeeper::Start(io_.executor(), lock_, lease_, ttl, every); });
  }
  asio::awaitable<base::Result<std::optional<keyspace::Lease>>> Take(
      std::chrono::milliseconds ttl) {
    co_return co_await lock_->TryAcquire(random_, ttl);
  }
  bool Lost() {
    return io_.Call([&] { return keeper_->lost(); });
  }
  std::string Holder() { return redis_.String({"GET", lock_key_}); }

  RedisServer redis_;
  IoThread io_;
  base::SeededRandom random_{5};
  std::shared_ptr<redis::Connection> connection_;
  std::unique_ptr<redis::ScriptRunner> runner_;
  std::string lock_key_;
  std::shared_ptr<keyspace::DistributedLock> lock_;
  keyspace::Lease lease_;
  std::shared_ptr<LeaseKeeper> keeper_;
};

TEST_F(LeaseKeeperTest, AShortLeaseIsHeldWhileTheRunWorksAndRunsOutAfterItStops) {
  // A 4 s lease extended every 100 ms: after 6 s only the extensions can have kept it.
  TakeAndKeep(4s, 100ms);
  std::this_thread::sleep_for(6s);
  EXPECT_FALSE(Lost());
  EXPECT_EQ(Holder(), lease_.token) << "the lease ran out while it was being kept";
  const int64_t ttl_ms = redis_.Integer({"PTTL", lock_key_});
  EXPECT_GT(ttl_ms, 0);
  EXPECT_LE(ttl_ms, 4000);

  // The run stops without releasing (as a process that died): the lease runs out by itself.
  io_.Call([&] { keeper_->Stop(); });
  EXPECT_TRUE(Eventually(
      [&] {
        return redis_.Integer({"EXISTS", lock_key_}) == 0;
      },
      20s))
      << "a stopped keeper still extends the lease";
  auto next = io_.Run(Take(3s));
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->has_value()) << "the next holder could not take the lock";
}

TEST_F(LeaseKeeperTest, ALeaseTakenOverByAnotherHolderIsReportedLost) {
  TakeAndKeep(10s, 100ms);
  EXPECT_FALSE(Lost());
  // Another holder has the lock now (the lease ran out and it was taken meanwhile).
  ASSERT_EQ(redis_.String({"SET", lock_key_, "another-holder", "PX", "60000"}), "OK");
  EXPECT_TRUE(Eventually([&] { return Lost(); }, 20s)) << "the keeper did not notice";
  EXPECT_EQ(Holder(), "another-holder") << "the keeper extended or removed another's lease";
}

}  // namespace
}  // namespace flashsale::service
