// The purchase and draw use cases with no Redis: the script bindings evaluate their calls on an
// in-process evaluator (tests/support/script_double.h) whose replies the test scripts as Redis's
// RESP bytes, read back by the bindings' real checks. A ServiceContext over a connection that is
// never started (the activities have no rate limits and the requests no Idempotency-Key, so
// nothing but the activity scripts is called), an SQLite file for the record, a manual clock and
// a seeded random source.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "keyspace/embedded_scripts.h"
#include "service/draw.h"
#include "service/purchase.h"
#include "store/sqlite_store.h"
#include "support/script_double.h"

namespace flashsale::service {
namespace {

namespace asio = boost::asio;
using base::ErrorCode;
using core::Outcome;
using testing::InProcessScripts;
using testing::ScriptCallRecord;
namespace resp = testing::resp;

constexpr int64_t kNow = 1'800'000'000'000;
constexpr uint64_t kSeed = 11;
constexpr int64_t kLimit = 3;

// The request arguments of a draw call start after floor_epoch and floor_seq; a reserve call's
// after floor_epoch, floor_seq and now_ms.
constexpr size_t kFirstRequestArg = 2;
constexpr size_t kFirstReserveArg = 3;

core::Activity Sale(std::string id) {
  core::Activity activity;
  activity.id = std::move(id);
  activity.start_ms = kNow - 1000;
  activity.end_ms = kNow + 60'000;
  activity.per_user_limit = kLimit;
  activity.stock = 10;
  return activity;
}

core::Activity Lottery(std::string id) {
  core::Activity activity = Sale(std::move(id));
  activity.lottery = core::Lottery{.prizes = {{"cup", "A tea cup", 1, 5}}, .no_prize_weight = 1};
  return activity;
}

// sale_reserve.lua's reply for one request of one unit: {wepoch wseq left row}, the row an
// integer (bought * 64 + code + 32) for the request's own outcome, else
// "code|replayed|bought|order_id|items"; `left` such that the request's remaining is `remaining`.
std::string ReserveReply(int64_t code, int64_t replayed, int64_t remaining, int64_t bought,
                         std::string_view order_id, std::string_view items = "") {
  if (replayed != 0 || !items.empty() || code < -32 || code > 31) {
    return resp::Array(
        {resp::Int(1), resp::Int(7), resp::Int(remaining),
         resp::Bulk(fmt::format("{}|{}|{}|{}|{}", code, replayed, bought, order_id, items))});
  }
  return resp::Array({resp::Int(1), resp::Int(7), resp::Int(remaining + (code == 1 ? 1 : 0)),
                      resp::Int(bought * 64 + code + 32)});
}

// lottery_draw.lua's reply for one draw: {wepoch wseq (code replayed remaining draws order_id
// prize_id)}.
std::string DrawReply(int64_t code, int64_t replayed, int64_t remaining, int64_t draws,
                      std::string_view order_id, std::string_view prize_id) {
  return resp::Array({resp::Int(1), resp::Int(7), resp::Int(code), resp::Int(replayed),
                      resp::Int(remaining), resp::Int(draws), resp::Bulk(order_id),
                      resp::Bulk(prize_id)});
}

template <typename T>
asio::awaitable<void> Into(asio::awaitable<T> task, std::optional<T>& out) {
  out.emplace(co_await std::move(task));
}

// The order id a reserve or draw call carries (its first request's).
std::string OrderIdOf(const ScriptCallRecord& call) {
  return call.args.at(call.script == "sale_reserve" ? kFirstReserveArg : kFirstRequestArg);
}

class UseCaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("flashsale-use-cases-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    auto store = store::SqliteStore::Open((dir_ / "flashsale.db").string());
    ASSERT_TRUE(store.ok()) << store.error().ToString();
    store_ = std::move(*store);
    settings_.key_namespace = "use-case-test";
    settings_.secret = "secret";
    settings_.redis_retries = 2;
    connection_ = redis::Connection::Create(io_.get_executor(), redis::ConnectionOptions{});
    runner_ = std::make_unique<redis::ScriptRunner>(connection_, keyspace::Scripts());
    std::vector<store::ActivityRecord> records;
    for (auto activity : {Sale("sale"), Lottery("lottery")}) {
      records.push_back(store::ActivityRecord{.activity = std::move(activity), .total_units = 10});
    }
    registry_.Publish(std::move(records));
    context_ = std::make_unique<ServiceContext>(settings_, scripts_, *runner_, *store_,
                                                db_.get_executor(), registry_, clock_, random_);
  }
  void TearDown() override {
    context_.reset();
    db_.join();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Runs a coroutine to its end on the context's executor (where the evaluator answers).
  template <typename T>
  T Run(asio::awaitable<T> task) {
    std::optional<T> result;
    asio::co_spawn(io_, Into(std::move(task), result), [](std::exception_ptr error) {
      if (error) std::rethrow_exception(error);
    });
    io_.restart();
    io_.run();
    return std::move(*result);
  }

  base::Result<PurchaseResult> Buy(int64_t quantity = 1, std::string_view user = "alice") {
    return Run(Purchase(*context_, {.activity_id = "sale", .user_id = user, .quantity = quantity}));
  }
  base::Result<DrawResult> DrawOnce(std::string_view user = "alice") {
    return Run(Draw(*context_, {.activity_id = "lottery", .user_id = user}));
  }

  // Every reserve call answered with `code` and these counts, under the call's own order id.
  void ReserveAnswers(int64_t code, int64_t remaining, int64_t bought) {
    scripts_.Always("sale_reserve", [=](const ScriptCallRecord& call) {
      return InProcessScripts::Answer(ReserveReply(code, 0, remaining, bought, OrderIdOf(call)));
    });
  }

  std::filesystem::path dir_;
  asio::io_context io_;
  asio::thread_pool db_{1};
  InProcessScripts scripts_{io_.get_executor(), keyspace::Scripts()};
  std::unique_ptr<store::SqliteStore> store_;
  ServiceSettings settings_;
  base::ManualClock clock_{kNow};
  base::SeededRandom random_{kSeed};
  ActivityRegistry registry_;
  std::shared_ptr<redis::Connection> connection_;
  std::unique_ptr<redis::ScriptRunner> runner_;
  std::unique_ptr<ServiceContext> context_;
};

// --- Purchase ---

TEST_F(UseCaseTest, AReservationIsReportedWithItsOrderIdAndCounts) {
  ReserveAnswers(1, 9, 1);
  auto result = Buy();
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_EQ(result->outcome, Outcome::kReserved);
  EXPECT_EQ(result->remaining, 9);
  EXPECT_EQ(result->bought, 1);
  EXPECT_EQ(result->quantity, 1);
  EXPECT_FALSE(result->replayed);
  EXPECT_FALSE(result->unknown);
  // One script call, under the id the purchase reports, for this user and quantity.
  const auto calls = scripts_.CallsOf("sale_reserve");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(OrderIdOf(calls[0]), result->order_id);
  EXPECT_EQ(calls[0].args.at(kFirstReserveArg + 1), "alice");
  EXPECT_EQ(calls[0].args.at(kFirstReserveArg + 2), "");  // one unit, at the call's time
  EXPECT_EQ(calls[0].args.at(kFirstReserveArg - 1), std::to_string(kNow));
  EXPECT_TRUE(calls[0].keys.at(0).find("{sale}") != std::string::npos) << calls[0].keys.at(0);
}

TEST_F(UseCaseTest, EachRefusalCodeIsItsOutcome) {
  const std::vector<std::pair<int64_t, Outcome>> cases = {
      {-1, Outcome::kSoldOut},         {-2, Outcome::kNotStarted}, {-3, Outcome::kEnded},
      {-4, Outcome::kUnknownActivity}, {-5, Outcome::kClosed},     {-6, Outcome::kConflict},
  };
  for (const auto& [code, outcome] : cases) {
    SCOPED_TRACE(code);
    scripts_.Then("sale_reserve", ReserveReply(code, 0, 4, 0, "any-order"));
    auto result = Buy(1, "user" + std::to_string(-code));
    ASSERT_TRUE(result.ok()) << result.error().ToString();
    EXPECT_EQ(result->outcome, outcome);
    // The script answers an unknown activity and another user's order id without the units
    // left (the binding reports 0, as the script did when it sent every request's remaining).
    EXPECT_EQ(result->remaining, code == -4 || code == -6 ? 0 : 4);
  }
  EXPECT_EQ(scripts_.CallsOf("sale_reserve").size(), cases.size());
}

TEST_F(UseCaseTest, TheLimitHeldIsLimitReachedAndTooManyAtOnceIsLimitExceeded) {
  scripts_.Then("sale_reserve", ReserveReply(0, 0, 5, kLimit, "x"));
  auto reached = Buy(1);
  ASSERT_TRUE(reached.ok());
  EXPECT_EQ(reached->outcome, Outcome::kLimitReached);
  EXPECT_EQ(reached->bought, kLimit);

  // Holding one of three, asking for three: two more are allowed.
  scripts_.Then("sale_reserve", ReserveReply(0, 0, 5, 1, "x"));
  auto exceeded = Buy(kLimit);
  ASSERT_TRUE(exceeded.ok());
  EXPECT_EQ(exceeded->outcome, Outcome::kLimitExceeded);
  EXPECT_EQ(exceeded->may_buy, kLimit - 1);
}

TEST_F(UseCaseTest, AReplayOfAnotherOrderIsReportedAsReplayedWithItsItems) {
  scripts_.Then("sale_reserve", ReserveReply(1, 1, 5, 2, "earlier-order", "i1 i2"));
  auto result = Buy(2);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_EQ(result->outcome, Outcome::kReserved);  // the record does not have it: Redis's word
  EXPECT_TRUE(result->replayed);
  EXPECT_EQ(result->order_id, "earlier-order");
  EXPECT_EQ(result->items, (std::vector<std::string>{"i1", "i2"}));
}

TEST_F(UseCaseTest, AnUnknownOutcomeIsRetriedWithTheSameOrderIdAndRequest) {
  scripts_.Then("sale_reserve", base::MakeError(ErrorCode::kUnknownOutcome, "no reply"));
  // The retry finds the first call's reservation: replayed under the same order id.
  scripts_.Always("sale_reserve", [](const ScriptCallRecord& call) {
    return InProcessScripts::Answer(ReserveReply(1, 1, 9, 1, OrderIdOf(call)));
  });
  auto result = Buy();
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  const auto calls = scripts_.CallsOf("sale_reserve");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].keys, calls[0].keys);
  EXPECT_EQ(calls[1].args, calls[0].args);  // the same order id, user, quantity and time
  EXPECT_EQ(result->outcome, Outcome::kReserved);
  EXPECT_EQ(result->order_id, OrderIdOf(calls[0]));
  EXPECT_FALSE(result->replayed);  // our own retry is invisible
  EXPECT_FALSE(result->unknown);
}

TEST_F(UseCaseTest, AnOutcomeStillUnknownAfterTheRetriesIsReportedUnknownWithItsOrderId) {
  scripts_.Always("sale_reserve", [](const ScriptCallRecord&) {
    return InProcessScripts::Answer(base::MakeError(ErrorCode::kUnknownOutcome, "no reply"));
  });
  auto result = Buy();
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  const auto calls = scripts_.CallsOf("sale_reserve");
  ASSERT_EQ(calls.size(), static_cast<size_t>(1 + settings_.redis_retries));
  EXPECT_TRUE(result->unknown);
  EXPECT_EQ(result->order_id, OrderIdOf(calls[0]));
}

TEST_F(UseCaseTest, AFailureThatRanNothingIsNotRetried) {
  scripts_.Always("sale_reserve", [](const ScriptCallRecord&) {
    return InProcessScripts::Answer(base::MakeError(ErrorCode::kUnavailable, "not connected"));
  });
  auto result = Buy();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(scripts_.CallsOf("sale_reserve").size(), 1u);
}

TEST_F(UseCaseTest, AReplyNotAsTheScriptDeclaresIsRefused) {
  // The reply lacks `left` and its row: the binding's RETURNS check refuses it.
  scripts_.Then("sale_reserve", resp::Array({resp::Int(1), resp::Int(7)}));
  auto result = Buy();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kProtocol) << result.error().ToString();
  EXPECT_NE(result.error().message.find("sale_reserve"), std::string::npos);
  // An unknown code is refused too.
  scripts_.Then("sale_reserve", ReserveReply(42, 0, 9, 1, "o"));
  auto unknown_code = Buy();
  ASSERT_FALSE(unknown_code.ok());
  EXPECT_EQ(unknown_code.error().code, ErrorCode::kProtocol);
}

TEST_F(UseCaseTest, SoldOutWithNothingLeftIsAnsweredLocallyAfterwards) {
  ReserveAnswers(-1, 0, 0);
  auto first = Buy(1, "alice");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->outcome, Outcome::kSoldOut);
  auto second = Buy(1, "bob");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->outcome, Outcome::kSoldOut);
  EXPECT_EQ(second->local, LocalReason::kSoldOut);
  EXPECT_EQ(scripts_.CallsOf("sale_reserve").size(), 1u);  // the second never reached the script
}

TEST_F(UseCaseTest, SoldOutForTheQuantityWithUnitsLeftStillAsksTheScript) {
  ReserveAnswers(-1, 1, 0);  // one unit left, two asked for
  ASSERT_TRUE(Buy(2, "alice").ok());
  auto second = Buy(1, "bob");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->local, LocalReason::kNone);
  EXPECT_EQ(scripts_.CallsOf("sale_reserve").size(), 2u);
}

// --- Draw ---

TEST_F(UseCaseTest, AWinNamesThePrize) {
  scripts_.Always("lottery_draw", [](const ScriptCallRecord& call) {
    return InProcessScripts::Answer(DrawReply(1, 0, 4, 1, OrderIdOf(call), "cup"));
  });
  auto result = DrawOnce();
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_EQ(result->outcome, Outcome::kReserved);
  EXPECT_EQ(result->prize.id, "cup");
  EXPECT_EQ(result->prize.name, "A tea cup");
  EXPECT_EQ(result->remaining, 4);
  EXPECT_EQ(result->draws, 1);
  const auto calls = scripts_.CallsOf("lottery_draw");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(OrderIdOf(calls[0]), result->order_id);
  EXPECT_EQ(calls[0].args.at(kFirstRequestArg + 1), "alice");
}

TEST_F(UseCaseTest, ALossIsNoPrize) {
  scripts_.Always("lottery_draw", [](const ScriptCallRecord& call) {
    return InProcessScripts::Answer(DrawReply(2, 0, 5, 1, OrderIdOf(call), ""));
  });
  auto result = DrawOnce();
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_EQ(result->outcome, Outcome::kNoPrize);
  EXPECT_EQ(result->prize.id, "");
  EXPECT_FALSE(result->replayed);
}

TEST_F(UseCaseTest, ADrawRetriedAfterAnUnknownOutcomeSendsTheSameNumbers) {
  scripts_.Then("lottery_draw", base::MakeError(ErrorCode::kUnknownOutcome, "no reply"));
  scripts_.Always("lottery_draw", [](const ScriptCallRecord& call) {
    return InProcessScripts::Answer(DrawReply(1, 1, 4, 1, OrderIdOf(call), "cup"));
  });
  auto result = DrawOnce();
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  const auto calls = scripts_.CallsOf("lottery_draw");
  ASSERT_EQ(calls.size(), 2u);
  // The same order id, user, time and random numbers: the script replays the first draw.
  EXPECT_EQ(calls[1].args, calls[0].args);
  EXPECT_EQ(result->outcome, Outcome::kReserved);
  EXPECT_FALSE(result->replayed);
}

TEST_F(UseCaseTest, ADrawReplayedFromAnotherRequestIsReportedReplayed) {
  scripts_.Then("lottery_draw", DrawReply(1, 1, 4, 1, "earlier-draw", "cup"));
  auto result = DrawOnce();
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_TRUE(result->replayed);
  EXPECT_EQ(result->order_id, "earlier-draw");
  EXPECT_EQ(result->prize.name, "A tea cup");
}

TEST_F(UseCaseTest, EveryPrizeGoneIsAnsweredLocallyAfterwards) {
  scripts_.Always("lottery_draw", [](const ScriptCallRecord& call) {
    return InProcessScripts::Answer(DrawReply(-1, 0, 0, 0, OrderIdOf(call), ""));
  });
  ASSERT_TRUE(DrawOnce("alice").ok());
  auto second = DrawOnce("bob");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->outcome, Outcome::kSoldOut);
  EXPECT_EQ(scripts_.CallsOf("lottery_draw").size(), 1u);
}

}  // namespace
}  // namespace flashsale::service
