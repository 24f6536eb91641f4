#pragma once
// The admission path purchases and draws share: everything between "an authenticated user asks"
// and "the script may run", and the retry of a script call whose outcome is unknown.
//
//   1. the request itself: a valid user id and quantity, an Idempotency-Key of at most 128 bytes;
//   2. the activity: known to this thread's registry snapshot, and of the use's kind (a sale is
//      bought, a lottery drawn);
//   3. the local gate, no Redis: frozen after a Redis restart or failover (service/redis_watch.h),
//      closed, outside the window, sold out (a flag this thread set when Redis said so), a
//      rate-limit refusal still in force; a request refused there (or by step 4) that carries an
//      Idempotency-Key is a retry's chance: it gets its key's first outcome when there is one
//      (service/replay.h), the refusal only when the key is not known. Frozen answers everyone;
//   4. rate limits (when the activity has any): one GCRA script over the user's and the client
//      address's limiters;
//   5. a fresh order id and the token of the Idempotency-Key, which every retry sends again.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "base/result.h"
#include "base/string_pool.h"
#include "core/activity.h"
#include "core/outcome.h"
#include "service/context.h"
#include "service/redis_watch.h"

namespace flashsale::service {

struct AdmissionRequest {
  std::string_view activity_id;
  std::string_view user_id;
  int64_t quantity = 1;              // a draw: always 1
  std::string_view idempotency_key;  // as the client sent it; empty: none
  std::string_view client_address;   // for the per-address rate limit
};

enum class Use { kPurchase, kDraw };

// Why an outcome was decided without Redis.
enum class LocalReason { kNone, kUnknownActivity, kClosed, kWindow, kSoldOut, kRateLimited };

// A request turned away before any script ran.
struct Refusal {
  core::Outcome outcome = core::Outcome::kUnknownActivity;
  LocalReason local = LocalReason::kNone;  // kNone: Redis's rate limiter refused it
  int64_t retry_after_ms = 0;              // kRateLimited
};

// A request the script may now decide.
struct Admitted {
  SnapshotPtr snapshot;  // holds `record`; keep it while the script runs
  const store::ActivityRecord* record = nullptr;
  int64_t now_ms = 0;
  std::string order_id;           // fresh; the same in every retry
  std::string idempotency_token;  // IdempotencyToken(); empty without a key

  Admitted() = default;
  Admitted(Admitted&&) = default;
  Admitted& operator=(Admitted&&) = default;
  // The order id's storage goes back to the thread's pool (base/string_pool.h) for the next one.
  ~Admitted() { base::GiveString(std::move(order_id)); }
};

// Steps 1 to 5 above. Errors: kInvalidArgument (bad input, or the other use's kind of activity),
// kUnavailable (frozen, or the rate limiter's Redis failed and nothing was done).
boost::asio::awaitable<base::Result<std::variant<Refusal, Admitted>>> Admit(
    ServiceContext& context, const AdmissionRequest& request, Use use);

// The pure decisions inside Admit, for what they decide alone.
// Step 1: kInvalidArgument naming what is wrong.
base::Status CheckRequest(const AdmissionRequest& request, Use use);
// Step 2's kind: a lottery cannot be bought nor a sale drawn (the error names the right route).
base::Status CheckKind(const core::Activity& activity, Use use);
// Step 3 without the freeze and the rate limits: closed, outside the window, or sold out.
std::optional<Refusal> RefuseByState(const core::Activity& activity, int64_t now_ms, bool sold_out);
// Step 3's rate limits: a refusal Redis gave until `refused_until_ms`, still in force at `now_ms`.
std::optional<Refusal> RefuseByEarlierLimit(int64_t refused_until_ms, int64_t now_ms);

// The token under which an Idempotency-Key is kept (HMAC of user and key); empty without a key.
std::string IdempotencyToken(const ServiceContext& context, const AdmissionRequest& request);

// Runs `attempt` (a callable returning an awaitable base::Result<T>) until an attempt is decided,
// sending it again, up to `retries` more times, while its outcome is unknown (kUnknownOutcome:
// sent, no answer). The callable must send the same ids every time (an order id the script makes
// safe to repeat). The decided value; an error that left nothing done; or, once any attempt's
// outcome was unknown, kUnknownOutcome whose message says why (and how a later attempt failed),
// since that attempt may have run whatever the later ones said.
template <typename T, typename Attempt>
boost::asio::awaitable<base::Result<T>> RetryWhileUnknown(int64_t retries, Attempt attempt) {
  std::optional<std::string> unknown_reason;
  for (int64_t tried = 0;; ++tried) {
    base::Result<T> result = co_await attempt();
    if (result.ok()) co_return std::move(result);
    base::Error error = std::move(result).error();
    if (error.code != base::ErrorCode::kUnknownOutcome) {
      if (!unknown_reason) co_return std::move(error);
      co_return base::MakeError(base::ErrorCode::kUnknownOutcome, "{}; then {}", *unknown_reason,
                                error.message);
    }
    unknown_reason = std::move(error.message);
    if (tried >= retries) {
      co_return base::MakeError(base::ErrorCode::kUnknownOutcome, "{}", *unknown_reason);
    }
  }
}

// What purchase and draw results (PurchaseResult, DrawResult) are built from alike: R has
// outcome, local, retry_after_ms, order_id, unknown and unknown_reason.
template <typename R>
R RefusedResult(const Refusal& refusal) {
  R result;
  result.outcome = refusal.outcome;
  result.local = refusal.local;
  result.retry_after_ms = refusal.retry_after_ms;
  return result;
}

// An outcome Redis did not report: the order may exist under `order_id`.
template <typename R>
R UnknownResult(std::string order_id, std::string reason) {
  R result;
  result.unknown = true;
  result.order_id = std::move(order_id);
  result.unknown_reason = std::move(reason);
  return result;
}

// A RetryWhileUnknown error as a result: kUnknownOutcome is the unknown outcome under `order_id`;
// any other error stands (nothing was done).
template <typename R>
base::Result<R> UndecidedResult(std::string order_id, base::Error error) {
  if (error.code != base::ErrorCode::kUnknownOutcome) return error;
  return UnknownResult<R>(std::move(order_id), std::move(error.message));
}

// The durability wait (ServiceContext::ConfirmDurable): a unit taken is answered as done only once
// a replica has it; not confirmed in time, `result` becomes the unknown outcome with its order id,
// never a plain success. Other outcomes are left as they are. A confirmed one is kept a while by
// the Redis watch: after a Redis event, an acknowledged order found nowhere is counted.
// `result` is changed in place: the caller's coroutine frame holds it once, instead of once as
// the argument and once more as the awaited value (the frames of a purchase's and a draw's last
// step stay within what Asio's recycling cache takes, about 1 KiB; a bigger one is a heap
// allocation per request).
template <typename R>
boost::asio::awaitable<void> ConfirmTaken(ServiceContext& context, std::string_view activity_id,
                                          R& result) {
  if (result.outcome != core::Outcome::kReserved) co_return;
  auto durable = co_await context.ConfirmDurable(activity_id, result.order_id);
  if (!durable.ok()) {
    result = UnknownResult<R>(std::move(result.order_id), std::move(durable).error().message);
    co_return;
  }
  if (context.settings().redis_watch != nullptr) {
    context.settings().redis_watch->Acknowledged(activity_id, result.order_id);
  }
}

// Whether a refusal of the gate (step 3 after the freeze, or step 4) goes to the request's replay:
// it carries an Idempotency-Key, and the activity is known.
bool Replayable(const AdmissionRequest& request, const Refusal& refusal);

// Admit, then: `decide(admission)` (returning an awaitable base::Result<R>); a refusal as an R,
// or, Replayable, `replay(refusal)` (the key's first outcome, or the refusal: service/replay.h).
template <typename R, typename Decide, typename Replay>
boost::asio::awaitable<base::Result<R>> AdmitThen(ServiceContext& context,
                                                  const AdmissionRequest& request, Use use,
                                                  Decide decide, Replay replay) {
  auto admitted = co_await Admit(context, request, use);
  if (!admitted.ok()) co_return std::move(admitted).error();
  if (const auto* refusal = std::get_if<Refusal>(&*admitted)) {
    if (!Replayable(request, *refusal)) co_return RefusedResult<R>(*refusal);
    co_return co_await replay(*refusal);
  }
  co_return co_await decide(std::get<Admitted>(*admitted));
}

}  // namespace flashsale::service
