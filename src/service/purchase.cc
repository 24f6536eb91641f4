#include "service/purchase.h"

#include <boost/asio/use_awaitable.hpp>
#include <vector>

#include "core/activity.h"
#include "service/redis_watch.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;
using core::Outcome;

namespace {

PurchaseResult Local(Outcome outcome, LocalReason reason) {
  PurchaseResult result;
  result.outcome = outcome;
  result.local = reason;
  return result;
}

}  // namespace

asio::awaitable<Result<std::optional<PurchaseResult>>> PassGate(ServiceContext& context,
                                                                const store::ActivityRecord& record,
                                                                const PurchaseRequest& request,
                                                                int64_t now_ms) {
  // 1. The local gate. Frozen first: after Redis restarted or failed over, nothing is sold until
  // the lost-write repair ran (service/redis_watch.h).
  if (context.frozen()) {
    context.settings().redis_watch->CountRefused();
    co_return MakeError(ErrorCode::kUnavailable, "{}", kFrozenMessage);
  }
  const core::SeckillActivity& activity = record.activity;
  if (!activity.open) co_return Local(Outcome::kClosed, LocalReason::kClosed);
  switch (activity.PositionAt(now_ms)) {
    case core::WindowPosition::kBefore:
      co_return Local(Outcome::kNotStarted, LocalReason::kWindow);
    case core::WindowPosition::kAfter:
      co_return Local(Outcome::kEnded, LocalReason::kWindow);
    case core::WindowPosition::kOpen:
      break;
  }
  if (context.IsSoldOut(activity.id)) co_return Local(Outcome::kSoldOut, LocalReason::kSoldOut);

  // 2. Rate limits, when the activity has any.
  if (activity.user_rate.enabled() || activity.address_rate.enabled()) {
    const redis::SeckillKeys keys(context.settings().key_namespace, activity.id);
    std::vector<redis::Limiter> limiters;
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
    if (refused_until > now_ms) {
      PurchaseResult result = Local(Outcome::kRateLimited, LocalReason::kRateLimited);
      result.retry_after_ms = refused_until - now_ms;
      co_return result;
    }
    auto decision = co_await context.limiter().AsyncCheck(limiters, now_ms, asio::use_awaitable);
    if (!decision.ok()) co_return std::move(decision).error();
    if (!decision->allowed) {
      for (const auto& limiter : limiters) {
        context.RememberRefusal(limiter.key, now_ms + decision->retry_after_ms);
      }
      PurchaseResult result;
      result.outcome = Outcome::kRateLimited;
      result.retry_after_ms = decision->retry_after_ms;
      co_return result;
    }
  }
  co_return std::nullopt;
}

std::string IdempotencyToken(ServiceContext& context, const PurchaseRequest& request) {
  if (request.idempotency_key.empty()) return {};
  return context.KeyToken(std::string(request.user_id) + '\n' +
                          std::string(request.idempotency_key));
}

asio::awaitable<Result<PurchaseResult>> Purchase(ServiceContext& context, PurchaseRequest request) {
  if (auto valid = core::ValidatePurchase(request.user_id, request.quantity); !valid) {
    co_return valid.error();
  }
  if (request.idempotency_key.size() > 128) {
    co_return MakeError(ErrorCode::kInvalidArgument, "Idempotency-Key is over 128 bytes");
  }
  const SnapshotPtr snapshot = context.snapshot();  // alive across the awaits below
  const store::ActivityRecord* record = snapshot->Find(request.activity_id);
  if (record == nullptr) co_return Local(Outcome::kUnknownActivity, LocalReason::kUnknownActivity);
  const core::SeckillActivity& activity = record->activity;
  if (activity.is_lottery()) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "activity '{}' is a lottery: draw with POST /api/v1/activities/{}/draw",
                        activity.id, activity.id);
  }
  const int64_t now_ms = context.clock().NowMs();
  auto refused = co_await PassGate(context, *record, request, now_ms);
  if (!refused.ok()) co_return std::move(refused).error();
  if (refused->has_value()) co_return std::move(**refused);

  // 3. The reserve script; 4. retried with the same order id while its outcome is unknown.
  const std::string order_id = context.ids().Next();
  const std::string idempotency_token = IdempotencyToken(context, request);
  const redis::ReserveRequest reserve{
      .order_id = order_id,
      .user_id = request.user_id,
      .quantity = request.quantity,
      .now_ms = now_ms,
      .idempotency_token = idempotency_token,
      .idempotency_ttl_ms = context.settings().idempotency_ttl_ms,
  };
  std::optional<base::Error> last_error;
  bool unknown_seen = false;
  std::string unknown_reason;
  for (int64_t attempt = 0; attempt <= context.settings().redis_retries; ++attempt) {
    auto reservation =
        co_await context.seckill().AsyncReserve(activity.id, reserve, asio::use_awaitable);
    if (reservation.ok()) {
      PurchaseResult result;
      result.outcome = reservation->outcome;
      result.order_id = std::move(reservation->order_id);
      result.items = std::move(reservation->items);
      result.quantity = request.quantity;
      result.remaining = reservation->remaining;
      result.bought = reservation->bought;
      // Replayed for the client only when an earlier request (same Idempotency-Key) decided it;
      // our own retries of this order id are invisible.
      result.replayed = reservation->replayed && result.order_id != order_id;
      if (result.outcome == Outcome::kLimitReached && result.bought < activity.per_user_limit) {
        // Not a previous purchase: too many at once. (The snapshot's limit; the script decided
        // with Redis's, which differs only for a moment after a PATCH.)
        result.outcome = Outcome::kLimitExceeded;
        result.may_buy = activity.per_user_limit - result.bought;
      }
      if (result.outcome == Outcome::kReserved && activity.payment_window_ms > 0 &&
          result.order_id == order_id) {
        result.pay_by_ms = now_ms + activity.payment_window_ms;  // as the expire job counts
      }
      if (result.outcome == Outcome::kSoldOut && result.remaining == 0) {
        context.MarkSoldOut(activity.id);
      }
      // Durability wait: a unit taken is answered as done only once a replica has it; not
      // confirmed in time, it is the unknown outcome with the order id, never a plain success.
      if (result.outcome == Outcome::kReserved) {
        auto durable = co_await context.ConfirmDurable(activity.id, result.order_id);
        if (!durable.ok()) {
          PurchaseResult unconfirmed;
          unconfirmed.unknown = true;
          unconfirmed.order_id = std::move(result.order_id);
          unconfirmed.unknown_reason = std::move(durable).error().message;
          co_return unconfirmed;
        }
        // Kept a while: after a Redis event, an acknowledged order found nowhere is counted.
        if (context.settings().redis_watch != nullptr) {
          context.settings().redis_watch->Acknowledged(activity.id, result.order_id);
        }
      }
      co_return result;
    }
    last_error = std::move(reservation).error();
    if (last_error->code == ErrorCode::kUnknownOutcome) {
      unknown_seen = true;
      unknown_reason = last_error->message;
    } else {
      break;
    }
  }
  if (unknown_seen) {
    // Some attempt may have run: whatever the last one said, the outcome is unknown.
    PurchaseResult result;
    result.unknown = true;
    result.order_id = order_id;
    result.unknown_reason = last_error->code == ErrorCode::kUnknownOutcome
                                ? std::move(unknown_reason)
                                : fmt::format("{}; then {}", unknown_reason, last_error->message);
    co_return result;
  }
  co_return std::move(*last_error);
}

}  // namespace flashsale::service
