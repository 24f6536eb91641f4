// redis::ReplicaWait against a real primary and replica: the confirmations asked for by replies
// read together share one WAIT, each is answered with the replicas that acknowledged, and a
// replica that does not answer gives 0 after the timeout (counted as unconfirmed).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redis/replica_wait.h"
#include "support/redis_helpers.h"
#include "support/redis_server.h"

namespace flashsale::redis {
namespace {

using namespace std::chrono_literals;
using testing::IoThread;
using testing::RedisServer;
using testing::RedisServerOptions;

bool ReplicaLinked(RedisServer& replica) {
  for (int i = 0; i < 1500; ++i) {
    if (replica.String({"INFO", "replication"}).find("master_link_status:up") !=
        std::string::npos) {
      return true;
    }
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

class ReplicaWaitTest : public ::testing::Test {
 protected:
  // No 5 s wait before the replica's first sync.
  RedisServer primary_{RedisServerOptions{.extra_args = {"--repl-diskless-sync-delay", "0"}}};
  RedisServer replica_{RedisServerOptions{
      .extra_args = {"--replicaof", "127.0.0.1", std::to_string(primary_.port())}}};
};

TEST_F(ReplicaWaitTest, RepliesReadTogetherShareOneWaitAndAreConfirmed) {
  ASSERT_TRUE(ReplicaLinked(replica_));
  IoThread io;
  auto connection = testing::Connect(io, primary_.tcp_url());
  auto wait = std::make_unique<ReplicaWait>(*connection, 1, 2000ms);
  constexpr int kWrites = 64;
  std::atomic<int> confirmed{0};
  std::atomic<int> answered{0};
  io.Call([&] {
    for (int i = 0; i < kWrites; ++i) {
      const std::string key = "k" + std::to_string(i);
      const Command set{"SET", key, "v"};
      connection->AsyncSend(set, [&](base::Result<Reply> reply) {
        if (!reply.ok()) {
          ++answered;
          return;
        }
        wait->AsyncConfirm([&](base::Result<int64_t> acked) {
          if (acked.ok() && *acked >= 1) ++confirmed;
          ++answered;
        });
      });
    }
    return 0;
  });
  for (int i = 0; i < 1500 && answered < kWrites; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(answered.load(), kWrites);
  EXPECT_EQ(confirmed.load(), kWrites);
  const uint64_t waits = io.Call([&] { return wait->waits_sent(); });
  EXPECT_GE(waits, 1u);
  EXPECT_LT(waits, static_cast<uint64_t>(kWrites)) << "one WAIT per reply: nothing batched";
  EXPECT_EQ(io.Call([&] { return wait->unconfirmed(); }), 0u);
  // The replica has every write the WAITs confirmed.
  EXPECT_EQ(replica_.Integer({"DBSIZE"}), kWrites);
  testing::Stop(io, connection);
  io.Call([&] {
    wait.reset();
    return 0;
  });
}

TEST_F(ReplicaWaitTest, AReplicaThatDoesNotAnswerGivesZeroAfterTheTimeout) {
  ASSERT_TRUE(ReplicaLinked(replica_));
  IoThread io;
  auto connection = testing::Connect(io, primary_.tcp_url());
  ReplicaWait wait(*connection, 1, 200ms);
  ASSERT_TRUE(testing::Exec(io, *connection, {"SET", "before", "pause"}, 5s).ok());
  replica_.Pause();
  ASSERT_TRUE(testing::Exec(io, *connection, {"SET", "during", "pause"}, 5s).ok());
  auto acked = io.Run(wait.AsyncConfirm(boost::asio::use_awaitable));
  replica_.Resume();
  ASSERT_TRUE(acked.ok()) << acked.error().ToString();
  EXPECT_EQ(*acked, 0);
  EXPECT_EQ(io.Call([&] { return wait.unconfirmed(); }), 1u);
  testing::Stop(io, connection);
}

}  // namespace
}  // namespace flashsale::redis
