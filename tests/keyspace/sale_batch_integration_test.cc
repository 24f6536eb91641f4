// ReserveBatch on a real redis-server: a batch decides each request exactly as single Reserve
// calls in the same order decide it, on a twin activity loaded the same way (duplicate users and
// order ids inside one batch, mixed quantities, idempotency keys, itemised stock, a batch that
// crosses the limit and the sell-out point), and the totals hold (no oversell, limits exact).

#include <map>
#include <random>
#include <set>

#include "keyspace/activity_fixture.h"
#include "keyspace/embedded_scripts.h"
#include "keyspace/order_stream.h"

namespace flashsale::keyspace {
namespace {

using core::Outcome;
using testing::ActivityFixture;

// Owns the strings a batch of ReserveRequests views.
struct Batch {
  std::vector<std::string> order_ids, users, tokens;
  std::vector<ReserveRequest> requests;

  void Add(std::string order_id, std::string user, int64_t quantity, std::string token = "",
           int64_t now_ms = 1500) {
    order_ids.push_back(std::move(order_id));
    users.push_back(std::move(user));
    tokens.push_back(std::move(token));
    requests.push_back({.quantity = quantity,
                        .now_ms = now_ms,
                        .idempotency_ttl_ms = tokens.back().empty() ? 0 : 60000});
  }
  // Points the views at the strings (after every Add: the vectors may have moved).
  std::span<const ReserveRequest> View() {
    for (size_t i = 0; i < requests.size(); ++i) {
      requests[i].order_id = order_ids[i];
      requests[i].user_id = users[i];
      requests[i].idempotency_token = tokens[i];
    }
    return requests;
  }
};

class SaleBatchTest : public ActivityFixture {
 protected:
  base::Result<std::vector<base::Result<Reservation>>> RunBatch(const std::string& activity,
                                                                Batch& batch) {
    return io_.Run(scripts_->AsyncReserveBatch(activity, batch.View(), boost::asio::use_awaitable));
  }

  // Every request of `batch` as a single call on `twin`, in order.
  std::vector<base::Result<Reservation>> RunSingly(const std::string& twin, Batch& batch) {
    std::vector<base::Result<Reservation>> results;
    for (const ReserveRequest& request : batch.View()) {
      results.push_back(io_.Run(scripts_->AsyncReserve(twin, request, boost::asio::use_awaitable)));
    }
    return results;
  }

  // The batch on `activity`, the singles on `twin`: the same decision for every request.
  void ExpectSameAsSingles(const std::string& activity, const std::string& twin, Batch& batch) {
    auto batched = RunBatch(activity, batch);
    ASSERT_TRUE(batched.ok()) << batched.error().ToString();
    auto single = RunSingly(twin, batch);
    ASSERT_EQ(batched->size(), single.size());
    for (size_t i = 0; i < single.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i) + " order " + batch.order_ids[i] + " user " +
                   batch.users[i] + " quantity " + std::to_string(batch.requests[i].quantity));
      const auto& b = (*batched)[i];
      const auto& s = single[i];
      ASSERT_EQ(b.ok(), s.ok());
      if (!b.ok()) {
        EXPECT_EQ(b.error().code, s.error().code);
        continue;
      }
      EXPECT_EQ(b->outcome, s->outcome);
      EXPECT_EQ(b->replayed, s->replayed);
      EXPECT_EQ(b->remaining, s->remaining);
      EXPECT_EQ(b->bought, s->bought);
      EXPECT_EQ(b->order_id, s->order_id);
      EXPECT_EQ(b->items, s->items);
    }
  }

  // What the decisions left in Redis, with the stream's entry ids left out: the buyers' counts
  // and the order records (sorted), the stock, the items left in their order, every intent's
  // fields in order.
  std::vector<std::string> Stored(const std::string& activity) {
    const ActivityKeys keys = Keys(activity);
    std::vector<std::string> out;
    const auto strings = [&](const redisReply* reply) {
      for (size_t i = 0; reply != nullptr && i < reply->elements; ++i) {
        out.emplace_back(reply->element[i]->str, reply->element[i]->len);
      }
    };
    for (const std::string* hash : {&keys.buyers(), &keys.orders()}) {
      out.push_back(hash == &keys.buyers() ? "buyers" : "orders");
      auto all = server_->Command({"HGETALL", *hash});
      std::map<std::string, std::string> sorted;
      for (size_t i = 0; i + 1 < all->elements; i += 2) {
        sorted[all->element[i]->str] = all->element[i + 1]->str;
      }
      for (const auto& [field, value] : sorted) out.push_back(field + "=" + value);
    }
    auto stock = server_->Command({"GET", keys.stock()});
    out.push_back("stock " + (stock->str != nullptr ? std::string(stock->str) : "nil"));
    out.push_back("items");
    strings(server_->Command({"LRANGE", keys.items(), "0", "-1"}).get());
    // The intents in their order (not the write sequence each entry carries: it counts calls,
    // one per batch, one per single).
    out.push_back("stream");
    auto entries = server_->Command({"XRANGE", keys.stream(), "-", "+"});
    for (size_t i = 0; i < entries->elements; ++i) {
      const redisReply* fields = entries->element[i]->element[1];
      for (size_t f = 0; f + 1 < fields->elements; f += 2) {
        if (std::string_view(fields->element[f]->str) == kWriteSeqField) continue;
        out.emplace_back(fields->element[f]->str, fields->element[f]->len);
        out.emplace_back(fields->element[f + 1]->str, fields->element[f + 1]->len);
      }
    }
    return out;
  }
  // Two activities set up alike and asked alike hold the same.
  void ExpectSameStored(const std::string& a, const std::string& b) {
    EXPECT_EQ(Stored(a), Stored(b));
  }

  // Units reserved per user by the results, checked against the buyers hash and the limit.
  void ExpectTotals(const std::string& activity, int64_t loaded, int64_t limit,
                    const std::vector<base::Result<Reservation>>& results, const Batch& batch) {
    std::map<std::string, int64_t> held;
    int64_t sold = 0;
    std::set<std::string> orders;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok() || results[i]->outcome != Outcome::kReserved) continue;
      if (results[i]->replayed || !orders.insert(results[i]->order_id).second) continue;
      held[batch.users[i]] += batch.requests[i].quantity;
      sold += batch.requests[i].quantity;
    }
    const auto status = Status(activity);
    EXPECT_EQ(status.remaining, loaded - sold);
    EXPECT_GE(status.remaining, 0);
    EXPECT_EQ(status.reserved, sold);
    for (const auto& [user, units] : held) {
      EXPECT_LE(units, limit) << user;
      EXPECT_EQ(server_->Integer({"HGET", Keys(activity).buyers(), user}), units) << user;
    }
  }
};

// 64 requests: users from a pool of 20 (so most users come several times), quantities 1-3,
// a few repeated order ids and idempotency keys.
Batch MixedBatch(uint32_t seed, const std::string& prefix) {
  std::mt19937 random(seed);
  Batch batch;
  for (int i = 0; i < 64; ++i) {
    const std::string user = "u" + std::to_string(random() % 20);
    const int64_t quantity = 1 + random() % 3;
    std::string order = prefix + std::to_string(i);
    if (i > 0 && random() % 10 == 0) order = batch.order_ids[random() % batch.order_ids.size()];
    std::string token = random() % 8 == 0 ? "k" + std::to_string(random() % 4) : "";
    batch.Add(order, user, quantity, token);
  }
  return batch;
}

TEST_F(SaleBatchTest, CountedBatchesDecideAsSinglesAcrossLimitAndSellOut) {
  // 50 units, up to 3 per user of 20: three batches of 64 cross both the limits and the
  // sell-out.
  ASSERT_TRUE(SetUpActivity(Activity("a", 50, 3)).ok());
  ASSERT_TRUE(SetUpActivity(Activity("b", 50, 3)).ok());
  for (uint32_t round = 0; round < 3; ++round) {
    Batch batch = MixedBatch(round + 7, "r" + std::to_string(round) + "-");
    ExpectSameAsSingles("a", "b", batch);
    if (HasFatalFailure()) return;
  }
  const auto a = Status("a");
  const auto b = Status("b");
  EXPECT_EQ(a.remaining, b.remaining);
  EXPECT_EQ(a.reserved, b.reserved);
  EXPECT_EQ(a.reserved, a.total - a.remaining);
  // The same intents (ExpectSameStored), a's as one entry per batch call that reserved.
  EXPECT_LE(a.stream_length, 3);
  EXPECT_LT(a.stream_length, b.stream_length);
  ExpectSameStored("a", "b");
  // Sold out, or every user at the limit: the batches crossed a boundary.
  EXPECT_EQ(a.remaining, 0);
}

TEST_F(SaleBatchTest, TotalsOfOneBatchHoldTheLimitExactly) {
  ASSERT_TRUE(SetUpActivity(Activity("t", 40, 2)).ok());
  Batch batch;
  // The same user again and again in one batch: exactly 2 units, whatever the quantities.
  for (int i = 0; i < 64; ++i) {
    batch.Add("o" + std::to_string(i), "u" + std::to_string(i % 8), 1 + i % 2);
  }
  auto results = RunBatch("t", batch);
  ASSERT_TRUE(results.ok()) << results.error().ToString();
  ExpectTotals("t", 40, 2, *results, batch);
  int reserved = 0;
  for (const auto& r : *results) reserved += r.ok() && r->outcome == Outcome::kReserved;
  EXPECT_GT(reserved, 0);
}

TEST_F(SaleBatchTest, ItemisedBatchesDecideAsSingles) {
  auto coupons = Activity("i", 0, 3);
  coupons.kind = core::StockKind::kItemised;
  for (int i = 0; i < 50; ++i) coupons.items.push_back("C" + std::to_string(i));
  ASSERT_TRUE(SetUpActivity(coupons).ok());
  coupons.id = "j";
  ASSERT_TRUE(SetUpActivity(coupons).ok());
  for (uint32_t round = 0; round < 2; ++round) {
    Batch batch = MixedBatch(round + 99, "r" + std::to_string(round) + "-");
    ExpectSameAsSingles("i", "j", batch);
    if (HasFatalFailure()) return;
    ExpectSameStored("i", "j");
  }
  const auto status = Status("i");
  EXPECT_EQ(status.remaining, 0);
  EXPECT_EQ(status.reserved, 50);
  // Each item handed out once.
  auto orders = server_->Command({"HVALS", Keys("i").orders()});
  std::multiset<std::string> items;
  for (size_t k = 0; k < orders->elements; ++k) {
    auto record = ParseOrderRecord("x", orders->element[k]->str);
    ASSERT_TRUE(record.has_value());
    items.insert(record->items.begin(), record->items.end());
  }
  EXPECT_EQ(items.size(), 50u);
  EXPECT_EQ(std::set<std::string>(items.begin(), items.end()).size(), 50u);
}

TEST_F(SaleBatchTest, OtherOutcomesAndBadInputInOneBatch) {
  ASSERT_TRUE(SetUpActivity(Activity("w", 1)).ok());
  ASSERT_TRUE(SetUpActivity(Activity("x", 1)).ok());
  Batch batch;
  batch.Add("o1", "alice", 1, "", 999);   // not started
  batch.Add("o2", "alice", 1);            // reserved
  batch.Add("bad id!", "bob", 1);         // refused before Redis
  batch.Add("o3", "bob", 1);              // sold out
  batch.Add("o2", "mallory", 1);          // order id of another user
  batch.Add("o2", "alice", 1);            // replay
  batch.Add("o4", "carol", 0);            // bad quantity
  batch.Add("o5", "carol", 1, "", 2000);  // ended
  ExpectSameAsSingles("w", "x", batch);
  ExpectSameStored("w", "x");
  auto results = RunBatch("w", batch);  // all again: every one replays or decides the same
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), 8u);
  EXPECT_EQ((*results)[1]->outcome, Outcome::kReserved);
  EXPECT_TRUE((*results)[1]->replayed);
  EXPECT_EQ((*results)[2].error().code, base::ErrorCode::kInvalidArgument);
  EXPECT_EQ((*results)[3]->outcome, Outcome::kSoldOut);
  EXPECT_EQ((*results)[4]->outcome, Outcome::kConflict);
  EXPECT_EQ((*results)[6].error().code, base::ErrorCode::kInvalidArgument);

  // Unknown activity, an empty batch.
  auto unknown = RunBatch("nope", batch);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ((*unknown)[1]->outcome, Outcome::kUnknownActivity);
  Batch empty;
  auto none = RunBatch("w", empty);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(SaleBatchTest, RedisDownIsTheWholeCallsError) {
  ASSERT_TRUE(SetUpActivity(Activity("d", 10)).ok());
  Stop(io_, connection_);
  Batch batch;
  batch.Add("o1", "alice", 1);
  batch.Add("o2", "bob", 1);
  auto results = RunBatch("d", batch);
  EXPECT_FALSE(results.ok());
  connection_ = testing::Connect(io_, server_->unix_url());
  runner_ = std::make_unique<redis::ScriptRunner>(connection_, Scripts());
  scripts_ = std::make_unique<ActivityScripts>(*runner_, ns_);
}

// A command failing midway (here the XADD: the stream key holds a string) stops the script
// after some writes; an idempotency key must not be among them, or a retry with it would replay
// a reservation that has no intent (never persisted). Batches of two and of one.
TEST_F(SaleBatchTest, AnIdempotencyKeyIsNotSetWhenTheIntentCouldNotBeWritten) {
  ASSERT_TRUE(SetUpActivity(Activity("f", 10)).ok());
  const ActivityKeys keys(ns_, "f");
  ASSERT_EQ(server_->String({"SET", keys.stream(), "not-a-stream"}), "OK");
  Batch two;
  two.Add("o1", "alice", 1, "token-1");
  two.Add("o2", "bob", 1, "token-2");
  EXPECT_FALSE(RunBatch("f", two).ok()) << "the XADD should have failed";
  Batch one;
  one.Add("o3", "carol", 1, "token-3");
  EXPECT_FALSE(RunBatch("f", one).ok()) << "the XADD should have failed";
  for (const char* token : {"token-1", "token-2", "token-3"}) {
    EXPECT_EQ(server_->Integer({"EXISTS", keys.Idempotency(token)}), 0)
        << token << ": a retry would replay a reservation without its intent";
  }
}

// Draws: 64 per batch, users from a pool of 16 with a limit of 3 draws, prizes that run out.
TEST_F(SaleBatchTest, DrawBatchesDecideAsSingleDraws) {
  core::Activity lottery = Activity("la", 0, 3);
  lottery.lottery =
      core::Lottery{.prizes = {{"mug", "Mug", 3, 10}, {"pen", "Pen", 5, 15}, {"car", "Car", 1, 1}},
                    .no_prize_weight = 4};
  lottery.stock = lottery.lottery->TotalStock();
  ASSERT_TRUE(SetUpActivity(lottery).ok());
  lottery.id = "lb";
  ASSERT_TRUE(SetUpActivity(lottery).ok());
  std::mt19937_64 random(5);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::string> orders, users, tokens;
    for (int i = 0; i < 64; ++i) {
      orders.push_back("d" + std::to_string(round) + "-" + std::to_string(i));
      if (i > 0 && random() % 10 == 0) orders.back() = orders[random() % orders.size()];
      users.push_back("u" + std::to_string(random() % 16));
      tokens.push_back(random() % 8 == 0 ? "k" + std::to_string(random() % 4) : "");
    }
    std::vector<DrawRequest> requests;
    for (int i = 0; i < 64; ++i) {
      requests.push_back({.order_id = orders[i],
                          .user_id = users[i],
                          .now_ms = 1500,
                          .pick = random() % kDrawRandomBound,
                          .fallback = random() % kDrawRandomBound,
                          .idempotency_token = tokens[i],
                          .idempotency_ttl_ms = tokens[i].empty() ? 0 : 60000});
    }
    requests[7].order_id = "bad id!";
    auto batched = io_.Run(scripts_->AsyncDrawBatch("la", std::span<const DrawRequest>(requests),
                                                    boost::asio::use_awaitable));
    ASSERT_TRUE(batched.ok()) << batched.error().ToString();
    ASSERT_EQ(batched->size(), requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      SCOPED_TRACE("draw " + std::to_string(i));
      auto single = io_.Run(scripts_->AsyncDraw("lb", requests[i], boost::asio::use_awaitable));
      const auto& b = (*batched)[i];
      ASSERT_EQ(b.ok(), single.ok());
      if (!b.ok()) {
        EXPECT_EQ(b.error().code, single.error().code);
        continue;
      }
      EXPECT_EQ(b->outcome, single->outcome);
      EXPECT_EQ(b->replayed, single->replayed);
      EXPECT_EQ(b->remaining, single->remaining);
      EXPECT_EQ(b->draws, single->draws);
      EXPECT_EQ(b->order_id, single->order_id);
      EXPECT_EQ(b->prize_id, single->prize_id);
    }
    EXPECT_EQ((*batched)[7].error().code, base::ErrorCode::kInvalidArgument);
  }
  const auto a = Status("la");
  EXPECT_EQ(a.remaining, Status("lb").remaining);
  EXPECT_GE(a.remaining, 0);
  EXPECT_EQ(a.reserved + a.remaining, a.total);
  EXPECT_EQ(a.stream_length, a.reserved);  // one intent per prize won
  // Nobody drew more than the limit.
  auto buyers = server_->Command({"HVALS", Keys("la").buyers()});
  for (size_t k = 0; k < buyers->elements; ++k) EXPECT_LE(std::stoll(buyers->element[k]->str), 3);
}

// The optimistic path undoes what it did when the order id was recorded before: a retry that
// passes every check (stock left, the user under the limit) replays and leaves the stock, the
// items' order and the buyer's count as they were; so do retries after a sell-out, at the limit
// and after a close.
TEST_F(SaleBatchTest, ARetryOfARecordedOrderReplaysAndUndoesEverything) {
  auto coupons = Activity("u", 0, 3);
  coupons.kind = core::StockKind::kItemised;
  coupons.items = {"A", "B", "C", "D"};
  ASSERT_TRUE(SetUpActivity(coupons).ok());
  auto first = Reserve("u", "o1", "alice", 2);
  ASSERT_EQ(first->outcome, Outcome::kReserved);
  EXPECT_EQ(first->items, (std::vector<std::string>{"A", "B"}));
  const auto items = [&] {
    auto list = server_->Command({"LRANGE", Keys("u").items(), "0", "-1"});
    std::vector<std::string> out;
    for (size_t i = 0; i < list->elements; ++i) out.emplace_back(list->element[i]->str);
    return out;
  };
  auto again = Reserve("u", "o1", "alice", 1);  // passes every check, then finds o1
  EXPECT_EQ(again->outcome, Outcome::kReserved);
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->items, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(items(), (std::vector<std::string>{"C", "D"}));
  EXPECT_EQ(server_->Integer({"HGET", Keys("u").buyers(), "alice"}), 2);
  EXPECT_EQ(Reserve("u", "o1", "bob", 1)->outcome, Outcome::kConflict);
  EXPECT_EQ(server_->Integer({"HEXISTS", Keys("u").buyers(), "bob"}), 0);
  EXPECT_EQ(items(), (std::vector<std::string>{"C", "D"}));

  ASSERT_EQ(Reserve("u", "o2", "carol", 2)->outcome, Outcome::kReserved);  // sold out now
  EXPECT_EQ(Reserve("u", "o3", "dave", 1)->outcome, Outcome::kSoldOut);
  EXPECT_EQ(server_->Integer({"HEXISTS", Keys("u").buyers(), "dave"}), 0);
  EXPECT_TRUE(Reserve("u", "o1", "alice", 1)->replayed);  // sold out
  EXPECT_TRUE(Reserve("u", "o1", "alice", 3)->replayed);  // over the limit
  EXPECT_EQ(Reserve("u", "o4", "alice", 2)->outcome, Outcome::kLimitReached);
  EXPECT_EQ(server_->Integer({"HGET", Keys("u").buyers(), "alice"}), 2);
  coupons.open = false;
  ASSERT_TRUE(
      io_.Run(scripts_->AsyncSetup(coupons, SetupMode::kDefinitionOnly, boost::asio::use_awaitable))
          .ok());
  auto closed = Reserve("u", "o1", "alice", 1);
  EXPECT_EQ(closed->outcome, Outcome::kReserved);
  EXPECT_TRUE(closed->replayed);
  EXPECT_EQ(Reserve("u", "o5", "erin", 1)->outcome, Outcome::kClosed);
  const auto status = Status("u");
  EXPECT_EQ(status.remaining, 0);
  EXPECT_EQ(status.reserved, 4);
  EXPECT_EQ(status.buyers, 2);  // alice and carol: no count left behind by an undo
  EXPECT_EQ(status.stream_length, 2);
}

}  // namespace
}  // namespace flashsale::keyspace
