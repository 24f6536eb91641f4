// The admission path's decisions and the retry helper, with no server: a ServiceContext over a
// connection that is never started (no rate limits, so no call reaches Redis), an SQLite file the
// path never reads, a manual clock and a seeded random source.

#include "service/admission.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>
#include <filesystem>
#include <optional>
#include <vector>

#include "base/ids.h"
#include "keyspace/embedded_scripts.h"
#include "service/purchase.h"
#include "service/redis_watch.h"
#include "store/sqlite_store.h"

namespace flashsale::service {
namespace {

namespace asio = boost::asio;
using base::ErrorCode;
using core::Outcome;

constexpr int64_t kNow = 1'800'000'000'000;
constexpr uint64_t kSeed = 7;

// Runs a coroutine to its end on a fresh io_context.
template <typename T>
asio::awaitable<void> Into(asio::awaitable<T> task, std::optional<T>& out) {
  out.emplace(co_await std::move(task));
}
template <typename T>
T RunToEnd(asio::awaitable<T> task) {
  asio::io_context io;
  std::optional<T> result;
  asio::co_spawn(io, Into(std::move(task), result), [](std::exception_ptr error) {
    if (error) std::rethrow_exception(error);
  });
  io.run();
  return std::move(*result);
}

core::Activity Sale(std::string id) {
  core::Activity activity;
  activity.id = std::move(id);
  activity.start_ms = kNow - 1000;
  activity.end_ms = kNow + 60'000;
  activity.per_user_limit = 1;
  activity.stock = 10;
  return activity;
}

core::Activity Lottery(std::string id) {
  core::Activity activity = Sale(std::move(id));
  activity.lottery = core::Lottery{.prizes = {{"cup", "A cup", 1, 5}}, .no_prize_weight = 1};
  return activity;
}

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("flashsale-admission-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    auto store = store::SqliteStore::Open((dir_ / "flashsale.db").string());
    ASSERT_TRUE(store.ok()) << store.error().ToString();
    store_ = std::move(*store);
    settings_.key_namespace = "admission-test";
    settings_.secret = "secret";
    connection_ = redis::Connection::Create(io_.get_executor(), redis::ConnectionOptions{});
    runner_ = std::make_unique<redis::ScriptRunner>(connection_, keyspace::Scripts());
    std::vector<store::ActivityRecord> records;
    for (auto activity : {Sale("sale"), Lottery("lottery")}) {
      records.push_back(store::ActivityRecord{.activity = std::move(activity), .total_units = 10});
    }
    core::Activity closed = Sale("closed");
    closed.open = false;
    records.push_back(store::ActivityRecord{.activity = std::move(closed)});
    registry_.Publish(std::move(records));
    context_ = std::make_unique<ServiceContext>(settings_, *runner_, *store_, io_.get_executor(),
                                                registry_, clock_, random_);
  }
  void TearDown() override {
    context_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  base::Result<std::variant<Refusal, Admitted>> Admit(std::string_view activity,
                                                      Use use = Use::kPurchase,
                                                      std::string_view key = {}) {
    const AdmissionRequest request{
        .activity_id = activity, .user_id = "alice", .idempotency_key = key};
    return RunToEnd(service::Admit(*context_, request, use));
  }
  // The refusal Admit gave (fails the test when it gave something else).
  Refusal RefusalOf(std::string_view activity, Use use = Use::kPurchase) {
    auto admitted = Admit(activity, use);
    EXPECT_TRUE(admitted.ok() && std::holds_alternative<Refusal>(*admitted));
    return admitted.ok() && std::holds_alternative<Refusal>(*admitted)
               ? std::get<Refusal>(*admitted)
               : Refusal{};
  }

  std::filesystem::path dir_;
  asio::io_context io_;
  std::unique_ptr<store::SqliteStore> store_;
  ServiceSettings settings_;
  base::ManualClock clock_{kNow};
  base::SeededRandom random_{kSeed};
  ActivityRegistry registry_;
  std::shared_ptr<redis::Connection> connection_;
  std::unique_ptr<redis::ScriptRunner> runner_;
  std::unique_ptr<ServiceContext> context_;
};

TEST(CheckRequestTest, RefusesBadUsersQuantitiesAndLongKeys) {
  EXPECT_TRUE(CheckRequest({.activity_id = "a", .user_id = "alice"}, Use::kPurchase).ok());
  EXPECT_FALSE(CheckRequest({.activity_id = "a", .user_id = ""}, Use::kPurchase).ok());
  EXPECT_FALSE(CheckRequest({.activity_id = "a", .user_id = "a b"}, Use::kDraw).ok());
  EXPECT_FALSE(
      CheckRequest({.activity_id = "a", .user_id = "alice", .quantity = 0}, Use::kPurchase).ok());
  // A draw is always one: the quantity field is not its business.
  EXPECT_TRUE(
      CheckRequest({.activity_id = "a", .user_id = "alice", .quantity = 0}, Use::kDraw).ok());
  const std::string key128(128, 'k');
  const std::string key129(129, 'k');
  EXPECT_TRUE(
      CheckRequest({.activity_id = "a", .user_id = "alice", .idempotency_key = key128}, Use::kDraw)
          .ok());
  auto long_key = CheckRequest({.activity_id = "a", .user_id = "alice", .idempotency_key = key129},
                               Use::kPurchase);
  ASSERT_FALSE(long_key.ok());
  EXPECT_EQ(long_key.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(long_key.error().message, "Idempotency-Key is over 128 bytes");
}

TEST(CheckKindTest, ALotteryIsDrawnAndASaleBought) {
  EXPECT_TRUE(CheckKind(Sale("s"), Use::kPurchase).ok());
  EXPECT_TRUE(CheckKind(Lottery("l"), Use::kDraw).ok());
  auto bought = CheckKind(Lottery("l"), Use::kPurchase);
  ASSERT_FALSE(bought.ok());
  EXPECT_EQ(bought.error().message,
            "activity 'l' is a lottery: draw with POST /api/v1/activities/l/draw");
  auto drawn = CheckKind(Sale("s"), Use::kDraw);
  ASSERT_FALSE(drawn.ok());
  EXPECT_EQ(drawn.error().message,
            "activity 's' is a sale: buy with POST /api/v1/activities/s/purchase");
}

TEST(RefuseByStateTest, ClosedThenWindowThenSoldOut) {
  core::Activity sale = Sale("s");
  EXPECT_FALSE(RefuseByState(sale, kNow, false).has_value());
  auto sold_out = RefuseByState(sale, kNow, true);
  ASSERT_TRUE(sold_out.has_value());
  EXPECT_EQ(sold_out->outcome, Outcome::kSoldOut);
  EXPECT_EQ(sold_out->local, LocalReason::kSoldOut);
  auto before = RefuseByState(sale, sale.start_ms - 1, true);
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->outcome, Outcome::kNotStarted);
  EXPECT_EQ(before->local, LocalReason::kWindow);
  EXPECT_FALSE(RefuseByState(sale, sale.start_ms, false).has_value());  // start is inclusive
  auto after = RefuseByState(sale, sale.end_ms, false);                 // end is exclusive
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->outcome, Outcome::kEnded);
  sale.open = false;
  auto closed = RefuseByState(sale, sale.end_ms, true);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->outcome, Outcome::kClosed);
  EXPECT_EQ(closed->local, LocalReason::kClosed);
}

TEST(RefuseByEarlierLimitTest, InForceUntilItsTime) {
  EXPECT_FALSE(RefuseByEarlierLimit(0, kNow).has_value());
  EXPECT_FALSE(RefuseByEarlierLimit(kNow, kNow).has_value());
  auto refused = RefuseByEarlierLimit(kNow + 250, kNow);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->outcome, Outcome::kRateLimited);
  EXPECT_EQ(refused->local, LocalReason::kRateLimited);
  EXPECT_EQ(refused->retry_after_ms, 250);
}

TEST_F(AdmissionTest, UnknownActivityIsRefusedLocally) {
  const Refusal refusal = RefusalOf("nope");
  EXPECT_EQ(refusal.outcome, Outcome::kUnknownActivity);
  EXPECT_EQ(refusal.local, LocalReason::kUnknownActivity);
}

TEST_F(AdmissionTest, TheOtherKindIsBadInput) {
  auto bought = Admit("lottery", Use::kPurchase);
  ASSERT_FALSE(bought.ok());
  EXPECT_EQ(bought.error().code, ErrorCode::kInvalidArgument);
  auto drawn = Admit("sale", Use::kDraw);
  ASSERT_FALSE(drawn.ok());
  EXPECT_EQ(drawn.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(AdmissionTest, ClosedAndWindowFollowTheInjectedClock) {
  EXPECT_EQ(RefusalOf("closed").outcome, Outcome::kClosed);
  clock_.Set(kNow + 60'000);
  const Refusal ended = RefusalOf("sale");
  EXPECT_EQ(ended.outcome, Outcome::kEnded);
  EXPECT_EQ(ended.local, LocalReason::kWindow);
}

TEST_F(AdmissionTest, ASoldOutFlagRefusesUntilItLapses) {
  ASSERT_TRUE(Admit("sale").ok());  // this thread's first snapshot (a new one clears the flags)
  context_->MarkSoldOut("sale");
  const Refusal sold_out = RefusalOf("sale");
  EXPECT_EQ(sold_out.outcome, Outcome::kSoldOut);
  EXPECT_EQ(sold_out.local, LocalReason::kSoldOut);
  auto lottery = Admit("lottery", Use::kDraw);  // the flag is the sale's only
  ASSERT_TRUE(lottery.ok());
  EXPECT_TRUE(std::holds_alternative<Admitted>(*lottery));
  clock_.Advance(settings_.sold_out_ttl_ms);
  auto admitted = Admit("sale");
  ASSERT_TRUE(admitted.ok());
  EXPECT_TRUE(std::holds_alternative<Admitted>(*admitted));
}

TEST_F(AdmissionTest, AFrozenGateRefusesEveryUse) {
  RedisWatch watch(clock_);  // frozen until a repair is confirmed
  settings_.redis_watch = &watch;
  for (auto [activity, use] : {std::pair{"sale", Use::kPurchase}, {"lottery", Use::kDraw}}) {
    auto refused = Admit(activity, use);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
    EXPECT_EQ(refused.error().message, kFrozenMessage);
  }
  std::string metrics;
  watch.AppendPrometheus(metrics);
  EXPECT_NE(metrics.find("flashsale_redis_frozen_refusals_total 2\n"), std::string::npos);
  settings_.redis_watch = nullptr;
}

// A retry with an Idempotency-Key goes past the gate to its replay, but not past the freeze: the
// purchase never reaches Redis (whose connection here is not even started).
TEST_F(AdmissionTest, AFrozenGateAnswersARetryWithAKeyToo) {
  RedisWatch watch(clock_);
  settings_.redis_watch = &watch;
  const AdmissionRequest retry{.activity_id = "closed", .user_id = "alice", .idempotency_key = "k"};
  auto answered = RunToEnd(service::Purchase(*context_, retry));
  ASSERT_FALSE(answered.ok());
  EXPECT_EQ(answered.error().message, kFrozenMessage);
  settings_.redis_watch = nullptr;
}

TEST_F(AdmissionTest, OnlyARefusalOfAKnownActivityWithAKeyIsReplayable) {
  const AdmissionRequest keyed{.activity_id = "closed", .user_id = "alice", .idempotency_key = "k"};
  const AdmissionRequest plain{.activity_id = "closed", .user_id = "alice"};
  const Refusal closed = RefusalOf("closed");
  EXPECT_TRUE(Replayable(keyed, closed));
  EXPECT_FALSE(Replayable(plain, closed));
  EXPECT_FALSE(Replayable(keyed, RefusalOf("ghost")));
  EXPECT_TRUE(Replayable(keyed, Refusal{.outcome = Outcome::kRateLimited}));  // Redis's limiter
}

TEST_F(AdmissionTest, ARateLimitRefusalInForceIsAnsweredLocally) {
  core::Activity limited = Sale("limited");
  limited.user_rate = core::RateLimit{.per_second = 1, .burst = 1};
  registry_.Publish({store::ActivityRecord{.activity = limited, .total_units = 10}});
  const keyspace::ActivityKeys keys(settings_.key_namespace, "limited");
  context_->RememberRefusal(keys.RateLimit("user", context_->KeyToken("alice")), kNow + 1500);
  const Refusal refusal = RefusalOf("limited");
  EXPECT_EQ(refusal.outcome, Outcome::kRateLimited);
  EXPECT_EQ(refusal.local, LocalReason::kRateLimited);
  EXPECT_EQ(refusal.retry_after_ms, 1500);
}

TEST_F(AdmissionTest, AnAdmittedRequestCarriesReplayableIds) {
  auto admitted = Admit("lottery", Use::kDraw, "key-1");
  ASSERT_TRUE(admitted.ok());
  ASSERT_TRUE(std::holds_alternative<Admitted>(*admitted));
  const Admitted& admission = std::get<Admitted>(*admitted);
  EXPECT_EQ(admission.record->activity.id, "lottery");
  EXPECT_EQ(admission.now_ms, kNow);
  // The same clock and seed give the same order id: a draw can be replayed.
  base::SeededRandom replay(kSeed);
  EXPECT_EQ(admission.order_id, base::OrderIdGenerator(clock_, replay).Next());
  EXPECT_EQ(admission.idempotency_token.size(), 32u);
  const AdmissionRequest same{.user_id = "alice", .idempotency_key = "key-1"};
  const AdmissionRequest other_user{.user_id = "bob", .idempotency_key = "key-1"};
  EXPECT_EQ(admission.idempotency_token, IdempotencyToken(*context_, same));
  EXPECT_NE(admission.idempotency_token, IdempotencyToken(*context_, other_user));
  EXPECT_EQ(IdempotencyToken(*context_, AdmissionRequest{.user_id = "alice"}), "");
}

// --- RetryWhileUnknown ---

// An attempt that answers from a script of results, counting its calls.
struct Script {
  std::vector<base::Result<int>> answers;
  int calls = 0;
  asio::awaitable<base::Result<int>> Next() { co_return answers.at(calls++); }
};

base::Result<int> Retry(Script& script, int64_t retries) {
  return RunToEnd(RetryWhileUnknown<int>(retries, [&] { return script.Next(); }));
}

base::Error Unknown(std::string why) { return {ErrorCode::kUnknownOutcome, std::move(why)}; }

TEST(RetryWhileUnknownTest, ADecidedAttemptIsNotRepeated) {
  Script script{{42}};
  auto result = Retry(script, 2);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 42);
  EXPECT_EQ(script.calls, 1);
}

TEST(RetryWhileUnknownTest, UnknownOutcomesAreRetriedUntilDecided) {
  Script script{{Unknown("timeout 1"), Unknown("timeout 2"), 7}};
  auto result = Retry(script, 2);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 7);
  EXPECT_EQ(script.calls, 3);
}

TEST(RetryWhileUnknownTest, RetriesRunOutAsTheLastUnknownOutcome) {
  Script script{{Unknown("timeout 1"), Unknown("timeout 2"), Unknown("timeout 3"), 7}};
  auto result = Retry(script, 2);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kUnknownOutcome);
  EXPECT_EQ(result.error().message, "timeout 3");
  EXPECT_EQ(script.calls, 3);
}

TEST(RetryWhileUnknownTest, AFailureAfterAnUnknownOutcomeIsStillUnknown) {
  Script script{{Unknown("timeout"), base::Error{ErrorCode::kUnavailable, "refused"}, 7}};
  auto result = Retry(script, 2);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kUnknownOutcome);
  EXPECT_EQ(result.error().message, "timeout; then refused");
  EXPECT_EQ(script.calls, 2);
}

TEST(RetryWhileUnknownTest, AFailureThatDidNothingIsNotRetried) {
  Script script{{base::Error{ErrorCode::kUnavailable, "refused"}, 7}};
  auto result = Retry(script, 2);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(script.calls, 1);
}

TEST(RetryWhileUnknownTest, NoRetriesMeansOneAttempt) {
  Script script{{Unknown("timeout"), 7}};
  auto result = Retry(script, 0);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kUnknownOutcome);
  EXPECT_EQ(script.calls, 1);
}

TEST(UndecidedResultTest, UnknownIsAValueWithTheOrderIdAndOtherErrorsStand) {
  auto unknown = UndecidedResult<PurchaseResult>("o1", Unknown("timeout"));
  ASSERT_TRUE(unknown.ok());
  EXPECT_TRUE(unknown->unknown);
  EXPECT_EQ(unknown->order_id, "o1");
  EXPECT_EQ(unknown->unknown_reason, "timeout");
  auto failed = UndecidedResult<PurchaseResult>("o1", {ErrorCode::kUnavailable, "down"});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kUnavailable);
}

TEST(RefusedResultTest, CarriesTheOutcomeReasonAndRetryAfter) {
  const auto result =
      RefusedResult<PurchaseResult>(Refusal{Outcome::kRateLimited, LocalReason::kRateLimited, 300});
  EXPECT_EQ(result.outcome, Outcome::kRateLimited);
  EXPECT_EQ(result.local, LocalReason::kRateLimited);
  EXPECT_EQ(result.retry_after_ms, 300);
  EXPECT_FALSE(result.unknown);
}

}  // namespace
}  // namespace flashsale::service
