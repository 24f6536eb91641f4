#include "keyspace/rate_limiter.h"

#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

namespace flashsale::keyspace {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

RateLimiter::RateLimiter(redis::ScriptEvaluator& runner)
    : runner_(runner),
      script_(runner.scripts().Get("rate_limit")),
      allowed_(script_, "allowed"),
      retry_after_ms_(script_, "retry_after_ms") {}

void RateLimiter::Check(std::span<const Limiter> limiters, int64_t now_ms,
                        Handler<RateDecision> handler) {
  std::vector<std::string> keys;
  std::vector<std::string> limits;
  for (const auto& limiter : limiters) {
    if (!limiter.rate.enabled()) continue;
    keys.push_back(limiter.key);
    limits.push_back(fmt::format("{:.6f}", 1000.0 / limiter.rate.per_second));
    limits.push_back(std::to_string(limiter.rate.burst));
  }
  if (keys.empty()) {
    asio::post(runner_.executor(),
               asio::append(std::move(handler), Result<RateDecision>(RateDecision{})));
    return;
  }
  redis::ScriptCall call(script_);
  call.RestKeys("limiters", keys).Arg("now_ms", now_ms).Rest("limits", limits);
  runner_.Eval(
      call, runner_.DefaultDeadline(),
      redis::ReplyHandler([handler = std::move(handler), allowed = allowed_,
                           retry_after_ms = retry_after_ms_](Result<redis::Reply> reply) mutable {
        Result<RateDecision> decision = [&]() -> Result<RateDecision> {
          auto read = redis::ScriptReply::Read(allowed.script(), reply);
          if (!read) return std::move(read).error();
          return RateDecision{read->Int(allowed) == 1, read->Int(retry_after_ms)};
        }();
        asio::dispatch(asio::append(std::move(handler), std::move(decision)));
      }));
}

}  // namespace flashsale::keyspace
