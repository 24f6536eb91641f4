#include "service/purchase.h"

#include <boost/asio/use_awaitable.hpp>

#include "base/strings.h"
#include "service/replay.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::Result;
using core::Outcome;

namespace {

// The reserve script's reply as the purchase's outcome.
PurchaseResult FromReservation(ServiceContext& context, const PurchaseRequest& request,
                               const Admitted& admission, keyspace::Reservation reservation) {
  const core::Activity& activity = admission.record->activity;
  PurchaseResult result;
  result.outcome = reservation.outcome;
  result.order_id = std::move(reservation.order_id);
  result.items = std::move(reservation.items);
  // A replayed order's own quantity (the request's when Redis no longer says).
  result.quantity = reservation.quantity > 0 ? reservation.quantity : request.quantity;
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
  const keyspace::ReserveRequest reserve{
      .order_id = admission.order_id,
      .user_id = request.user_id,
      .quantity = request.quantity,
      .now_ms = admission.now_ms,
      .idempotency_token = admission.idempotency_token,
      .idempotency_ttl_ms = context.settings().idempotency_ttl_ms,
  };
  const std::string& activity_id = admission.record->activity.id;
  auto reservation = co_await RetryWhileUnknown<keyspace::Reservation>(
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
  if (result.replayed) {
    // The order as the record has it now (paid, cancelled, flagged), over Redis's word.
    co_await ReadOrderState(context, result.order_id, result.outcome, result.refund_due);
  }
  co_await ConfirmTaken(context, activity_id, result);
  co_return std::move(result);
}

// A request with a key that the gate turned away: its key's first outcome, the order as it is
// now (service/replay.h), or the gate's refusal when the key is not known.
asio::awaitable<Result<PurchaseResult>> ReplayOrRefuse(ServiceContext& context,
                                                       const PurchaseRequest& request,
                                                       const Refusal& refusal) {
  auto found = co_await FindKeyReplay(context, request, Use::kPurchase);
  if (!found.ok()) co_return std::move(found).error();
  if (found->kind != keyspace::KeyReplay::Kind::kOutcome) {
    co_return RefusedResult<PurchaseResult>(refusal);
  }
  PurchaseResult result;
  if (found->outcome == Outcome::kKeyReused) {
    result.outcome = Outcome::kKeyReused;
    co_return result;
  }
  result.outcome = found->outcome;
  result.replayed = true;
  result.order_id = std::move(found->order_id);
  result.remaining = found->remaining;
  if (core::IsOrderState(result.outcome)) {
    result.quantity = found->count > 0 ? found->count : request.quantity;
    result.items = base::SplitWords(found->detail);
    co_await ReadOrderState(context, result.order_id, result.outcome, result.refund_due);
  } else {
    result.bought = found->count;  // a refusal an earlier version kept
  }
  co_return result;
}

// What a purchase did, for its key's claim (service/replay.h).
KeyFate FateOf(const Result<PurchaseResult>& result) {
  if (!result.ok()) return KeyFate::kNothing;
  if (result->unknown) return KeyFate::kUnknown;
  if (result->replayed) return KeyFate::kReplayed;
  return result->outcome == Outcome::kReserved ? KeyFate::kMade : KeyFate::kNothing;
}

// A purchase with an Idempotency-Key: the reservation between the key's claim and its settling.
asio::awaitable<Result<PurchaseResult>> ReserveWithKey(ServiceContext& context,
                                                       const PurchaseRequest& request,
                                                       const Admitted& admission) {
  co_return co_await DecideWithKey<PurchaseResult>(
      context, request, Use::kPurchase, [&] { return Reserve(context, request, admission); },
      FateOf);
}

}  // namespace

asio::awaitable<Result<PurchaseResult>> Purchase(ServiceContext& context, PurchaseRequest request) {
  co_return co_await AdmitThen<PurchaseResult>(
      context, request, Use::kPurchase,
      [&](const Admitted& admission) {
        return admission.idempotency_token.empty() ? Reserve(context, request, admission)
                                                   : ReserveWithKey(context, request, admission);
      },
      [&](const Refusal& refusal) { return ReplayOrRefuse(context, request, refusal); });
}

}  // namespace flashsale::service
