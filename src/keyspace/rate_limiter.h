#pragma once
// GCRA rate limiting in Redis (lua/rate_limit.lua): several limiters (a user's, a client
// address's) are checked and advanced in one atomic call, so a refused request consumes nothing
// from any of them and instances share the same budget.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/activity.h"
#include "keyspace/activity_scripts.h"

namespace flashsale::keyspace {

struct Limiter {
  std::string key;  // e.g. ActivityKeys::RateLimit("user", token)
  core::RateLimit rate;
};

struct RateDecision {
  bool allowed = true;
  int64_t retry_after_ms = 0;  // refused: when the next request would be allowed
};

class RateLimiter {
 public:
  explicit RateLimiter(redis::ScriptEvaluator& runner);

  // Allowed if every enabled limiter allows; disabled ones are skipped. No limiter enabled:
  // allowed without a Redis call.
  void Check(std::span<const Limiter> limiters, int64_t now_ms, Handler<RateDecision> handler);

  template <typename Token>
  auto AsyncCheck(std::span<const Limiter> limiters, int64_t now_ms, Token&& token) {
    return boost::asio::async_initiate<Token, void(base::Result<RateDecision>)>(
        [this](auto handler, std::span<const Limiter> l, int64_t now) {
          Check(l, now, Handler<RateDecision>(std::move(handler)));
        },
        token, limiters, now_ms);
  }

 private:
  redis::ScriptEvaluator& runner_;
  const redis::Script& script_;
  redis::IntField allowed_, retry_after_ms_;  // reply fields (RETURNS)
};

}  // namespace flashsale::keyspace
