#include "redis/rate_limiter.h"

#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

namespace flashsale::redis {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

RateLimiter::RateLimiter(ScriptRunner& runner)
    : runner_(runner), script_(runner.scripts().Get("rate_limit")) {}

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
    asio::post(runner_.connection().executor(),
               asio::append(std::move(handler), Result<RateDecision>(RateDecision{})));
    return;
  }
  ScriptCall call(script_);
  call.RestKeys("limiters", keys).Arg("now_ms", now_ms).Rest("limits", limits);
  runner_.Eval(
      call, runner_.connection().DefaultDeadline(),
      ReplyHandler([handler = std::move(handler), &script = script_](Result<Reply> reply) mutable {
        Result<RateDecision> decision = [&]() -> Result<RateDecision> {
          if (!reply.ok()) return std::move(reply).error();
          if (!reply->is_array() || reply->size() != 2 || !(*reply)[0].is_integer() ||
              !(*reply)[1].is_integer()) {
            return MakeError(ErrorCode::kProtocol, "script {} returned {}", script.name,
                             reply->Describe());
          }
          return RateDecision{(*reply)[0].integer() == 1, (*reply)[1].integer()};
        }();
        asio::dispatch(asio::append(std::move(handler), std::move(decision)));
      }));
}

}  // namespace flashsale::redis
