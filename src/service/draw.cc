// The lottery draw use case (purchase.h): the purchase's gate, then the draw script with a fresh
// order id and two random numbers from the CSPRNG; a reply that never came is retried with the
// same order id and the same numbers, which the script makes safe (it replays the first draw).

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "service/purchase.h"
#include "service/redis_watch.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;
using core::Outcome;

namespace {

constexpr std::chrono::milliseconds kTicketPoll{50};
constexpr std::chrono::milliseconds kMaxTicketWait{25'000};
constexpr int64_t kQueueFullRetryAfterMs = 1000;

// Queue mode: the request joins the activity's queue with a fresh ticket (S3-3).
asio::awaitable<Result<PurchaseResult>> Enqueue(
    ServiceContext& context, const store::ActivityRecord& record, const PurchaseRequest& request,
    const std::string& ticket_id, const std::string& idempotency_token, int64_t now_ms) {
  const std::string user_token =
      context.KeyToken(std::string("pending-tickets\n").append(request.user_id));
  const redis::EnqueueRequest enqueue{
      .ticket_id = ticket_id,
      .user_id = request.user_id,
      .now_ms = now_ms,
      .capacity = record.activity.lottery->queue_capacity,
      .ticket_ttl_ms = context.settings().idempotency_ttl_ms,
      .idempotency_token = idempotency_token,
      .idempotency_ttl_ms = context.settings().idempotency_ttl_ms,
      .user_token = user_token,
  };
  // Safe to send again after an unknown outcome: the same ticket id is a second entry at worst,
  // and its draw replays the first (the ticket is the draw's idempotency key).
  auto queued = co_await context.draw_queue().Enqueue(record.activity.id, enqueue);
  if (!queued.ok()) co_return std::move(queued).error();
  PurchaseResult result;
  switch (queued->outcome) {
    case redis::EnqueueOutcome::kQueued:
    case redis::EnqueueOutcome::kReplayed:
      result.ticket = std::move(queued->ticket_id);
      result.replayed = queued->outcome == redis::EnqueueOutcome::kReplayed;
      break;
    case redis::EnqueueOutcome::kLimitReached:
      result.outcome = Outcome::kLimitReached;
      result.bought = queued->draws;
      break;
    case redis::EnqueueOutcome::kFull:
      result.outcome = Outcome::kOverloaded;
      result.retry_after_ms = kQueueFullRetryAfterMs;
      break;
    case redis::EnqueueOutcome::kUnknownActivity:
      result.outcome = Outcome::kUnknownActivity;
      break;
  }
  co_return result;
}

}  // namespace

asio::awaitable<Result<std::optional<PurchaseResult>>> GetTicket(ServiceContext& context,
                                                                 std::string_view activity_id,
                                                                 std::string_view ticket_id,
                                                                 std::string_view user_id,
                                                                 std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + std::min(wait, kMaxTicketWait);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    auto ticket = co_await context.draw_queue().Ticket(activity_id, ticket_id, user_id);
    if (!ticket.ok()) co_return std::move(ticket).error();
    using State = redis::TicketState::State;
    if (ticket->state == State::kUnknown) {
      co_return MakeError(ErrorCode::kNotFound, "no ticket '{}' of yours in '{}'", ticket_id,
                          activity_id);
    }
    if (ticket->state == State::kDecided) {
      PurchaseResult result;
      result.outcome = ticket->outcome;
      result.order_id = std::move(ticket->order_id);
      if (!ticket->prize_id.empty()) result.items.push_back(std::move(ticket->prize_id));
      result.quantity = ticket->outcome == Outcome::kReserved ? 1 : 0;
      result.bought = ticket->draws;
      if (result.outcome == Outcome::kSoldOut) context.MarkSoldOut(activity_id);
      co_return std::optional<PurchaseResult>(std::move(result));
    }
    if (std::chrono::steady_clock::now() + kTicketPoll > until) {
      co_return std::optional<PurchaseResult>();
    }
    timer.expires_after(kTicketPoll);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<Result<PurchaseResult>> Draw(ServiceContext& context, PurchaseRequest request) {
  if (auto valid = core::ValidatePurchase(request.user_id, 1); !valid) co_return valid.error();
  if (request.idempotency_key.size() > 128) {
    co_return MakeError(ErrorCode::kInvalidArgument, "Idempotency-Key is over 128 bytes");
  }
  const SnapshotPtr snapshot = context.snapshot();  // alive across the awaits below
  const store::ActivityRecord* record = snapshot->Find(request.activity_id);
  if (record == nullptr) {
    PurchaseResult unknown;
    unknown.local = LocalReason::kUnknownActivity;
    co_return unknown;
  }
  const core::SeckillActivity& activity = record->activity;
  if (!activity.is_lottery()) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "activity '{}' is a sale: buy with POST /api/v1/activities/{}/purchase",
                        activity.id, activity.id);
  }
  const int64_t now_ms = context.clock().NowMs();
  auto refused = co_await PassGate(context, *record, request, now_ms);
  if (!refused.ok()) co_return std::move(refused).error();
  if (refused->has_value()) co_return std::move(**refused);

  const std::string order_id = context.ids().Next();
  const std::string idempotency_token = IdempotencyToken(context, request);
  if (activity.lottery->admission != core::Admission::kDirect) {
    co_return co_await Enqueue(context, *record, request, order_id, idempotency_token, now_ms);
  }
  const redis::DrawRequest draw{
      .order_id = order_id,
      .user_id = request.user_id,
      .now_ms = now_ms,
      .pick = context.random().Uniform(redis::kDrawRandomBound),
      .fallback = context.random().Uniform(redis::kDrawRandomBound),
      .idempotency_token = idempotency_token,
      .idempotency_ttl_ms = context.settings().idempotency_ttl_ms,
  };
  std::optional<base::Error> last_error;
  bool unknown_seen = false;
  std::string unknown_reason;
  for (int64_t attempt = 0; attempt <= context.settings().redis_retries; ++attempt) {
    auto drawn = co_await context.seckill().AsyncDraw(activity.id, draw, asio::use_awaitable);
    if (drawn.ok()) {
      PurchaseResult result;
      result.outcome = drawn->outcome;
      result.order_id = std::move(drawn->order_id);
      if (!drawn->prize_id.empty()) result.items.push_back(std::move(drawn->prize_id));
      result.quantity = drawn->outcome == Outcome::kReserved ? 1 : 0;
      result.remaining = drawn->remaining;
      result.bought = drawn->draws;
      result.replayed = drawn->replayed && result.order_id != order_id;
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
    last_error = std::move(drawn).error();
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
