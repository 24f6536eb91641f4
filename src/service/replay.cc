#include "service/replay.h"

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

asio::awaitable<base::Result<redis::KeyReplay>> FindKeyReplay(ServiceContext& context,
                                                              const AdmissionRequest& request) {
  const std::string token = IdempotencyToken(context, request);
  co_return co_await context.idempotency().Replay(request.activity_id, token, request.user_id);
}

}  // namespace flashsale::service
