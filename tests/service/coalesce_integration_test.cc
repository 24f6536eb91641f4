// Purchases and draws coalesced per activity (base/coalescer.h), through the use cases on a
// real redis-server and a real SQLite file: 64 callers on one ServiceContext at once, so batches
// form; the same user more than once inside one batch, mixed quantities, itemised stock, an
// Idempotency-Key sent twice in one batch. Exactness: every outcome is the one the same requests
// decided one after another get (a twin activity, sequential calls), units sold equal the stock,
// nobody holds more than the limit, and every reservation answered is one distinct order in Redis.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/random.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/embedded_scripts.h"
#include "service/admin.h"
#include "service/draw.h"
#include "service/purchase.h"
#include "store/sqlite_store.h"
#include "support/redis_helpers.h"
#include "support/redis_server.h"
#include "support/service_fixture.h"
#include "support/wait.h"

namespace flashsale::service {
namespace {

namespace asio = boost::asio;
using base::CoalescerStats;
using core::Outcome;
using testing::IoThread;
using testing::RedisServer;
using namespace std::chrono_literals;

// One caller's request.
struct Ask {
  std::string user;
  int64_t quantity = 1;
  std::string idempotency_key;
};

// An order intent on the activity's stream.
struct Intent {
  std::string order_id;
  std::string user_id;
  int64_t quantity = 0;
};

class CoalesceTest : public testing::ServiceFixture<> {
 protected:
  void SetUp() override {
    // The clock stands still: with no lapse, a sold-out flag would answer the sequential twin's
    // later requests locally (sold out before the limit is looked at), where the concurrent run,
    // admitted before any reply, has Redis decide them all.
    settings_.sold_out_ttl_ms = 0;
    redis::ConnectionOptions options;
    options.command_timeout = 10s;  // a loaded test machine is slow, not broken
    ASSERT_NO_FATAL_FAILURE(StartService({}, options));
  }

  void Create(const core::Activity& activity) {
    auto created = io_.Run(CreateAsync(activity));
    ASSERT_TRUE(created.ok()) << created.error().ToString();
  }
  asio::awaitable<base::Result<ActivityState>> CreateAsync(core::Activity activity) {
    co_return co_await CreateActivity(*context_, activity);
  }
  static core::Activity Sale(std::string id, int64_t limit) {
    core::Activity activity;
    activity.id = std::move(id);
    activity.start_ms = 0;
    activity.end_ms = 4'000'000'000'000;
    activity.per_user_limit = limit;
    return activity;
  }

  // Parameters by value: the coroutine's frame owns what the request refers to.
  asio::awaitable<std::optional<base::Result<PurchaseResult>>> Buy(std::string activity, Ask ask) {
    const PurchaseRequest request{.activity_id = activity,
                                  .user_id = ask.user,
                                  .quantity = ask.quantity,
                                  .idempotency_key = ask.idempotency_key};
    co_return co_await Purchase(*context_, request);
  }
  asio::awaitable<std::optional<base::Result<DrawResult>>> DrawOnce(std::string activity, Ask ask) {
    const AdmissionRequest request{
        .activity_id = activity, .user_id = ask.user, .idempotency_key = ask.idempotency_key};
    co_return co_await Draw(*context_, request);
  }

  // Starts every request in one turn of the I/O thread, in order, then waits for all: the first
  // goes alone, the rest arrive while it is in flight.
  template <typename R, typename Start>
  std::vector<R> AllAtOnce(const std::vector<Ask>& asks, Start start) {
    std::vector<std::future<std::optional<base::Result<R>>>> futures;
    io_.Call([&] {
      for (const Ask& ask : asks) {
        futures.push_back(asio::co_spawn(io_.context(), start(ask), asio::use_future));
      }
    });
    std::vector<R> results;
    for (auto& future : futures) {
      if (future.wait_for(120s) != std::future_status::ready) {
        ADD_FAILURE() << "a request did not finish within 120 s";
        return {};
      }
      auto result = future.get();
      EXPECT_TRUE(result.has_value() && result->ok())
          << (result && !result->ok() ? result->error().ToString() : "no result");
      if (!result || !result->ok()) return {};
      results.push_back(std::move(**result));
    }
    return results;
  }
  std::vector<PurchaseResult> BuyAllAtOnce(const std::string& activity,
                                           const std::vector<Ask>& asks) {
    return AllAtOnce<PurchaseResult>(asks, [&](const Ask& ask) { return Buy(activity, ask); });
  }
  std::vector<PurchaseResult> BuyOneByOne(const std::string& activity,
                                          const std::vector<Ask>& asks) {
    std::vector<PurchaseResult> results;
    for (const Ask& ask : asks) {
      auto result = io_.Run(Buy(activity, ask));
      EXPECT_TRUE(result && result->ok());
      if (!result || !result->ok()) return {};
      results.push_back(std::move(**result));
    }
    return results;
  }

  // The activity's order intents, from its stream.
  std::vector<Intent> Intents(const std::string& activity) {
    const keyspace::ActivityKeys keys(settings_.key_namespace, activity);
    auto reply = redis_->Command({"XRANGE", keys.stream(), "-", "+"});
    std::vector<Intent> intents;
    for (auto& fields : testing::StreamIntents(reply.get())) {
      Intent intent;
      intent.order_id = fields["order_id"];
      intent.user_id = fields["user_id"];
      intent.quantity = std::stoll(fields["quantity"]);
      intents.push_back(std::move(intent));
    }
    return intents;
  }

  // What every sale test asserts of a concurrent run: batches formed; each reply the same as the
  // sequential twin's; Redis's orders are the reservations answered, each once; nobody above the
  // limit.
  void ExpectExact(const std::string& batched, const std::vector<PurchaseResult>& concurrent,
                   const std::vector<PurchaseResult>& sequential, const std::vector<Ask>& asks,
                   int64_t limit) {
    ASSERT_EQ(concurrent.size(), asks.size());
    ASSERT_EQ(sequential.size(), asks.size());
    std::set<std::string> reserved_orders;
    std::map<std::string, int64_t> held;  // user -> units, from the replies
    for (size_t i = 0; i < asks.size(); ++i) {
      const PurchaseResult& got = concurrent[i];
      const PurchaseResult& alone = sequential[i];
      EXPECT_FALSE(got.unknown) << i << ": " << got.unknown_reason;
      EXPECT_EQ(got.outcome, alone.outcome)
          << "request " << i << " (" << asks[i].user << " x" << asks[i].quantity << ")";
      EXPECT_EQ(got.items, alone.items) << "request " << i;
      EXPECT_EQ(got.replayed, alone.replayed) << "request " << i;
      if (got.outcome == Outcome::kReserved) {
        EXPECT_EQ(got.bought, alone.bought) << "request " << i;
        if (!got.replayed) {
          EXPECT_TRUE(reserved_orders.insert(got.order_id).second)
              << "order " << got.order_id << " answered twice";
          held[asks[i].user] += asks[i].quantity;
        }
      }
    }
    for (const auto& [user, units] : held) EXPECT_LE(units, limit) << user;

    const std::vector<Intent> intents = Intents(batched);
    std::set<std::string> recorded;
    std::map<std::string, int64_t> recorded_held;
    for (const Intent& intent : intents) {
      EXPECT_TRUE(recorded.insert(intent.order_id).second) << "order " << intent.order_id;
      recorded_held[intent.user_id] += intent.quantity;
    }
    EXPECT_EQ(recorded, reserved_orders) << "Redis holds exactly the reservations answered";
    EXPECT_EQ(recorded_held, held);
  }

  // What the concurrent run sent (shown in the test's output).
  static void Print(const std::string& name, const CoalescerStats& stats) {
    std::printf(
        "[ coalesce ] %s: %lld calls for %lld requests, %lld of them batches, largest %lld\n",
        name.c_str(), static_cast<long long>(stats.calls), static_cast<long long>(stats.requests),
        static_cast<long long>(stats.batched_calls), static_cast<long long>(stats.largest_batch));
  }
};

constexpr int kCallers = 64;

TEST_F(CoalesceTest, ALonePurchaseIsSentAloneAtOnce) {
  core::Activity sale = Sale("lone", 1);
  sale.stock = 5;
  Create(sale);
  auto result = io_.Run(Buy("lone", {.user = "alice"}));
  ASSERT_TRUE(result && result->ok());
  EXPECT_EQ((*result)->outcome, Outcome::kReserved);
  EXPECT_EQ(context_->reserves().stats().calls, 1);
  EXPECT_EQ(context_->reserves().stats().batched_calls, 0);
}

// 64 callers, 24 users (the same user up to three times in one batch), quantities 1 to 3, a
// limit of 3 and 40 units: sold out, limits reached and exceeded, all inside batches.
TEST_F(CoalesceTest, CountedStockMixedQuantitiesAndDuplicateUsers) {
  constexpr int64_t kLimit = 3;
  constexpr int64_t kStock = 40;
  for (const std::string id : {"counted", "counted-twin"}) {
    core::Activity sale = Sale(id, kLimit);
    sale.stock = kStock;
    Create(sale);
  }
  std::vector<Ask> asks;
  for (int i = 0; i < kCallers; ++i) {
    asks.push_back({.user = "u" + std::to_string(i % 24), .quantity = 1 + (i * 7) % 3});
  }
  const std::vector<PurchaseResult> concurrent = BuyAllAtOnce("counted", asks);
  const CoalescerStats stats = context_->reserves().stats();
  Print("counted", stats);
  const std::vector<PurchaseResult> sequential = BuyOneByOne("counted-twin", asks);
  ExpectExact("counted", concurrent, sequential, asks, kLimit);

  EXPECT_GE(stats.batched_calls, 1) << "64 requests at once formed at least one batch";
  EXPECT_GT(stats.largest_batch, 1);
  EXPECT_LT(stats.calls, kCallers);
  int64_t sold = 0;
  std::set<Outcome> outcomes;
  for (const PurchaseResult& result : concurrent) {
    outcomes.insert(result.outcome);
    if (result.outcome == Outcome::kReserved) sold += result.quantity;
  }
  EXPECT_EQ(sold, kStock) << "demand is above the stock: every unit sold, none twice";
  const keyspace::ActivityKeys keys(settings_.key_namespace, "counted");
  EXPECT_EQ(redis_->String({"GET", keys.stock()}), "0");
  EXPECT_TRUE(outcomes.contains(Outcome::kSoldOut));
  EXPECT_TRUE(outcomes.contains(Outcome::kLimitExceeded) ||
              outcomes.contains(Outcome::kLimitReached))
      << "some user asked beyond the limit inside the run";
}

// Itemised stock: the items taken are distinct, all of them sold, each reply names as many
// items as it bought, and the same items as the sequential twin (the script takes them in list
// order).
TEST_F(CoalesceTest, ItemisedStockInBatches) {
  constexpr int64_t kLimit = 2;
  // Batches of at most 16: 63 waiting requests go as four batches, one after another.
  settings_.max_batch = 16;
  context_ = std::make_unique<ServiceContext>(settings_, *runner_, *store_, db_.get_executor(),
                                              registry_, clock_, random_);
  std::vector<std::string> items;
  for (int i = 0; i < 30; ++i) items.push_back("seat-" + std::to_string(i));
  for (const std::string id : {"seats", "seats-twin"}) {
    core::Activity sale = Sale(id, kLimit);
    sale.kind = core::StockKind::kItemised;
    sale.items = items;
    sale.stock = static_cast<int64_t>(items.size());
    Create(sale);
  }
  std::vector<Ask> asks;
  for (int i = 0; i < kCallers; ++i) {
    asks.push_back({.user = "u" + std::to_string(i % 20), .quantity = 1 + i % 2});
  }
  const std::vector<PurchaseResult> concurrent = BuyAllAtOnce("seats", asks);
  const CoalescerStats stats = context_->reserves().stats();
  Print("seats", stats);
  const std::vector<PurchaseResult> sequential = BuyOneByOne("seats-twin", asks);
  ExpectExact("seats", concurrent, sequential, asks, kLimit);

  EXPECT_GE(stats.batched_calls, 1);
  EXPECT_EQ(stats.largest_batch, 16) << "the cap holds";
  EXPECT_GE(stats.calls, 5);
  std::set<std::string> taken;
  for (const PurchaseResult& result : concurrent) {
    if (result.outcome != Outcome::kReserved) continue;
    EXPECT_EQ(static_cast<int64_t>(result.items.size()), result.quantity);
    for (const std::string& item : result.items) {
      EXPECT_TRUE(taken.insert(item).second) << item << " sold twice";
    }
  }
  EXPECT_EQ(taken, std::set<std::string>(items.begin(), items.end())) << "every seat sold";
  const keyspace::ActivityKeys keys(settings_.key_namespace, "seats");
  EXPECT_EQ(redis_->Integer({"LLEN", keys.items()}), 0);
}

// The same Idempotency-Key twice inside one batch (a client's retry racing its first request):
// one reservation, the second reply replays it with its order id.
TEST_F(CoalesceTest, AnIdempotencyKeyTwiceInOneBatchReservesOnce) {
  constexpr int64_t kLimit = 5;
  for (const std::string id : {"keyed", "keyed-twin"}) {
    core::Activity sale = Sale(id, kLimit);
    sale.stock = 100;
    Create(sale);
  }
  std::vector<Ask> asks;
  for (int i = 0; i < kCallers; ++i) {
    // Pairs of requests with one key: (1, 2), (3, 4), ...; request 0 goes alone first.
    const int pair = (i + 1) / 2;
    asks.push_back({.user = "u" + std::to_string(pair % 8),
                    .quantity = 1,
                    .idempotency_key = "key-" + std::to_string(pair)});
  }
  const std::vector<PurchaseResult> concurrent = BuyAllAtOnce("keyed", asks);
  const CoalescerStats stats = context_->reserves().stats();
  Print("keyed", stats);
  // The twin's keys are its own: a user's key sent to another activity is another request under
  // a used key, refused (422).
  std::vector<Ask> twin_asks = asks;
  for (Ask& ask : twin_asks) ask.idempotency_key = "twin-" + ask.idempotency_key;
  const std::vector<PurchaseResult> sequential = BuyOneByOne("keyed-twin", twin_asks);
  ExpectExact("keyed", concurrent, sequential, asks, kLimit);
  EXPECT_GE(stats.batched_calls, 1);
  int replays = 0;
  for (int i = 2; i < kCallers; i += 2) {
    if (concurrent[i - 1].outcome != Outcome::kReserved) continue;
    EXPECT_TRUE(concurrent[i].replayed) << "request " << i;
    EXPECT_EQ(concurrent[i].order_id, concurrent[i - 1].order_id) << "request " << i;
    ++replays;
  }
  EXPECT_GT(replays, 0);
}

// Draws: 64 direct draws on one lottery, the same user up to three times against a limit of
// two. With the same seed, the sequential twin draws the same prizes in the same order.
TEST_F(CoalesceTest, DrawsInBatchesAreTheSequentialDraws) {
  for (const std::string id : {"lottery", "lottery-twin"}) {
    core::Activity lottery = Sale(id, 2);
    lottery.lottery = core::Lottery{.prizes = {{"cup", "A cup", 1, 5}, {"pen", "A pen", 2, 10}},
                                    .no_prize_weight = 5};
    lottery.stock = lottery.lottery->TotalStock();
    Create(lottery);
  }
  std::vector<Ask> asks;
  for (int i = 0; i < kCallers; ++i) asks.push_back({.user = "u" + std::to_string(i % 24)});

  random_ = base::SeededRandom(7);
  const std::vector<DrawResult> concurrent =
      AllAtOnce<DrawResult>(asks, [&](const Ask& ask) { return DrawOnce("lottery", ask); });
  const CoalescerStats stats = context_->draws().stats();
  random_ = base::SeededRandom(7);
  std::vector<DrawResult> sequential;
  for (const Ask& ask : asks) {
    auto result = io_.Run(DrawOnce("lottery-twin", ask));
    ASSERT_TRUE(result && result->ok());
    sequential.push_back(std::move(**result));
  }
  ASSERT_EQ(concurrent.size(), asks.size());
  Print("lottery", stats);
  EXPECT_GE(stats.batched_calls, 1);

  std::map<std::string, int64_t> won;    // prize -> units
  std::map<std::string, int64_t> draws;  // user -> draws made
  std::set<std::string> orders;
  for (size_t i = 0; i < asks.size(); ++i) {
    const DrawResult& got = concurrent[i];
    EXPECT_FALSE(got.unknown) << got.unknown_reason;
    EXPECT_EQ(got.outcome, sequential[i].outcome) << "draw " << i;
    EXPECT_EQ(got.prize.id, sequential[i].prize.id) << "draw " << i;
    if (got.outcome == Outcome::kReserved || got.outcome == Outcome::kNoPrize) {
      EXPECT_TRUE(orders.insert(got.order_id).second);
      ++draws[asks[i].user];
      EXPECT_EQ(got.draws, draws[asks[i].user]) << "draw " << i;
    }
    if (got.outcome == Outcome::kReserved) ++won[got.prize.id];
  }
  for (const auto& [user, made] : draws) EXPECT_LE(made, 2) << user;
  EXPECT_LE(won["cup"], 5);
  EXPECT_LE(won["pen"], 10);
  const keyspace::ActivityKeys keys(settings_.key_namespace, "lottery");
  EXPECT_EQ(std::stoll(redis_->String({"HGET", keys.prizes(), "cup"})), 5 - won["cup"]);
  EXPECT_EQ(std::stoll(redis_->String({"HGET", keys.prizes(), "pen"})), 10 - won["pen"]);
}

// Redis stops answering with a batch in flight: every waiter of the batch is told that its
// outcome is unknown, under its own order id. Once Redis answers again and runs what it was sent,
// the orders it recorded are exactly those ids (nothing recorded that no caller was told about),
// and purchases are decided again.
TEST_F(CoalesceTest, ARedisThatStopsAnsweringReachesEveryWaiterOfTheBatch) {
  core::Activity sale = Sale("paused", 1);
  sale.stock = 100;
  Create(sale);
  // This test's own connection: a short command timeout, no retry.
  context_.reset();
  testing::Stop(io_, connection_);
  redis::ConnectionOptions options;
  options.command_timeout = 300ms;
  connection_ = testing::Connect(io_, redis_->unix_url(), options);
  runner_ = std::make_unique<redis::ScriptRunner>(connection_, keyspace::Scripts());
  settings_.redis_retries = 0;
  context_ = std::make_unique<ServiceContext>(settings_, *runner_, *store_, db_.get_executor(),
                                              registry_, clock_, random_);

  // One purchase before the pause: the script is loaded and the connection is up, so what
  // follows is only the pause.
  auto warm = io_.Run(Buy("paused", {.user = "warm"}));
  ASSERT_TRUE(warm && warm->ok() && (*warm)->outcome == Outcome::kReserved);
  std::vector<Ask> asks;
  for (int i = 0; i < 8; ++i) asks.push_back({.user = "p" + std::to_string(i)});
  redis_->Pause();
  const std::vector<PurchaseResult> results = BuyAllAtOnce("paused", asks);
  redis_->Resume();
  const CoalescerStats stats = context_->reserves().stats();
  Print("paused", stats);
  ASSERT_EQ(results.size(), asks.size());
  EXPECT_GE(stats.batched_calls, 1);
  std::set<std::string> told = {(*warm)->order_id};
  for (const PurchaseResult& result : results) {
    EXPECT_TRUE(result.unknown) << "no reply: the outcome is unknown, never a guess";
    EXPECT_FALSE(result.order_id.empty());
    told.insert(result.order_id);
  }
  EXPECT_EQ(told.size(), asks.size() + 1) << "each waiter has its own order id";

  // Redis runs what it was sent once it is resumed: those orders, and no other.
  std::set<std::string> recorded;
  EXPECT_TRUE(testing::Eventually(
      [&] {
        recorded.clear();
        for (const Intent& intent : Intents("paused")) recorded.insert(intent.order_id);
        return recorded.size() >= told.size();
      },
      20s));
  EXPECT_EQ(recorded, told);

  int attempt = 0;  // a fresh user each attempt: an unknown one may have reserved
  EXPECT_TRUE(testing::Eventually(
      [&] {
        auto again = io_.Run(Buy("paused", {.user = "after" + std::to_string(attempt++)}));
        return again && again->ok() && (*again)->outcome == Outcome::kReserved &&
               !(*again)->unknown;
      },
      20s, 200ms))
      << "purchases are decided again once Redis answers";
}

}  // namespace
}  // namespace flashsale::service
