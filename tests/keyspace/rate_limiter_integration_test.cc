// GCRA rate limiting in Redis: bursts, the steady rate, Retry-After, several limiters in one
// atomic call, and a refused request consuming nothing.

#include "keyspace/activity_fixture.h"
#include "keyspace/rate_limiter.h"

namespace flashsale::keyspace {
namespace {

class RateLimiterTest : public testing::ActivityFixture {
 protected:
  void SetUp() override {
    ActivityFixture::SetUp();
    limiter_ = std::make_unique<RateLimiter>(*runner_);
  }
  RateDecision Check(const std::vector<Limiter>& limiters, int64_t now_ms) {
    auto decision = io_.Run(limiter_->AsyncCheck(limiters, now_ms, boost::asio::use_awaitable));
    if (!decision.ok()) throw std::runtime_error(decision.error().ToString());
    return *decision;
  }
  std::unique_ptr<RateLimiter> limiter_;
};

TEST_F(RateLimiterTest, BurstThenSteadyRate) {
  const std::vector<Limiter> user = {{Keys("rl").RateLimit("user", "u1"), {10, 3}}};  // 10/s
  const int64_t t = 1'000'000;
  // A burst of 3 at one instant, then refused.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Check(user, t).allowed) << i;
  auto refused = Check(user, t);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after_ms, 100);
  // 100 ms later one more fits, not two.
  EXPECT_TRUE(Check(user, t + 100).allowed);
  EXPECT_FALSE(Check(user, t + 100).allowed);
  // Others are not affected.
  EXPECT_TRUE(Check({{Keys("rl").RateLimit("user", "u2"), {10, 3}}}, t + 100).allowed);
}

TEST_F(RateLimiterTest, AllLimitersMustAllowAndARefusalConsumesNothing) {
  const Limiter user{Keys("rl2").RateLimit("user", "u1"), {1, 5}};
  const Limiter address{Keys("rl2").RateLimit("address", "a1"), {1, 1}};
  const int64_t t = 2'000'000;
  EXPECT_TRUE(Check({user, address}, t).allowed);
  // The address limiter (burst 1) refuses; the user limiter must not have advanced.
  EXPECT_FALSE(Check({user, address}, t).allowed);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Check({user}, t).allowed) << i;
  EXPECT_FALSE(Check({user}, t).allowed);
}

TEST_F(RateLimiterTest, DisabledLimitersCostNoRedisCall) {
  const uint64_t before = io_.Call([&] { return connection_->stats().commands.value(); });
  EXPECT_TRUE(Check({{Keys("rl3").RateLimit("user", "u"), {0, 1}}}, 5).allowed);
  EXPECT_EQ(io_.Call([&] { return connection_->stats().commands.value(); }), before);
}

}  // namespace
}  // namespace flashsale::keyspace
