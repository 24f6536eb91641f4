// The freeze after a Redis event, in-process on a real redis-server and SQLite file (issue "Lost
// writes caught from the data", points 1 to 3):
//   - nothing admitted before an event is sent after it: a batch held in the coalescer while
//     another connection meets another server is answered 503, never sent;
//   - a repair is bound to what it read: a second server seen while a repair runs is not
//     confirmed by it;
//   - a per-activity freeze from the write sequence freezes that activity only, and its repair
//     thaws it with the orders Redis lost applied again.
// Orders come from the test's own calls; every wait is bounded; no timing is asserted.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "keyspace/activity_scripts.h"
#include "keyspace/service_state.h"
#include "service/admin.h"
#include "service/purchase.h"
#include "service/redis_repair.h"
#include "service/redis_watch.h"
#include "support/redis_helpers.h"
#include "support/service_fixture.h"
#include "support/wait.h"

namespace flashsale::service {
namespace {

namespace asio = boost::asio;
using core::Outcome;
using testing::Eventually;
using namespace std::chrono_literals;

class FreezeTest : public testing::ServiceFixture<> {
 protected:
  void SetUp() override {
    settings_.redis_watch = &watch_;
    settings_.sold_out_ttl_ms = 0;
    redis::ConnectionOptions options;
    options.command_timeout = 30s;  // the tests pause redis-server while a call waits
    ASSERT_NO_FATAL_FAILURE(StartService({}, options));
  }
  void TearDown() override {
    redis_->Resume();  // whatever happened, the next test finds it running
    ServiceFixture::TearDown();
  }

  void Create(const std::string& id, int64_t stock) {
    core::Activity activity;
    activity.id = id;
    activity.start_ms = 0;
    activity.end_ms = clock_.NowMs() + 3'600'000;
    activity.per_user_limit = 1;
    activity.stock = stock;
    auto created = io_.Run(CreateActivity(*context_, activity));
    ASSERT_TRUE(created.ok()) << created.error().ToString();
  }
  // The first server of the process: its startup repair, so the sale opens.
  void Open() {
    watch_.OnServer(kNode, "r1");
    auto resolved = io_.Run(ResolveRedisEvent(*context_, watch_, true));
    ASSERT_TRUE(resolved.ok()) << resolved.error().ToString();
    ASSERT_TRUE(*resolved);
  }
  asio::awaitable<base::Result<PurchaseResult>> BuyAsync(std::string activity, std::string user) {
    PurchaseRequest request;
    request.activity_id = activity;
    request.user_id = user;
    co_return co_await Purchase(*context_, request);
  }
  base::Result<PurchaseResult> Buy(const std::string& activity, const std::string& user) {
    return io_.Run(BuyAsync(activity, user));
  }
  int64_t Commands() const { return connection_->stats().commands.value(); }
  // Starts `coroutine` on the I/O thread; the future holds its result.
  template <typename T>
  std::future<std::optional<T>> Spawn(asio::awaitable<T> coroutine) {
    auto wrapped = [](asio::awaitable<T> inner) -> asio::awaitable<std::optional<T>> {
      co_return co_await std::move(inner);
    };
    return asio::co_spawn(io_.context(), wrapped(std::move(coroutine)), asio::use_future);
  }

  void RunVoid(asio::awaitable<void> coroutine) {
    auto wrapped = [](asio::awaitable<void> inner) -> asio::awaitable<bool> {
      co_await std::move(inner);
      co_return true;
    };
    ASSERT_TRUE(io_.Run(wrapped(std::move(coroutine))));
  }

  static constexpr std::string_view kNode = "the-server";
  RedisWatch watch_{clock_};
};

// A purchase waits in the coalescer behind a call in flight (Redis paused, so the first call
// cannot complete); meanwhile another connection of the process meets another server (its
// handshake reports another run_id) while this connection's link stays up, so no handshake of its
// own would stop the batch. When the first call completes, the waiting batch is not sent: 503.
// (Before the freeze was checked at send time, it was sent and sold a unit on the server not yet
// repaired.)
TEST_F(FreezeTest, ABatchHeldInTheCoalescerAcrossAnEventIsNeverSent) {
  Create("held", 10);
  Open();
  ASSERT_EQ(Buy("held", "warm")->outcome, Outcome::kReserved);
  const keyspace::ActivityKeys keys(settings_.key_namespace, "held");
  const int64_t before = Commands();
  redis_->Pause();
  auto first = Spawn(BuyAsync("held", "u1"));
  ASSERT_TRUE(Eventually([&] { return Commands() > before; }, 10s)) << "the first call is sent";
  auto second = Spawn(BuyAsync("held", "u2"));
  // The second waits in the coalescer (a call of the activity is in flight): nothing more sent.
  ASSERT_FALSE(Eventually([&] { return Commands() > before + 1; }, 300ms));
  watch_.OnServer(kNode, "r2");  // another connection met another server
  redis_->Resume();
  ASSERT_EQ(first.wait_for(30s), std::future_status::ready);
  ASSERT_EQ(second.wait_for(30s), std::future_status::ready);
  auto held = *second.get();
  ASSERT_FALSE(held.ok()) << "sent after the event: " << StatusWord(held->outcome);
  EXPECT_EQ(held.error().code, base::ErrorCode::kUnavailable);
  EXPECT_EQ(held.error().detail, base::ErrorDetail::kFrozen);
  EXPECT_EQ(held.error().message, kFrozenMessage);
  EXPECT_EQ(redis_->Integer({"HEXISTS", keys.buyers(), "u2"}), 0) << "u2's unit was sold";
  // The first call was in flight before the event: it ran (its outcome stands, whatever it is).
  auto ran = *first.get();
  ASSERT_TRUE(ran.ok()) << ran.error().ToString();
  EXPECT_EQ(ran->outcome, Outcome::kReserved);
}

// A repair bound to what it read: the repair of r2 reads the servers pending, then (Redis paused
// under it) another server, r3, is met. The repair finishes; it must not confirm r3, nor leave a
// marker that confirms r3 to another instance: r3 is repaired on its own.
TEST_F(FreezeTest, AServerMetWhileARepairRunsIsNotConfirmedByIt) {
  Create("bound", 10);
  Open();
  watch_.OnServer(kNode, "r2");
  ASSERT_TRUE(watch_.frozen());
  const int64_t before = Commands();
  redis_->Pause();
  auto repair = Spawn(ResolveRedisEvent(*context_, watch_, true));
  // The repair has read what it repairs (the pending servers, before its first command).
  ASSERT_TRUE(Eventually([&] { return Commands() > before; }, 10s));
  watch_.OnServer(kNode, "r3");
  redis_->Resume();
  ASSERT_EQ(repair.wait_for(60s), std::future_status::ready);
  auto repaired = *repair.get();
  ASSERT_TRUE(repaired.ok()) << repaired.error().ToString();
  EXPECT_FALSE(*repaired) << "confirmed with a server it never repaired";
  EXPECT_TRUE(watch_.frozen());
  EXPECT_TRUE(watch_.NodeFrozen(kNode));
  keyspace::ServiceState state(*connection_, settings_.key_namespace);
  auto marker = io_.Run(state.ReadRepairMarker("r3"));
  ASSERT_TRUE(marker.ok());
  EXPECT_FALSE(marker->has_value()) << "a marker for r3, which was not repaired";
  // Another instance that only reads markers is not confirmed either.
  auto looked = io_.Run(ResolveRedisEvent(*context_, watch_, false));
  ASSERT_TRUE(looked.ok());
  EXPECT_FALSE(*looked);
  EXPECT_EQ(Buy("bound", "u1").error().message, kFrozenMessage);
  // r3's own repair.
  auto again = io_.Run(ResolveRedisEvent(*context_, watch_, true));
  ASSERT_TRUE(again.ok()) << again.error().ToString();
  EXPECT_TRUE(*again);
  EXPECT_FALSE(watch_.frozen());
  EXPECT_EQ(Buy("bound", "u1")->outcome, Outcome::kReserved);
}

// Redis loses the last writes of one activity (its keys restored from a DUMP taken earlier,
// while the same server runs): the next purchase finds its sequence behind what was acknowledged,
// is refused before anything is written, and only that activity freezes; its repair applies
// again the order the record holds, re-bases the sequence, and it sells again.
TEST_F(FreezeTest, ASequenceBehindFreezesThatActivityOnlyUntilItsRepair) {
  Create("lost", 10);
  Create("other", 10);
  Open();
  ASSERT_EQ(Buy("lost", "u1")->outcome, Outcome::kReserved);
  const keyspace::ActivityKeys keys(settings_.key_namespace, "lost");
  // What Redis would have come back with: every key of the activity as it is now.
  std::vector<std::pair<std::string, std::string>> dumped;
  for (const std::string& key : {keys.meta(), keys.stock(), keys.buyers(), keys.orders()}) {
    auto dump = redis_->Command({"DUMP", key});
    ASSERT_EQ(dump->type, REDIS_REPLY_STRING) << key;
    dumped.emplace_back(key, std::string(dump->str, dump->len));
  }
  auto second = Buy("lost", "u2");
  ASSERT_EQ(second->outcome, Outcome::kReserved);
  // u2's order reaches the record (as the pipeline would persist it).
  store::OrderRecord order;
  order.order_id = second->order_id;
  order.activity_id = "lost";
  order.user_id = "u2";
  order.created_ms = clock_.NowMs();
  order.single_unit = true;
  order.stream_id = "1-0";
  ASSERT_TRUE(
      store_->InsertOrders(std::vector<store::OrderRecord>{order}, clock_.NowMs(), std::nullopt)
          .ok());
  // The writes since the dump are lost.
  for (const auto& [key, value] : dumped) {
    ASSERT_EQ(redis_->String({"RESTORE", key, "0", value, "REPLACE"}), "OK") << key;
  }
  ASSERT_EQ(redis_->String({"GET", keys.stock()}), "9");

  auto refused = Buy("lost", "u3");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, kFrozenMessage);
  EXPECT_EQ(refused.error().detail, base::ErrorDetail::kFrozen);
  EXPECT_EQ(redis_->String({"GET", keys.stock()}), "9") << "sold while behind";
  EXPECT_TRUE(context_->Frozen("lost"));
  EXPECT_FALSE(context_->Frozen("other"));
  EXPECT_EQ(Buy("other", "u3")->outcome, Outcome::kReserved) << "another activity stopped too";
  EXPECT_EQ(Buy("lost", "u4").error().message, kFrozenMessage) << "refused at the gate";
  const auto frozen = watch_.activities().Frozen();
  ASSERT_EQ(frozen.size(), 1u);
  EXPECT_EQ(frozen[0].reason, FreezeReason::kBehind);
  EXPECT_EQ(frozen[0].floor, (core::WriteSeq{1, 2})) << "epoch 1: the startup repair's";
  EXPECT_EQ(frozen[0].redis_holds, (core::WriteSeq{1, 1}));
  EXPECT_EQ(frozen[0].refused, 2);

  // An instance that does not repair waits; the one that does repairs it.
  RunVoid(ResolveFrozenActivities(*context_, watch_, false));
  EXPECT_TRUE(context_->Frozen("lost"));
  RunVoid(ResolveFrozenActivities(*context_, watch_, true));
  EXPECT_FALSE(context_->Frozen("lost"));
  EXPECT_EQ(redis_->String({"GET", keys.stock()}), "8") << "u2's order not applied again";
  auto status = io_.Run(context_->activity_scripts().AsyncStatus("lost", asio::use_awaitable));
  ASSERT_TRUE(status.ok());
  EXPECT_GT(status->written.epoch, 0) << "not re-based";
  EXPECT_EQ(Buy("lost", "u2")->outcome, Outcome::kLimitReached) << "u2 bought twice";
  EXPECT_EQ(Buy("lost", "u3")->outcome, Outcome::kReserved);
  const auto history = watch_.activities().History();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].orders_applied, 1);
}

// A process that starts after Redis lost writes (the same server: its marker confirms it) has
// sold nothing and seen no reply, but the record's write mark (what the pipeline persisted) is its
// floor before it can sell: its first purchase is refused, not sold on the Redis that lost them.
TEST_F(FreezeTest, AProcessThatSawNoReplyStartsFromTheRecordsMark) {
  Create("fresh", 10);
  Open();
  ASSERT_EQ(Buy("fresh", "u1")->outcome, Outcome::kReserved);
  const keyspace::ActivityKeys keys(settings_.key_namespace, "fresh");
  std::vector<std::pair<std::string, std::string>> dumped;
  for (const std::string& key : {keys.meta(), keys.stock(), keys.buyers(), keys.orders()}) {
    auto dump = redis_->Command({"DUMP", key});
    dumped.emplace_back(key, std::string(dump->str, dump->len));
  }
  auto second = Buy("fresh", "u2");
  ASSERT_EQ(second->outcome, Outcome::kReserved);
  // Persisted with the sequence of the call that reserved it (the pipeline carries it).
  store::OrderRecord order;
  order.order_id = second->order_id;
  order.activity_id = "fresh";
  order.user_id = "u2";
  order.created_ms = clock_.NowMs();
  order.single_unit = true;
  order.stream_id = "1-0";
  order.written = {1, 2};
  ASSERT_TRUE(
      store_->InsertOrders(std::vector<store::OrderRecord>{order}, clock_.NowMs(), std::nullopt)
          .ok());
  for (const auto& [key, value] : dumped) {
    ASSERT_EQ(redis_->String({"RESTORE", key, "0", value, "REPLACE"}), "OK") << key;
  }

  // Another process: its own watch, no reply seen.
  RedisWatch fresh_watch(clock_);
  ServiceSettings fresh_settings = settings_;
  fresh_settings.redis_watch = &fresh_watch;
  ActivityRegistry fresh_registry;
  ServiceContext fresh(fresh_settings, *runner_, *store_, db_.get_executor(), fresh_registry,
                       clock_, random_);
  fresh_watch.OnServer(kNode, "r1");
  auto confirmed = io_.Run(ResolveRedisEvent(fresh, fresh_watch, false));
  ASSERT_TRUE(confirmed.ok() && *confirmed) << "the marker of r1 confirms it";
  ASSERT_TRUE(io_.Run(ReloadRegistry(fresh)).ok());
  EXPECT_EQ(fresh_watch.activities().Of("fresh").floor(), (core::WriteSeq{1, 2}));
  const auto buy = [&](std::string user) -> asio::awaitable<base::Result<PurchaseResult>> {
    PurchaseRequest request;
    request.activity_id = "fresh";
    request.user_id = user;
    co_return co_await Purchase(fresh, request);
  };
  auto refused = io_.Run(buy("u3"));
  ASSERT_FALSE(refused.ok()) << "sold on a Redis that lost a persisted order";
  EXPECT_EQ(refused.error().message, kFrozenMessage);
  EXPECT_EQ(redis_->String({"GET", keys.stock()}), "9");
}

// An order acknowledged by this instance and lost with a trace left in Redis (its idempotency
// record survives, its order record does not) is counted once: by the repair, which found the
// trace, and not again by the instance's own check of what it acknowledged.
TEST_F(FreezeTest, AnAcknowledgedOrderLostWithATraceIsCountedOnce) {
  Create("traced", 10);
  Open();
  const keyspace::ActivityKeys keys(settings_.key_namespace, "traced");
  // Before the purchase: buyers and orders do not exist yet (a DUMP of nothing: gone again).
  std::vector<std::pair<std::string, std::string>> dumped;
  for (const std::string& key : {keys.meta(), keys.stock()}) {
    auto dump = redis_->Command({"DUMP", key});
    ASSERT_EQ(dump->type, REDIS_REPLY_STRING) << key;
    dumped.emplace_back(key, std::string(dump->str, dump->len));
  }
  ASSERT_EQ(redis_->Integer({"EXISTS", keys.buyers(), keys.orders()}), 0);
  PurchaseRequest request;
  request.activity_id = "traced";
  request.user_id = "u1";
  request.idempotency_key = "key-1";
  auto bought = io_.Run(Purchase(*context_, request));
  ASSERT_TRUE(bought.ok());
  ASSERT_EQ(bought->outcome, Outcome::kReserved);
  // Lost: the order's record, the unit, the buyer's count and its intent; the idempotency record
  // that names it survives.
  for (const auto& [key, value] : dumped) {
    ASSERT_EQ(redis_->String({"RESTORE", key, "0", value, "REPLACE"}), "OK") << key;
  }
  ASSERT_EQ(redis_->Integer({"DEL", keys.stream(), keys.buyers(), keys.orders()}), 3);
  watch_.OnServer(kNode, "r2");  // the server event that goes with it
  auto repaired = io_.Run(ResolveRedisEvent(*context_, watch_, true));
  ASSERT_TRUE(repaired.ok()) << repaired.error().ToString();
  ASSERT_TRUE(*repaired);
  const auto events = watch_.Events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().summary.acknowledged_lost, 1) << "counted twice, or not at all";
  std::string metrics;
  watch_.AppendPrometheus(metrics);
  EXPECT_NE(metrics.find("flashsale_repair_acknowledged_lost_total 1\n"), std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace flashsale::service
