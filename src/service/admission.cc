#include "service/admission.h"

#include <algorithm>
#include <boost/asio/use_awaitable.hpp>
#include <vector>

#include "service/redis_watch.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using core::Outcome;

namespace {

constexpr size_t kMaxIdempotencyKeyBytes = 128;

// Step 4: the activity's rate limits (it has some), a refusal still in force first.
asio::awaitable<base::Result<std::optional<Refusal>>> CheckRateLimits(
    ServiceContext& context, const core::Activity& activity, const AdmissionRequest& request,
    int64_t now_ms) {
  const keyspace::ActivityKeys keys(context.settings().key_namespace, activity.id);
  std::vector<keyspace::Limiter> limiters;
  if (activity.user_rate.enabled()) {
    limiters.push_back(
        {keys.RateLimit("user", context.KeyToken(request.user_id)), activity.user_rate});
  }
  if (activity.address_rate.enabled() && !request.client_address.empty()) {
    limiters.push_back({keys.RateLimit("address", context.KeyToken(request.client_address)),
                        activity.address_rate});
  }
  int64_t refused_until = 0;
  for (const auto& limiter : limiters) {
    refused_until = std::max(refused_until, context.RefusedUntil(limiter.key));
  }
  if (auto refusal = RefuseByEarlierLimit(refused_until, now_ms)) co_return refusal;
  auto decision = co_await context.limiter().AsyncCheck(limiters, now_ms, asio::use_awaitable);
  if (!decision.ok()) co_return std::move(decision).error();
  if (decision->allowed) co_return std::nullopt;
  for (const auto& limiter : limiters) {
    context.RememberRefusal(limiter.key, now_ms + decision->retry_after_ms);
  }
  co_return Refusal{.outcome = Outcome::kRateLimited, .retry_after_ms = decision->retry_after_ms};
}

}  // namespace

base::Status CheckRequest(const AdmissionRequest& request, Use use) {
  const int64_t quantity = use == Use::kDraw ? 1 : request.quantity;
  if (auto valid = core::ValidatePurchase(request.user_id, quantity); !valid) return valid;
  if (request.idempotency_key.size() > kMaxIdempotencyKeyBytes) {
    return MakeError(ErrorCode::kInvalidArgument, "Idempotency-Key is over 128 bytes");
  }
  return {};
}

base::Status CheckKind(const core::Activity& activity, Use use) {
  if (use == Use::kPurchase && activity.is_lottery()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "activity '{}' is a lottery: draw with POST /api/v1/activities/{}/draw",
                     activity.id, activity.id);
  }
  if (use == Use::kDraw && !activity.is_lottery()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "activity '{}' is a sale: buy with POST /api/v1/activities/{}/purchase",
                     activity.id, activity.id);
  }
  return {};
}

std::optional<Refusal> RefuseByState(const core::Activity& activity, int64_t now_ms,
                                     bool sold_out) {
  if (!activity.open) return Refusal{Outcome::kClosed, LocalReason::kClosed};
  switch (activity.PositionAt(now_ms)) {
    case core::WindowPosition::kBefore:
      return Refusal{Outcome::kNotStarted, LocalReason::kWindow};
    case core::WindowPosition::kAfter:
      return Refusal{Outcome::kEnded, LocalReason::kWindow};
    case core::WindowPosition::kOpen:
      break;
  }
  if (sold_out) return Refusal{Outcome::kSoldOut, LocalReason::kSoldOut};
  return std::nullopt;
}

std::optional<Refusal> RefuseByEarlierLimit(int64_t refused_until_ms, int64_t now_ms) {
  if (refused_until_ms <= now_ms) return std::nullopt;
  return Refusal{Outcome::kRateLimited, LocalReason::kRateLimited, refused_until_ms - now_ms};
}

bool Replayable(const AdmissionRequest& request, const Refusal& refusal) {
  return !request.idempotency_key.empty() && refusal.outcome != Outcome::kUnknownActivity;
}

std::string IdempotencyToken(const ServiceContext& context, const AdmissionRequest& request) {
  if (request.idempotency_key.empty()) return {};
  return context.KeyToken(std::string(request.user_id) + '\n' +
                          std::string(request.idempotency_key));
}

asio::awaitable<base::Result<std::variant<Refusal, Admitted>>> Admit(
    ServiceContext& context, const AdmissionRequest& request, Use use) {
  // 1. The request; 2. the activity.
  if (auto valid = CheckRequest(request, use); !valid) co_return std::move(valid).error();
  Admitted admission;
  admission.snapshot = context.snapshot();
  admission.record = admission.snapshot->Find(request.activity_id);
  if (admission.record == nullptr) {
    co_return Refusal{Outcome::kUnknownActivity, LocalReason::kUnknownActivity};
  }
  const core::Activity& activity = admission.record->activity;
  if (auto kind = CheckKind(activity, use); !kind) co_return std::move(kind).error();

  // 3. The local gate. Frozen first: an activity whose Redis lost writes (its write sequence
  // behind, or its server changed) sells nothing until its lost-write repair ran
  // (service/activity_guard.h, service/redis_watch.h).
  if (context.Frozen(activity.id)) {
    context.CountFrozenRefusals(activity.id);
    co_return FrozenError();
  }
  admission.now_ms = context.clock().NowMs();
  if (auto refusal = RefuseByState(activity, admission.now_ms, context.IsSoldOut(activity.id))) {
    co_return *refusal;
  }
  // 4. Rate limits, when the activity has any.
  if (activity.user_rate.enabled() || activity.address_rate.enabled()) {
    auto limited = co_await CheckRateLimits(context, activity, request, admission.now_ms);
    if (!limited.ok()) co_return std::move(limited).error();
    if (limited->has_value()) co_return **limited;
  }
  // 5. The ids every attempt sends.
  admission.order_id = context.ids().Next();
  admission.idempotency_token = IdempotencyToken(context, request);
  co_return std::move(admission);
}

}  // namespace flashsale::service
