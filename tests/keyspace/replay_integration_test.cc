// Replays against a real redis-server: a retry with the Idempotency-Key (or the order id) of a
// request that made an order reports the order as its record is now, not as it was first
// answered: reserved, cancelled (released: expired or given back), refused (dead-lettered), with
// the order's own units and items, for purchases, draws and queued draws' tickets.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "keyspace/activity_fixture.h"
#include "keyspace/draw_queue.h"
#include "keyspace/idempotency.h"
#include "keyspace/order_stream.h"

namespace flashsale::keyspace {
namespace {

using core::Outcome;
using testing::ActivityFixture;

class ReplayTest : public ActivityFixture {
 protected:
  // An open lottery over [1000, 2000).
  static core::Activity Lottery(std::string id, std::vector<core::Prize> prizes,
                                int64_t limit = 1) {
    core::Activity activity = Activity(std::move(id), 0, limit);
    activity.lottery = core::Lottery{.prizes = std::move(prizes), .no_prize_weight = 0};
    activity.stock = activity.lottery->TotalStock();
    return activity;
  }

  // INFO memory's used_memory, in bytes.
  int64_t UsedMemory() {
    const std::string info = server_->String({"INFO", "memory"});
    const size_t at = info.find("used_memory:");
    return at == std::string::npos ? -1 : std::atoll(info.c_str() + at + 12);
  }

  base::Result<DrawResult> Draw(const std::string& activity, const std::string& order,
                                const std::string& user, const std::string& token = "") {
    DrawRequest request{.order_id = order,
                        .user_id = user,
                        .now_ms = 1500,
                        .idempotency_token = token,
                        .idempotency_ttl_ms = token.empty() ? 0 : 60000};
    return io_.Run(scripts_->AsyncDraw(activity, request, boost::asio::use_awaitable));
  }

  // What the order pipeline does with an intent the record keeps refusing: every intent on the
  // activity's stream is dead-lettered (order_dead_letter.lua), its units back to stock.
  void DeadLetterEverything(const std::string& activity) {
    OrderStream stream(*runner_, ns_);
    ASSERT_TRUE(io_.Run(stream.EnsureGroup(activity)).ok());
    auto entries = io_.Run(stream.ReadNew(activity, "test", 100));
    ASSERT_TRUE(entries.ok()) << entries.error().ToString();
    ASSERT_FALSE(entries->empty());
    for (const auto& intent : *entries) {
      auto dead =
          io_.Run(stream.DeadLetter(activity, intent.entry_id, {}, "refused by the test", 3, 1600));
      ASSERT_TRUE(dead.ok()) << dead.error().ToString();
    }
  }
};

// The first reproduction at the script: a released order (the expire job's release) was
// replayed as "reserved".
TEST_F(ReplayTest, AReleasedOrderReplaysAsCancelledWithItsOwnUnits) {
  ASSERT_TRUE(SetUpActivity(Activity("rel", 5, 3)).ok());
  auto first = Reserve("rel", "o1", "alice", 2, 1500, "tok");
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  ASSERT_EQ(first->outcome, Outcome::kReserved);
  ASSERT_EQ(Release("rel", "o1")->outcome, ReleaseOutcome::kReleased);

  auto retry = Reserve("rel", "o2", "alice", 2, 1500, "tok");
  ASSERT_TRUE(retry.ok()) << retry.error().ToString();
  EXPECT_EQ(retry->outcome, Outcome::kCancelled);
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->order_id, "o1");
  EXPECT_EQ(retry->quantity, 2);
  EXPECT_EQ(retry->remaining, 5);
  // The service's own retry, by order id, says the same.
  auto by_id = Reserve("rel", "o1", "alice", 2);
  EXPECT_EQ(by_id->outcome, Outcome::kCancelled);
  EXPECT_TRUE(by_id->replayed);
  // Nothing was taken by the replays.
  EXPECT_EQ(Status("rel").remaining, 5);
  EXPECT_EQ(server_->Integer({"HEXISTS", Keys("rel").buyers(), "alice"}), 0);
}

TEST_F(ReplayTest, AReservedOrderReplaysWithItsOwnUnitsAndItems) {
  auto coupons = Activity("items", 0, 3);
  coupons.kind = core::StockKind::kItemised;
  coupons.items = {"c1", "c2", "c3", "c4"};
  ASSERT_TRUE(SetUpActivity(coupons).ok());
  ASSERT_EQ(Reserve("items", "o1", "alice", 2, 1500, "tok")->outcome, Outcome::kReserved);
  auto retry = Reserve("items", "o2", "alice", 2, 1500, "tok");
  EXPECT_EQ(retry->outcome, Outcome::kReserved);
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->quantity, 2);
  EXPECT_EQ(retry->items, (std::vector<std::string>{"c1", "c2"}));
  EXPECT_EQ(retry->remaining, 2);
}

TEST_F(ReplayTest, ADeadLetteredOrderReplaysAsRefusedWithItsItems) {
  auto coupons = Activity("dead", 0, 2);
  coupons.kind = core::StockKind::kItemised;
  coupons.items = {"c1", "c2", "c3"};
  ASSERT_TRUE(SetUpActivity(coupons).ok());
  ASSERT_EQ(Reserve("dead", "o1", "alice", 2, 1500, "tok")->outcome, Outcome::kReserved);
  ASSERT_NO_FATAL_FAILURE(DeadLetterEverything("dead"));
  ASSERT_EQ(Status("dead").remaining, 3) << "the refused order's items went back";

  auto retry = Reserve("dead", "o2", "alice", 2, 1500, "tok");
  ASSERT_TRUE(retry.ok()) << retry.error().ToString();
  EXPECT_EQ(retry->outcome, Outcome::kRefused);
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->order_id, "o1");
  EXPECT_EQ(retry->quantity, 2);
  EXPECT_EQ(retry->items, (std::vector<std::string>{"c1", "c2"}));
  EXPECT_EQ(Status("dead").remaining, 3);
}

// The same for a lottery win the record refused (lottery_draw.lua).
TEST_F(ReplayTest, ARefusedWinReplaysAsRefusedWithItsPrize) {
  ASSERT_TRUE(SetUpActivity(Lottery("win", {{"mug", "Mug", 1, 5}}, 2)).ok());
  auto won = Draw("win", "o1", "alice", "tok");
  ASSERT_TRUE(won.ok()) << won.error().ToString();
  ASSERT_EQ(won->outcome, Outcome::kReserved);
  ASSERT_NO_FATAL_FAILURE(DeadLetterEverything("win"));

  auto retry = Draw("win", "o2", "alice", "tok");
  ASSERT_TRUE(retry.ok()) << retry.error().ToString();
  EXPECT_EQ(retry->outcome, Outcome::kRefused);
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->order_id, "o1");
  EXPECT_EQ(retry->prize_id, "mug");
  EXPECT_EQ(retry->draws, 1);
  EXPECT_EQ(Draw("win", "o1", "alice")->outcome, Outcome::kRefused) << "by order id";
  EXPECT_EQ(Status("win").remaining, 5) << "the prize went back, no other taken";
}

// And for a queued draw's ticket (lottery_ticket.lua): its win, then refused.
TEST_F(ReplayTest, ATicketReportsItsWinAsItIsNow) {
  ASSERT_TRUE(SetUpActivity(Lottery("queued", {{"mug", "Mug", 1, 5}})).ok());
  DrawQueue queue(*runner_, ns_);
  const EnqueueRequest request{.ticket_id = "t1",
                               .user_id = "alice",
                               .now_ms = 1500,
                               .capacity = 100,
                               .ticket_ttl_ms = 60'000,
                               .user_token = "token-alice"};
  ASSERT_EQ(io_.Run(queue.Enqueue("queued", request))->outcome, EnqueueOutcome::kQueued);
  // The queue consumer's draw: the ticket is the order id and the idempotency key.
  ASSERT_EQ(Draw("queued", "t1", "alice", "t1")->outcome, Outcome::kReserved);
  auto ticket = io_.Run(queue.Ticket("queued", "t1", "alice"));
  ASSERT_TRUE(ticket.ok()) << ticket.error().ToString();
  EXPECT_EQ(ticket->outcome, Outcome::kReserved);

  ASSERT_NO_FATAL_FAILURE(DeadLetterEverything("queued"));
  ticket = io_.Run(queue.Ticket("queued", "t1", "alice"));
  ASSERT_TRUE(ticket.ok()) << ticket.error().ToString();
  EXPECT_EQ(ticket->state, TicketState::State::kDecided);
  EXPECT_EQ(ticket->outcome, Outcome::kRefused);
  EXPECT_EQ(ticket->prize_id, "mug");
  EXPECT_EQ(ticket->order_id, "t1");
}

// What a retry the local gate refused reads (idempotency_replay.lua): the key's first outcome as
// the reserve, draw and enqueue scripts left it, the order as it is now; nothing for a key never
// seen.
TEST_F(ReplayTest, TheGatesReplayReadsWhatTheScriptsLeftUnderAKey) {
  IdempotencyRecords records(*runner_, ns_);
  auto replay = [&](const std::string& activity, const std::string& token, int64_t quantity = 1) {
    auto found = io_.Run(records.Replay(activity, token, "alice", quantity));
    EXPECT_TRUE(found.ok()) << found.error().ToString();
    return found.ok() ? *found : KeyReplay{};
  };
  auto coupons = Activity("gate", 0, 3);
  coupons.kind = core::StockKind::kItemised;
  coupons.items = {"c1", "c2", "c3"};
  ASSERT_TRUE(SetUpActivity(coupons).ok());
  EXPECT_EQ(replay("gate", "never").kind, KeyReplay::Kind::kNone);
  ASSERT_EQ(Reserve("gate", "o1", "alice", 2, 1500, "tok")->outcome, Outcome::kReserved);
  KeyReplay order = replay("gate", "tok", 2);
  EXPECT_EQ(order.kind, KeyReplay::Kind::kOutcome);
  EXPECT_EQ(order.outcome, Outcome::kReserved);
  EXPECT_EQ(order.order_id, "o1");
  EXPECT_EQ(order.count, 2);
  EXPECT_EQ(order.detail, "c1 c2");
  EXPECT_EQ(order.remaining, 1);
  ASSERT_EQ(Release("gate", "o1")->outcome, ReleaseOutcome::kReleased);
  EXPECT_EQ(replay("gate", "tok", 2).outcome, Outcome::kCancelled);
  EXPECT_EQ(replay("gate", "tok", 2).remaining, 3);

  ASSERT_TRUE(SetUpActivity(Lottery("gatewin", {{"mug", "Mug", 1, 5}})).ok());
  ASSERT_EQ(Draw("gatewin", "w1", "alice", "tok")->outcome, Outcome::kReserved);
  KeyReplay win = replay("gatewin", "tok");
  EXPECT_EQ(win.outcome, Outcome::kReserved);
  EXPECT_EQ(win.order_id, "w1");
  EXPECT_EQ(win.detail, "mug");
  EXPECT_EQ(win.count, 1) << "the user's draws";
  EXPECT_EQ(win.remaining, 4);

  ASSERT_TRUE(SetUpActivity(Lottery("gatequeue", {{"mug", "Mug", 1, 5}})).ok());
  DrawQueue queue(*runner_, ns_);
  const EnqueueRequest request{.ticket_id = "t1",
                               .user_id = "alice",
                               .now_ms = 1500,
                               .capacity = 100,
                               .ticket_ttl_ms = 60'000,
                               .idempotency_token = "tok",
                               .idempotency_ttl_ms = 60'000,
                               .user_token = "token-alice"};
  ASSERT_EQ(io_.Run(queue.Enqueue("gatequeue", request))->outcome, EnqueueOutcome::kQueued);
  KeyReplay ticket = replay("gatequeue", "tok");
  EXPECT_EQ(ticket.kind, KeyReplay::Kind::kTicket);
  EXPECT_EQ(ticket.order_id, "t1");
}

// The third reproduction at the scripts: refused requests, each with a new key (a user at
// the limit, a sold-out sale, a lottery user out of draws), stored a key each for a day. A refusal
// keeps nothing now: 10,000 of them leave Redis with the keys it had, and its memory within a
// bound far below what 10,000 kept records take.
TEST_F(ReplayTest, TenThousandRefusalsWithFreshKeysKeepNothing) {
  ASSERT_TRUE(SetUpActivity(Activity("bound", 1, 1)).ok());
  ASSERT_EQ(Reserve("bound", "o0", "alice", 1, 1500, "first")->outcome, Outcome::kReserved);
  ASSERT_TRUE(SetUpActivity(Lottery("boundwin", {{"mug", "Mug", 1, 5}})).ok());
  ASSERT_EQ(Draw("boundwin", "w0", "alice", "first")->outcome, Outcome::kReserved);
  // The keys of this test's namespace (DBSIZE would count other tests' keys expiring meanwhile).
  const auto keys = [&] { return server_->Command({"KEYS", ns_ + ":*"})->elements; };
  const size_t keys_before = keys();
  const int64_t memory_before = UsedMemory();
  constexpr int kBatches = 20, kPerBatch = 500;
  for (int b = 0; b < kBatches; ++b) {
    std::vector<std::string> ids, tokens;
    for (int i = 0; i < kPerBatch; ++i) {
      ids.push_back("r-" + std::to_string(b) + "-" + std::to_string(i));
      tokens.push_back("fresh-" + std::to_string(b) + "-" + std::to_string(i));
    }
    std::vector<ReserveRequest> requests;
    for (int i = 0; i < kPerBatch; ++i) {
      // Alice holds her limit (already purchased); bob meets the sale sold out.
      requests.push_back({.order_id = ids[i],
                          .user_id = i % 2 == 0 ? "alice" : "bob",
                          .quantity = 1,
                          .now_ms = 1500,
                          .idempotency_token = tokens[i],
                          .idempotency_ttl_ms = 86'400'000});
    }
    auto results =
        io_.Run(scripts_->AsyncReserveBatch("bound", requests, boost::asio::use_awaitable));
    ASSERT_TRUE(results.ok()) << results.error().ToString();
    for (int i = 0; i < kPerBatch; ++i) {
      ASSERT_EQ((*results)[i]->outcome, i % 2 == 0 ? Outcome::kLimitReached : Outcome::kSoldOut);
    }
    // And a lottery user out of draws: as many draws, each with a new key.
    for (int i = 0; i < kPerBatch / 10; ++i) {
      ASSERT_EQ(Draw("boundwin", "d" + ids[i], "alice", "draw-" + tokens[i])->outcome,
                Outcome::kLimitReached);
    }
  }
  EXPECT_EQ(keys(), keys_before);
  EXPECT_LT(UsedMemory() - memory_before, 256 * 1024);
  // The key that reserved still replays.
  EXPECT_EQ(Reserve("bound", "o1", "alice", 1, 1500, "first")->order_id, "o0");
}

// The fourth reproduction at the script: a reservation of 1 under a key, then the key with
// a quantity of 3 answered "reserved, quantity 3, replayed". Another quantity under a used key is
// another request: -12, nothing taken; the same quantity replays.
TEST_F(ReplayTest, AKeyKeptWithAnotherQuantityIsRefused) {
  ASSERT_TRUE(SetUpActivity(Activity("qty", 10, 5)).ok());
  ASSERT_EQ(Reserve("qty", "o1", "alice", 1, 1500, "tok")->outcome, Outcome::kReserved);
  auto other = Reserve("qty", "o2", "alice", 3, 1500, "tok");
  ASSERT_TRUE(other.ok()) << other.error().ToString();
  EXPECT_EQ(other->outcome, Outcome::kKeyReused);
  EXPECT_FALSE(other->replayed);
  EXPECT_EQ(Status("qty").reserved, 1) << "nothing taken";
  auto same = Reserve("qty", "o3", "alice", 1, 1500, "tok");
  EXPECT_EQ(same->outcome, Outcome::kReserved);
  EXPECT_EQ(same->order_id, "o1");
  // Within one batch: the key's reservation, then the key with another quantity.
  std::vector<ReserveRequest> batch = {{.order_id = "o4",
                                        .user_id = "bob",
                                        .quantity = 1,
                                        .now_ms = 1500,
                                        .idempotency_token = "tok2",
                                        .idempotency_ttl_ms = 60'000},
                                       {.order_id = "o5",
                                        .user_id = "bob",
                                        .quantity = 2,
                                        .now_ms = 1500,
                                        .idempotency_token = "tok2",
                                        .idempotency_ttl_ms = 60'000}};
  auto results = io_.Run(scripts_->AsyncReserveBatch("qty", batch, boost::asio::use_awaitable));
  ASSERT_TRUE(results.ok()) << results.error().ToString();
  EXPECT_EQ((*results)[0]->outcome, Outcome::kReserved);
  EXPECT_EQ((*results)[1]->outcome, Outcome::kKeyReused);
  EXPECT_EQ(Status("qty").reserved, 2);
  // The gate's replay reads the same.
  IdempotencyRecords records(*runner_, ns_);
  EXPECT_EQ(io_.Run(records.Replay("qty", "tok", "alice", 3))->outcome, Outcome::kKeyReused);
  EXPECT_EQ(io_.Run(records.Replay("qty", "tok", "alice", 1))->outcome, Outcome::kReserved);
}

// The service-wide claim of a key (SET NX GET): the first request's fingerprint, a retry's same,
// another's refused; dropped, the key is free again.
TEST_F(ReplayTest, AKeysClaimHoldsTheFingerprintOfItsFirstRequest) {
  IdempotencyRecords records(*runner_, ns_);
  auto claim = io_.Run(records.Claim("tok", "a|purchase|1", 60'000));
  ASSERT_TRUE(claim.ok()) << claim.error().ToString();
  EXPECT_EQ(claim->state, KeyClaim::State::kClaimed);
  EXPECT_EQ(io_.Run(records.Claim("tok", "a|purchase|1", 60'000))->state, KeyClaim::State::kSame);
  auto other = io_.Run(records.Claim("tok", "b|purchase|1", 60'000));
  EXPECT_EQ(other->state, KeyClaim::State::kOther);
  EXPECT_EQ(other->held, "a|purchase|1");
  EXPECT_EQ(io_.Run(records.Claimed("tok"))->value_or(""), "a|purchase|1");
  const int64_t ttl = server_->Integer({"PTTL", ns_ + ":idem:{tok}"});
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 60'000);
  ASSERT_TRUE(io_.Run(records.Unclaim("tok")).ok());
  EXPECT_FALSE(io_.Run(records.Claimed("tok"))->has_value());
  EXPECT_EQ(io_.Run(records.Claim("tok", "b|purchase|1", 60'000))->state,
            KeyClaim::State::kClaimed);
}

}  // namespace
}  // namespace flashsale::keyspace
