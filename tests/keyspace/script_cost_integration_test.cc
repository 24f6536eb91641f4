// What the hot scripts cost inside Redis, counted by Redis itself: INFO commandstats after CONFIG
// RESETSTAT counts every command a script runs (each redis.call) beside the EVALSHA. The lean
// reserve makes six commands for a counted reservation alone, and eight for a batch, whatever
// its size: its intents are one stream entry (sale_reserve.lua); a lottery draw five (no
// prize) or seven (a win). One of each is the write sequence's HINCRBY. The figures go to the
// test log with the EVALSHA usec_per_call Redis measured.

#include <iostream>
#include <map>
#include <sstream>

#include "keyspace/activity_fixture.h"

namespace flashsale::keyspace {
namespace {

using core::Outcome;
using testing::ActivityFixture;

class ScriptCostTest : public ActivityFixture {
 protected:
  struct Stats {
    int64_t script_commands = 0;  // every command but EVAL/EVALSHA and the test's own
    int64_t evalsha = 0;
    double evalsha_usec_per_call = 0;
  };
  // INFO commandstats, lines "cmdstat_<name>:calls=N,usec=U,usec_per_call=P,...".
  Stats Read() {
    auto info = server_->Command({"INFO", "commandstats"});
    std::istringstream lines(std::string(info->str, info->len));
    Stats stats;
    for (std::string line; std::getline(lines, line);) {
      if (!line.starts_with("cmdstat_")) continue;
      // Redis 7 counts subcommands apart: cmdstat_config|resetstat.
      const std::string name = line.substr(8, line.find_first_of(":|") - 8);
      const int64_t calls = std::stoll(line.substr(line.find("calls=") + 6));
      if (name == "evalsha" || name == "eval") {
        stats.evalsha += calls;
        if (name == "evalsha") {
          stats.evalsha_usec_per_call = std::stod(line.substr(line.find("usec_per_call=") + 14));
        }
      } else if (name != "config" && name != "info" && name != "script" && name != "hello" &&
                 name != "ping" && name != "client") {
        stats.script_commands += calls;
      }
    }
    return stats;
  }
  void Reset() { server_->Command({"CONFIG", "RESETSTAT"}); }
};

TEST_F(ScriptCostTest, ACountedReservationMakesSixCommands) {
  ASSERT_TRUE(SetUpActivity(Activity("cost", 1000)).ok());
  ASSERT_EQ(Reserve("cost", "warm", "warm")->outcome, Outcome::kReserved);  // SCRIPT LOAD done
  constexpr int kN = 200;
  Reset();
  for (int i = 0; i < kN; ++i) {
    auto r = Reserve("cost", "o" + std::to_string(i), "u" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    ASSERT_EQ(r->outcome, Outcome::kReserved);
  }
  const Stats stats = Read();
  EXPECT_EQ(stats.evalsha, kN);
  const double per_call = static_cast<double>(stats.script_commands) / kN;
  std::cout << "reserve: " << per_call << " redis.calls per reservation, EVALSHA "
            << stats.evalsha_usec_per_call << " usec_per_call\n";
  EXPECT_LE(per_call, 6.0);
  // Five, and the write sequence's HINCRBY (issue "Lost writes caught from the data").
  EXPECT_EQ(stats.script_commands, 6 * kN);
}

TEST_F(ScriptCostTest, ABatchMakesEightCommandsWhateverItsSizeAndOneStreamEntry) {
  ASSERT_TRUE(SetUpActivity(Activity("batch", 1000)).ok());
  ASSERT_EQ(Reserve("batch", "warm", "warm")->outcome, Outcome::kReserved);
  constexpr int kN = 64;
  std::vector<std::string> orders, users;
  for (int i = 0; i < kN; ++i) {
    orders.push_back("o" + std::to_string(i));
    users.push_back("u" + std::to_string(i));
  }
  std::vector<ReserveRequest> requests;
  for (int i = 0; i < kN; ++i) {
    requests.push_back({.order_id = orders[i], .user_id = users[i], .now_ms = 1500});
  }
  Reset();
  auto results = io_.Run(scripts_->AsyncReserveBatch(
      "batch", std::span<const ReserveRequest>(requests), boost::asio::use_awaitable));
  ASSERT_TRUE(results.ok()) << results.error().ToString();
  for (const auto& r : *results) ASSERT_EQ(r->outcome, Outcome::kReserved);
  const Stats stats = Read();
  EXPECT_EQ(stats.evalsha, 1);
  std::cout << "batch of " << kN << ": " << static_cast<double>(stats.script_commands) / kN
            << " redis.calls per reservation, EVALSHA " << stats.evalsha_usec_per_call
            << " usec per call of " << kN << "\n";
  EXPECT_EQ(stats.script_commands, 8);  // seven, and the write sequence's HINCRBY
  // The intents: one entry, the call's write sequence, then an `o` field each, in the batch's
  // order.
  auto entries = server_->Command({"XRANGE", Keys("batch").stream(), "-", "+"});
  ASSERT_EQ(entries->elements, 2u) << "the warm-up's entry and the batch's";
  const redisReply* fields = entries->element[1]->element[1];
  ASSERT_EQ(fields->elements, 2u + 2u * kN);
  EXPECT_STREQ(fields->element[0]->str, "s");
  EXPECT_STREQ(fields->element[1]->str, "0.2");
  for (int i = 0; i < kN; ++i) {
    EXPECT_STREQ(fields->element[2 + 2 * i]->str, "o");
    EXPECT_TRUE(std::string_view(fields->element[2 + 2 * i + 1]->str).starts_with(orders[i] + "|"))
        << i;
  }
}

TEST_F(ScriptCostTest, ADrawMakesFiveCommandsOrSevenForAWin) {
  core::Activity lottery = Activity("draws", 0, 1);
  lottery.lottery = core::Lottery{.prizes = {{"mug", "Mug", 1, 1000}}, .no_prize_weight = 1};
  lottery.stock = lottery.lottery->TotalStock();
  ASSERT_TRUE(SetUpActivity(lottery).ok());
  auto draw = [&](const std::string& user, uint64_t pick) {
    const std::string order = "d-" + user;
    DrawRequest request{.order_id = order, .user_id = user, .now_ms = 1500, .pick = pick};
    return io_.Run(scripts_->AsyncDraw("draws", request, boost::asio::use_awaitable));
  };
  ASSERT_TRUE(draw("warm", 0).ok());
  constexpr int kN = 100;
  // pick % 2: 0 no prize (weight 1 first), 1 the mug.
  Reset();
  for (int i = 0; i < kN; ++i) {
    auto d = draw("n" + std::to_string(i), 0);
    ASSERT_TRUE(d.ok()) << d.error().ToString();
    ASSERT_EQ(d->outcome, Outcome::kNoPrize);
  }
  const Stats none = Read();
  Reset();
  for (int i = 0; i < kN; ++i) {
    auto d = draw("w" + std::to_string(i), 1);
    ASSERT_TRUE(d.ok()) << d.error().ToString();
    ASSERT_EQ(d->outcome, Outcome::kReserved);
  }
  const Stats won = Read();
  std::cout << "draw: " << static_cast<double>(none.script_commands) / kN << " (no prize), "
            << static_cast<double>(won.script_commands) / kN << " (a win) redis.calls, EVALSHA "
            << won.evalsha_usec_per_call << " usec_per_call\n";
  // Four and six, and the write sequence's HINCRBY.
  EXPECT_EQ(none.script_commands, 5 * kN);
  EXPECT_EQ(won.script_commands, 7 * kN);
}

}  // namespace
}  // namespace flashsale::keyspace
