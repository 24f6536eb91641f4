#include "service/replay.h"

#include <fmt/format.h>

#include <string>

namespace flashsale::service {

namespace asio = boost::asio;
using core::Outcome;

asio::awaitable<void> ReadOrderState(ServiceContext& context, std::string_view order_id,
                                     Outcome& outcome, bool& refund_due) {
  if (outcome != Outcome::kReserved && outcome != Outcome::kCancelled) co_return;
  const auto read = [id = std::string(order_id)](store::Store& store) {
    return store.GetOrder(id);
  };
  auto order = co_await context.OnDb(read);
  if (!order.ok()) co_return;  // not persisted yet, or the record is unavailable
  if (order->compensation_due) {
    outcome = Outcome::kCompensationDue;
    co_return;
  }
  switch (order->state) {
    case store::OrderState::kPaid:
      outcome = Outcome::kPaid;
      break;
    case store::OrderState::kCancelled:
      outcome = Outcome::kCancelled;
      refund_due = order->refund_due;
      break;
    case store::OrderState::kReserved:
      break;
  }
}

std::string Fingerprint(const AdmissionRequest& request, Use use) {
  return fmt::format("{}|{}|{}", request.activity_id, use == Use::kDraw ? "draw" : "purchase",
                     use == Use::kDraw ? 1 : request.quantity);
}

asio::awaitable<base::Result<keyspace::KeyReplay>> FindKeyReplay(ServiceContext& context,
                                                                 const AdmissionRequest& request,
                                                                 Use use) {
  const std::string token = IdempotencyToken(context, request);
  auto claimed = co_await context.idempotency().Claimed(token);
  if (!claimed.ok()) co_return std::move(claimed).error();
  if (claimed->has_value() && **claimed != Fingerprint(request, use)) {
    keyspace::KeyReplay reused;
    reused.kind = keyspace::KeyReplay::Kind::kOutcome;
    reused.outcome = Outcome::kKeyReused;
    co_return reused;
  }
  co_return co_await context.idempotency().Replay(request.activity_id, token, request.user_id,
                                                  use == Use::kDraw ? 1 : request.quantity);
}

asio::awaitable<base::Result<ClaimedKey>> ClaimKey(ServiceContext& context,
                                                   const AdmissionRequest& request, Use use) {
  const std::string token = IdempotencyToken(context, request);
  auto claim = co_await context.idempotency().Claim(token, Fingerprint(request, use),
                                                    context.settings().idempotency_ttl_ms);
  if (!claim.ok()) {
    // Not sent (the claim's node is down, or refuses until its repair ran): the claim lives in a
    // slot of its own, so this says nothing of the activity's node. The request goes on without
    // it: the activity's script still keeps the key's first outcome and refuses another quantity,
    // so nothing is sold twice; only the key's reuse with another activity or action goes
    // unnoticed while that node is out. A sale on a healthy node keeps selling.
    if (claim.error().code == base::ErrorCode::kUnavailable) co_return ClaimedKey{};
    // Sent, no answer: whatever the claim did, no script ran: nothing was sold or drawn.
    co_return base::MakeError(base::ErrorCode::kUnavailable, "claiming the Idempotency-Key: {}",
                              claim.error().message);
  }
  co_return ClaimedKey{.reused = claim->state == keyspace::KeyClaim::State::kOther,
                       .claimed_now = claim->state == keyspace::KeyClaim::State::kClaimed};
}

asio::awaitable<void> SettleKey(ServiceContext& context, const AdmissionRequest& request, Use use,
                                const ClaimedKey& claim, KeyFate fate) {
  const std::string token = IdempotencyToken(context, request);
  if (claim.claimed_now && fate == KeyFate::kNothing) {
    (void)co_await context.idempotency().Unclaim(token);
  } else if (!claim.claimed_now && fate == KeyFate::kMade) {
    (void)co_await context.idempotency().Claim(token, Fingerprint(request, use),
                                               context.settings().idempotency_ttl_ms);
  }
}

}  // namespace flashsale::service
