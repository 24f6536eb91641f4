#include "service/draw.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "service/replay.h"

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

// A decided draw (by the draw script now, or by the queue's consumer for a ticket).
DrawResult Decided(const store::ActivityRecord* record, Outcome outcome, std::string order_id,
                   std::string prize_id, int64_t draws) {
  DrawResult result;
  result.outcome = outcome;
  result.order_id = std::move(order_id);
  result.prize = NamePrize(record, std::move(prize_id));
  result.draws = draws;
  return result;
}

// Queue mode: the request joins the activity's queue with a fresh ticket (the admission's order
// id).
asio::awaitable<Result<DrawResult>> Enqueue(ServiceContext& context,
                                            const AdmissionRequest& request,
                                            const Admitted& admission) {
  const core::Activity& activity = admission.record->activity;
  const std::string user_token =
      context.KeyToken(std::string("pending-tickets\n").append(request.user_id));
  const keyspace::EnqueueRequest enqueue{
      .ticket_id = admission.order_id,
      .user_id = request.user_id,
      .now_ms = admission.now_ms,
      .capacity = activity.lottery->queue_capacity,
      .ticket_ttl_ms = context.settings().idempotency_ttl_ms,
      .idempotency_token = admission.idempotency_token,
      .idempotency_ttl_ms = context.settings().idempotency_ttl_ms,
      .user_token = user_token,
  };
  // Safe to send again after an unknown outcome: the same ticket id is a second entry at worst,
  // and its draw replays the first (the ticket is the draw's idempotency key).
  auto queued = co_await context.draw_queue().Enqueue(activity.id, enqueue);
  if (!queued.ok()) co_return std::move(queued).error();
  DrawResult result;
  switch (queued->outcome) {
    case keyspace::EnqueueOutcome::kQueued:
    case keyspace::EnqueueOutcome::kReplayed:
      result.ticket = std::move(queued->ticket_id);
      result.replayed = queued->outcome == keyspace::EnqueueOutcome::kReplayed;
      break;
    case keyspace::EnqueueOutcome::kLimitReached:
      result.outcome = Outcome::kLimitReached;
      result.draws = queued->draws;
      break;
    case keyspace::EnqueueOutcome::kFull:
      result.outcome = Outcome::kOverloaded;
      result.retry_after_ms = kQueueFullRetryAfterMs;
      break;
    case keyspace::EnqueueOutcome::kUnknownActivity:
      result.outcome = Outcome::kUnknownActivity;
      break;
  }
  co_return result;
}

// The draw script's reply as the draw's outcome. A plain function, as FromReservation in
// purchase.cc: its locals and temporaries stay out of DrawNow's coroutine frame, which Asio's
// recycling cache takes only up to about 1 KiB (it was 1248 bytes in the debug build: a heap
// allocation per draw, and each one evicted a cached frame, missed by the next frame made).
DrawResult FromDrawn(ServiceContext& context, const Admitted& admission,
                     keyspace::DrawResult&& drawn) {
  DrawResult result = Decided(admission.record, drawn.outcome, std::move(drawn.order_id),
                              std::move(drawn.prize_id), drawn.draws);
  result.remaining = drawn.remaining;
  result.replayed = drawn.replayed && result.order_id != admission.order_id;
  if (result.outcome == Outcome::kSoldOut && result.remaining == 0) {
    context.MarkSoldOut(admission.record->activity.id);
  }
  return result;
}

// Direct mode: the draw script, retried with the same order id and numbers while unknown.
asio::awaitable<Result<DrawResult>> DrawNow(ServiceContext& context,
                                            const AdmissionRequest& request,
                                            const Admitted& admission) {
  // Drawn once from the context's random source: every retry sends the same numbers.
  const keyspace::DrawRequest draw{
      .order_id = admission.order_id,
      .user_id = request.user_id,
      .now_ms = admission.now_ms,
      .pick = context.random().Uniform(keyspace::kDrawRandomBound),
      .fallback = context.random().Uniform(keyspace::kDrawRandomBound),
      .idempotency_token = admission.idempotency_token,
      .idempotency_ttl_ms = context.settings().idempotency_ttl_ms,
  };
  const std::string& activity_id = admission.record->activity.id;
  auto drawn = co_await RetryWhileUnknown<keyspace::DrawResult>(
      context.settings().redis_retries,
      [&] { return context.draws().AsyncSubmit(activity_id, draw, asio::use_awaitable); });
  if (!drawn.ok()) {
    co_return UndecidedResult<DrawResult>(admission.order_id, std::move(drawn).error());
  }
  if (!context.Observe(activity_id, drawn->outcome, drawn->written)) {
    context.CountFrozenRefusals(activity_id);
    co_return FrozenError();
  }
  DrawResult result = FromDrawn(context, admission, std::move(*drawn));
  if (result.replayed) {
    // A win as the record has it now (flagged for compensation), over Redis's word.
    bool refund_due = false;
    co_await ReadOrderState(context, result.order_id, result.outcome, refund_due);
  }
  co_await ConfirmTaken(context, activity_id, result);
  co_return std::move(result);
}

// A request with a key that the gate turned away: its key's first outcome (a draw as it is now,
// or its queued draw's ticket: service/replay.h), or the gate's refusal when the key is not known.
asio::awaitable<Result<DrawResult>> ReplayOrRefuse(ServiceContext& context,
                                                   const AdmissionRequest& request,
                                                   const Refusal& refusal) {
  auto found = co_await FindKeyReplay(context, request, Use::kDraw);
  if (!found.ok()) co_return std::move(found).error();
  using Kind = keyspace::KeyReplay::Kind;
  if (found->kind == Kind::kNone) co_return RefusedResult<DrawResult>(refusal);
  DrawResult result;
  if (found->outcome == Outcome::kKeyReused) {
    result.outcome = Outcome::kKeyReused;
    co_return result;
  }
  result.replayed = true;
  if (found->kind == Kind::kTicket) {
    result.ticket = std::move(found->order_id);
    co_return result;
  }
  const SnapshotPtr snapshot = context.snapshot();
  result = Decided(snapshot->Find(request.activity_id), found->outcome, std::move(found->order_id),
                   std::move(found->detail), found->count);
  result.replayed = true;
  result.remaining = found->remaining;
  bool refund_due = false;
  co_await ReadOrderState(context, result.order_id, result.outcome, refund_due);
  co_return result;
}

// What a draw did, for its key's claim (service/replay.h): a ticket or a draw made (won or not).
KeyFate FateOf(const Result<DrawResult>& result) {
  if (!result.ok()) return KeyFate::kNothing;
  if (result->unknown) return KeyFate::kUnknown;
  if (result->replayed) return KeyFate::kReplayed;
  const bool made = !result->ticket.empty() || result->outcome == Outcome::kReserved ||
                    result->outcome == Outcome::kNoPrize;
  return made ? KeyFate::kMade : KeyFate::kNothing;
}

// The draw (or the queue's ticket) of a request; with an Idempotency-Key, between the key's claim
// and its settling.
asio::awaitable<Result<DrawResult>> DrawOrEnqueue(ServiceContext& context,
                                                  const AdmissionRequest& request,
                                                  const Admitted& admission) {
  return admission.record->activity.lottery->admission == core::Admission::kDirect
             ? DrawNow(context, request, admission)
             : Enqueue(context, request, admission);
}
asio::awaitable<Result<DrawResult>> DrawWithKey(ServiceContext& context,
                                                const AdmissionRequest& request,
                                                const Admitted& admission) {
  co_return co_await DecideWithKey<DrawResult>(
      context, request, Use::kDraw, [&] { return DrawOrEnqueue(context, request, admission); },
      FateOf);
}

}  // namespace

WonPrize NamePrize(const store::ActivityRecord* record, std::string prize_id) {
  const core::Prize* prize = record != nullptr && record->activity.is_lottery()
                                 ? record->activity.lottery->Find(prize_id)
                                 : nullptr;
  std::string name = prize != nullptr ? prize->name : prize_id;
  return WonPrize{.id = std::move(prize_id), .name = std::move(name)};
}

asio::awaitable<Result<std::optional<DrawResult>>> GetTicket(ServiceContext& context,
                                                             std::string_view activity_id,
                                                             std::string_view ticket_id,
                                                             std::string_view user_id,
                                                             std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + std::min(wait, kMaxTicketWait);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    auto ticket = co_await context.draw_queue().Ticket(activity_id, ticket_id, user_id);
    if (!ticket.ok()) co_return std::move(ticket).error();
    using State = keyspace::TicketState::State;
    if (ticket->state == State::kUnknown) {
      co_return MakeError(ErrorCode::kNotFound, "no ticket '{}' of yours in '{}'", ticket_id,
                          activity_id);
    }
    if (ticket->state == State::kDecided) {
      const SnapshotPtr snapshot = context.snapshot();
      DrawResult result =
          Decided(snapshot->Find(activity_id), ticket->outcome, std::move(ticket->order_id),
                  std::move(ticket->prize_id), ticket->draws);
      if (result.outcome == Outcome::kSoldOut) context.MarkSoldOut(activity_id);
      // A win as the record has it now, as a replay reports it.
      bool refund_due = false;
      co_await ReadOrderState(context, result.order_id, result.outcome, refund_due);
      co_return std::optional<DrawResult>(std::move(result));
    }
    if (std::chrono::steady_clock::now() + kTicketPoll > until) {
      co_return std::optional<DrawResult>();
    }
    timer.expires_after(kTicketPoll);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<Result<DrawResult>> Draw(ServiceContext& context, AdmissionRequest request) {
  co_return co_await AdmitThen<DrawResult>(
      context, request, Use::kDraw,
      [&](const Admitted& admission) {
        return admission.idempotency_token.empty() ? DrawOrEnqueue(context, request, admission)
                                                   : DrawWithKey(context, request, admission);
      },
      [&](const Refusal& refusal) { return ReplayOrRefuse(context, request, refusal); });
}

}  // namespace flashsale::service
