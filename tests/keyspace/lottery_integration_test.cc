// The lottery scripts against a real redis-server: outcomes, the fall-through rule, draw limits,
// replays, observed prize frequencies against the weights (chi-square at a fixed seed), and no
// prize over-issued under 64-way contention.

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "base/random.h"
#include "keyspace/activity_fixture.h"
#include "keyspace/draw_queue.h"
#include "support/reserve_load.h"

namespace flashsale::keyspace {
namespace {

using core::Outcome;
using testing::ActivityFixture;

// A field of an XRANGE entry ({id, {name, value, ...}}); empty if absent.
std::string FieldOf(const redisReply* entry, const std::string& name) {
  const auto fields = testing::EntryFields(entry);
  const auto found = fields.find(name);
  return found == fields.end() ? std::string() : found->second;
}

class LotteryTest : public ActivityFixture {
 protected:
  // An open lottery over [1000, 2000).
  static core::Activity Lottery(std::string id, std::vector<core::Prize> prizes,
                                int64_t no_prize_weight, int64_t limit = 1) {
    core::Activity activity = Activity(std::move(id), 0, limit);
    activity.lottery =
        core::Lottery{.prizes = std::move(prizes), .no_prize_weight = no_prize_weight};
    activity.stock = activity.lottery->TotalStock();
    return activity;
  }

  base::Result<DrawResult> Draw(const std::string& activity, const std::string& order,
                                const std::string& user, uint64_t pick, uint64_t fallback = 0,
                                int64_t now_ms = 1500, const std::string& idempotency_token = "") {
    DrawRequest request{.order_id = order,
                        .user_id = user,
                        .now_ms = now_ms,
                        .pick = pick,
                        .fallback = fallback,
                        .idempotency_token = idempotency_token,
                        .idempotency_ttl_ms = idempotency_token.empty() ? 0 : 60000};
    return io_.Run(scripts_->AsyncDraw(activity, request, boost::asio::use_awaitable));
  }
  int64_t PrizeLeft(const std::string& activity, const std::string& prize) {
    return server_->Integer({"HGET", Keys(activity).prizes(), prize});
  }
};

// The admission queue's per-user bound reads the state of the user's pending tickets, each key
// given to the script in KEYS (lottery_enqueue.lua): a ticket its draw decided no longer counts
// as pending, so the user may queue again, up to the draws left.
TEST_F(LotteryTest, AQueuedTicketThatWasDrawnNoLongerCountsAsPending) {
  ASSERT_TRUE(SetUpActivity(Lottery("queued", {{"mug", "Mug", 1, 10}}, 0, 3)).ok());
  DrawQueue queue(*runner_, ns_);
  auto enqueue = [&](const std::string& ticket) {
    const EnqueueRequest request{.ticket_id = ticket,
                                 .user_id = "u",
                                 .now_ms = 1500,
                                 .capacity = 100,
                                 .ticket_ttl_ms = 60'000,
                                 .user_token = "token-u"};
    auto queued = io_.Run(queue.Enqueue("queued", request));
    EXPECT_TRUE(queued.ok()) << queued.error().ToString();
    return queued.ok() ? queued->outcome : EnqueueOutcome::kUnknownActivity;
  };
  ASSERT_EQ(enqueue("t1"), EnqueueOutcome::kQueued);
  ASSERT_EQ(enqueue("t2"), EnqueueOutcome::kQueued);
  // t1's draw (the ticket is its idempotency key): 1 draw made, only t2 pending.
  auto drawn = Draw("queued", "t1", "u", 0, 0, 1500, "t1");
  ASSERT_TRUE(drawn.ok()) << drawn.error().ToString();
  ASSERT_EQ(drawn->outcome, Outcome::kReserved);
  EXPECT_EQ(enqueue("t3"), EnqueueOutcome::kQueued) << "1 draw made + 1 pending of 3";
  EXPECT_EQ(enqueue("t4"), EnqueueOutcome::kLimitReached) << "1 draw made + 2 pending";
  ASSERT_TRUE(Draw("queued", "t2", "u", 0, 0, 1500, "t2").ok());
  ASSERT_TRUE(Draw("queued", "t3", "u", 0, 0, 1500, "t3").ok());
  EXPECT_EQ(enqueue("t5"), EnqueueOutcome::kLimitReached) << "3 draws made";
  // Another user: the queue has room.
  const EnqueueRequest other{.ticket_id = "v1",
                             .user_id = "v",
                             .now_ms = 1500,
                             .capacity = 100,
                             .ticket_ttl_ms = 60'000,
                             .user_token = "token-v"};
  EXPECT_EQ(io_.Run(queue.Enqueue("queued", other))->outcome, EnqueueOutcome::kQueued);
}

TEST_F(LotteryTest, SetupLoadsPrizesOnceAndStatusCountsThem) {
  auto lottery = Lottery("spring", {{"gold", "Gold", 1, 2}, {"mug", "Mug", 9, 5}}, 90);
  auto first = SetUpActivity(lottery);
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_TRUE(first->loaded);
  ASSERT_EQ(Draw("spring", "o1", "alice", 90)->outcome, Outcome::kReserved);  // gold
  // A rerun (prewarm again) never resets the prizes of a running lottery.
  auto again = SetUpActivity(lottery);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->loaded);
  EXPECT_EQ(PrizeLeft("spring", "gold"), 1);
  const ActivityStatus status = Status("spring");
  EXPECT_EQ(status.kind, "lottery");
  EXPECT_EQ(status.total, 7);
  EXPECT_EQ(status.reserved, 1);
  EXPECT_EQ(status.remaining, 6);
  EXPECT_EQ(status.stream_length, 1);
  // A sale's scripts refuse a lottery, and a draw at a sale finds no lottery.
  EXPECT_FALSE(AddStock("spring", 5).ok());
  ASSERT_TRUE(SetUpActivity(Activity("sale", 10)).ok());
  EXPECT_EQ(Draw("sale", "o2", "alice", 0)->outcome, Outcome::kUnknownActivity);
  EXPECT_EQ(server_->Integer({"GET", Keys("sale").stock()}), 10);
}

TEST_F(LotteryTest, OutcomesWindowStateAndUnknown) {
  auto lottery = Lottery("w", {{"p", "P", 1, 10}}, 1);
  ASSERT_TRUE(SetUpActivity(lottery).ok());
  EXPECT_EQ(Draw("w", "o1", "u1", 1, 0, 999)->outcome, Outcome::kNotStarted);
  EXPECT_EQ(Draw("w", "o2", "u1", 1, 0, 2000)->outcome, Outcome::kEnded);
  EXPECT_EQ(Draw("nope", "o3", "u1", 1)->outcome, Outcome::kUnknownActivity);
  lottery.open = false;
  ASSERT_TRUE(SetUpActivity(lottery).ok());
  EXPECT_EQ(Draw("w", "o4", "u1", 1)->outcome, Outcome::kClosed);
  EXPECT_EQ(Status("w").remaining, 10);
  EXPECT_EQ(server_->Integer({"HLEN", Keys("w").buyers()}), 0);
}

TEST_F(LotteryTest, DrawLimitCountsEveryDrawAndWinsCarryTheirDrawNumber) {
  ASSERT_TRUE(SetUpActivity(Lottery("l", {{"p", "P", 1, 10}}, 1, 3)).ok());
  auto first = Draw("l", "o1", "alice", 0);  // target 0 < no-prize weight 1: no prize
  ASSERT_EQ(first->outcome, Outcome::kNoPrize);
  EXPECT_EQ(first->draws, 1);
  auto second = Draw("l", "o2", "alice", 1);  // target 1: the prize
  ASSERT_EQ(second->outcome, Outcome::kReserved);
  EXPECT_EQ(second->prize_id, "p");
  EXPECT_EQ(second->draws, 2);
  EXPECT_EQ(Draw("l", "o3", "alice", 1)->outcome, Outcome::kReserved);
  auto fourth = Draw("l", "o4", "alice", 1);
  EXPECT_EQ(fourth->outcome, Outcome::kLimitReached);
  EXPECT_EQ(fourth->draws, 3);
  EXPECT_EQ(Draw("l", "o5", "bob", 1)->outcome, Outcome::kReserved);

  // Only wins reach the stream, each with the user's draw number.
  auto entries = server_->Command({"XRANGE", Keys("l").stream(), "-", "+"});
  ASSERT_EQ(entries->elements, 3u);
  std::vector<std::string> draws;
  for (size_t i = 0; i < entries->elements; ++i) {
    draws.push_back(FieldOf(entries->element[i], "draw"));
  }
  EXPECT_EQ(draws, (std::vector<std::string>{"2", "3", "1"}));
  EXPECT_EQ(FieldOf(entries->element[0], "items"), "p");
}

TEST_F(LotteryTest, APrizeThatIsOutFallsThroughToThePrizesLeftByWeight) {
  // Weights: no prize 100, rare 1 (target 100), common 99 (targets 101..199).
  ASSERT_TRUE(
      SetUpActivity(Lottery("f", {{"rare", "Rare", 1, 1}, {"common", "Common", 99, 2}}, 100, 10))
          .ok());
  EXPECT_EQ(Draw("f", "o1", "u1", 0)->outcome, Outcome::kNoPrize);
  EXPECT_EQ(Draw("f", "o2", "u1", 100)->prize_id, "rare");
  // rare is out: the same pick falls through to the prizes left (only common).
  auto fell = Draw("f", "o3", "u1", 100, 7);
  ASSERT_EQ(fell->outcome, Outcome::kReserved);
  EXPECT_EQ(fell->prize_id, "common");
  // "No prize" keeps its share while any prize is left ...
  EXPECT_EQ(Draw("f", "o4", "u1", 200)->outcome, Outcome::kNoPrize);
  EXPECT_EQ(Draw("f", "o5", "u1", 150)->prize_id, "common");
  // ... and every prize gone is -1, whatever the pick.
  auto gone = Draw("f", "o6", "u1", 0);
  EXPECT_EQ(gone->outcome, Outcome::kSoldOut);
  EXPECT_EQ(gone->remaining, 0);
  EXPECT_EQ(PrizeLeft("f", "rare"), 0);
  EXPECT_EQ(PrizeLeft("f", "common"), 0);
}

TEST_F(LotteryTest, RetriesReplayTheFirstDraw) {
  ASSERT_TRUE(SetUpActivity(Lottery("r", {{"a", "A", 1, 5}, {"b", "B", 1, 5}}, 0, 5)).ok());
  auto won = Draw("r", "o1", "alice", 1);
  ASSERT_EQ(won->prize_id, "b");
  // The same order id (a reply that never came): the same prize, nothing more taken.
  auto again = Draw("r", "o1", "alice", 0);
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->prize_id, "b");
  EXPECT_EQ(Draw("r", "o1", "mallory", 0)->outcome, Outcome::kConflict);
  // An idempotency key: the first outcome, with its order id, for every retry.
  auto keyed = Draw("r", "o2", "alice", 0, 0, 1500, "tok");
  ASSERT_EQ(keyed->prize_id, "a");
  auto retry = Draw("r", "o3", "alice", 1, 0, 1500, "tok");
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->order_id, "o2");
  EXPECT_EQ(retry->prize_id, "a");
  EXPECT_EQ(Status("r").remaining, 8);
  EXPECT_EQ(server_->Integer({"HGET", Keys("r").buyers(), "alice"}), 2);
}

TEST_F(LotteryTest, ObservedFrequenciesMatchTheWeights) {
  // Stock far above the draws, so every draw chooses by weight alone.
  const std::map<std::string, int64_t> weights = {{"", 10}, {"a", 1}, {"b", 3}, {"c", 6}};
  ASSERT_TRUE(
      SetUpActivity(
          Lottery("freq",
                  {{"a", "A", 1, 1'000'000}, {"b", "B", 3, 1'000'000}, {"c", "C", 6, 1'000'000}},
                  10, 1'000'000))
          .ok());
  testing::ReserveLoadOptions options;
  options.url = server_->unix_url();
  options.key_namespace = ns_;
  options.activity_id = "freq";
  options.connections = 1;  // one caller: the same picks every run (a fixed seed)
  options.callers_per_connection = 1;
  options.attempts = 20000;
  options.users = 1000;
  options.now_ms = 1500;
  options.draw = true;
  options.seed = 20261129;
  const auto report = testing::RunReserveLoad(options);
  ASSERT_EQ(report.Unresolved(), 0);
  std::map<std::string, int64_t> observed;
  for (const auto& attempt : report.attempts) {
    ASSERT_TRUE(attempt.outcome == Outcome::kReserved || attempt.outcome == Outcome::kNoPrize);
    ++observed[attempt.items.empty() ? "" : attempt.items[0]];
  }
  // Pearson's chi-square, 3 degrees of freedom: 16.27 is the 0.999 quantile.
  double chi_square = 0;
  for (const auto& [prize, weight] : weights) {
    const double expected = static_cast<double>(options.attempts) * weight / 20.0;
    const double diff = static_cast<double>(observed[prize]) - expected;
    chi_square += diff * diff / expected;
  }
  EXPECT_LT(chi_square, 16.27) << "no prize " << observed[""] << ", a " << observed["a"] << ", b "
                               << observed["b"] << ", c " << observed["c"];
  EXPECT_EQ(server_->Integer({"XLEN", Keys("freq").stream()}), options.attempts - observed[""]);
}

TEST_F(LotteryTest, NoPrizeIsOverIssuedUnderSixtyFourWayContention) {
  const std::map<std::string, int64_t> stock = {{"a", 50}, {"b", 150}, {"c", 300}};
  ASSERT_TRUE(
      SetUpActivity(
          Lottery("rush", {{"a", "A", 1, 50}, {"b", "B", 2, 150}, {"c", "C", 3, 300}}, 6, 2))
          .ok());
  testing::ReserveLoadOptions options;
  options.url = server_->unix_url();
  options.key_namespace = ns_;
  options.activity_id = "rush";
  options.connections = 4;
  options.callers_per_connection = 16;
  options.attempts = 20000;
  options.users = 3000;
  options.now_ms = 1500;
  options.draw = true;
  const auto report = testing::RunReserveLoad(options);
  ASSERT_EQ(report.caller_exceptions, 0);
  ASSERT_EQ(report.Unresolved(), 0);
  EXPECT_EQ(report.failed_calls, 0);

  std::map<std::string, int64_t> won;
  std::map<std::string, int64_t> draws_of;
  for (const auto& attempt : report.attempts) {
    if (attempt.outcome == Outcome::kReserved) ++won[attempt.items.at(0)];
    if (attempt.outcome == Outcome::kReserved || attempt.outcome == Outcome::kNoPrize) {
      ++draws_of[attempt.user_id];
    }
  }
  // Plenty of draws for the 500 prizes: every unit is won, none twice.
  EXPECT_EQ(won, stock);
  for (const auto& [user, draws] : draws_of) EXPECT_LE(draws, 2) << user;
  for (const auto& [prize, units] : stock) EXPECT_EQ(PrizeLeft("rush", prize), 0) << prize;
  EXPECT_EQ(server_->Integer({"XLEN", Keys("rush").stream()}), 500);
  EXPECT_GT(report.Count(Outcome::kSoldOut), 0);
  const ActivityStatus status = Status("rush");
  EXPECT_EQ(status.reserved, 500);
  EXPECT_EQ(status.remaining, 0);
}

}  // namespace
}  // namespace flashsale::keyspace
