#include "service/purchase.h"

#include <boost/asio/use_awaitable.hpp>

namespace flashsale::service {

namespace asio = boost::asio;
using base::Result;
using core::Outcome;

namespace {

// The reserve script's reply as the purchase's outcome.
PurchaseResult FromReservation(ServiceContext& context, const PurchaseRequest& request,
                               const Admitted& admission, redis::Reservation reservation) {
  const core::SeckillActivity& activity = admission.record->activity;
  PurchaseResult result;
  result.outcome = reservation.outcome;
  result.order_id = std::move(reservation.order_id);
  result.items = std::move(reservation.items);
  result.quantity = request.quantity;
  result.remaining = reservation.remaining;
  result.bought = reservation.bought;
  // Replayed for the client only when an earlier request (same Idempotency-Key) decided it;
  // our own retries of this order id are invisible.
  result.replayed = reservation.replayed && result.order_id != admission.order_id;
  if (result.outcome == Outcome::kLimitReached && result.bought < activity.per_user_limit) {
    // Not a previous purchase: too many at once. (The snapshot's limit; the script decided
    // with Redis's, which differs only for a moment after a PATCH.)
    result.outcome = Outcome::kLimitExceeded;
    result.may_buy = activity.per_user_limit - result.bought;
  }
  if (result.outcome == Outcome::kReserved && activity.payment_window_ms > 0 &&
      result.order_id == admission.order_id) {
    result.pay_by_ms = admission.now_ms + activity.payment_window_ms;  // as the expire job counts
  }
  if (result.outcome == Outcome::kSoldOut && result.remaining == 0) {
    context.MarkSoldOut(activity.id);
  }
  return result;
}

// Steps 2 and 3 of purchase.h.
asio::awaitable<Result<PurchaseResult>> Reserve(ServiceContext& context,
                                                const PurchaseRequest& request,
                                                const Admitted& admission) {
  const redis::ReserveRequest reserve{
      .order_id = admission.order_id,
      .user_id = request.user_id,
      .quantity = request.quantity,
      .now_ms = admission.now_ms,
      .idempotency_token = admission.idempotency_token,
      .idempotency_ttl_ms = context.settings().idempotency_ttl_ms,
  };
  const std::string& activity_id = admission.record->activity.id;
  auto reservation = co_await RetryWhileUnknown<redis::Reservation>(
      context.settings().redis_retries,
      [&] { return context.reserves().AsyncSubmit(activity_id, reserve, asio::use_awaitable); });
  if (!reservation.ok()) {
    co_return UndecidedResult<PurchaseResult>(admission.order_id, std::move(reservation).error());
  }
  // Redis held less of the activity's write sequence than was acknowledged: nothing was done,
  // the activity is frozen for its repair.
  if (!context.Observe(activity_id, reservation->outcome, reservation->written)) {
    context.CountFrozenRefusals(activity_id);
    co_return FrozenError();
  }
  PurchaseResult result = FromReservation(context, request, admission, std::move(*reservation));
  co_await ConfirmTaken(context, activity_id, result);
  co_return std::move(result);
}

}  // namespace

asio::awaitable<Result<PurchaseResult>> Purchase(ServiceContext& context, PurchaseRequest request) {
  co_return co_await AdmitThen<PurchaseResult>(
      context, request, Use::kPurchase,
      [&](const Admitted& admission) { return Reserve(context, request, admission); });
}

}  // namespace flashsale::service
