#pragma once
// The purchase use case: everything between "an authenticated user asks for a unit" and "this is
// the outcome".
//
//   1. local gate, no Redis: unknown activity, closed, outside the window, sold out (a flag this
//      thread set when Redis said so), a rate-limit refusal still in force;
//   2. rate limits (when the activity has any): one GCRA script over the user's and the client
//      address's limiters;
//   3. the reserve script with a fresh order id (and the idempotency token, if the client sent an
//      Idempotency-Key);
//   4. a reply that never came (kUnknownOutcome) is retried with the SAME order id, which the
//      script makes safe: it returns the first call's reservation instead of taking another unit.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/outcome.h"
#include "service/context.h"

namespace flashsale::service {

struct PurchaseRequest {
  std::string_view activity_id;
  std::string_view user_id;
  int64_t quantity = 1;
  std::string_view idempotency_key;  // as the client sent it; empty: none
  std::string_view client_address;   // for the per-address rate limit
};

// Why an outcome was decided without Redis.
enum class LocalReason { kNone, kUnknownActivity, kClosed, kWindow, kSoldOut, kRateLimited };

// The outcome of a purchase or of a lottery draw.
struct PurchaseResult {
  core::Outcome outcome = core::Outcome::kUnknownActivity;
  LocalReason local = LocalReason::kNone;
  std::string order_id;
  std::vector<std::string> items;  // a draw that won: the prize id
  int64_t quantity = 0;
  int64_t remaining = -1;  // -1: not known (answered locally)
  int64_t bought = 0;      // units the user holds; a draw: the user's draws so far
  int64_t may_buy = 0;     // kLimitExceeded: units the per-user limit still allows
  int64_t pay_by_ms = 0;   // a reservation in a payment window: when it expires unpaid; 0: none
  bool replayed = false;
  int64_t retry_after_ms = 0;  // kRateLimited, kOverloaded
  std::string ticket;          // a queued draw: the ticket to poll (outcome not decided yet)
  // Set when an attempt's outcome was unknown (sent, no answer) and no later attempt decided
  // it: the reservation may exist under `order_id`; `unknown_reason` says what happened. Once
  // one attempt is unknown, a later attempt failing fast does not make it "not done".
  bool unknown = false;
  std::string unknown_reason;
};

// Errors: kInvalidArgument (bad input, or a lottery), or a Redis failure that left nothing done
// (kUnavailable). An outcome Redis did not report is a value (PurchaseResult::unknown).
boost::asio::awaitable<base::Result<PurchaseResult>> Purchase(ServiceContext& context,
                                                              PurchaseRequest request);

// A lottery draw (src/service/draw.cc), through the same gate as a purchase. A lottery with an
// admission queue answers with a ticket instead (or kOverloaded when the queue is full). Errors
// as for Purchase; a sale is kInvalidArgument.
boost::asio::awaitable<base::Result<PurchaseResult>> Draw(ServiceContext& context,
                                                          PurchaseRequest request);

// A queued draw's ticket, for its owner: nothing while it waits (after waiting up to `wait` for
// it to be decided: a long poll), the draw's outcome once decided; kNotFound for a ticket that
// does not exist, is another user's, or expired.
boost::asio::awaitable<base::Result<std::optional<PurchaseResult>>> GetTicket(
    ServiceContext& context, std::string_view activity_id, std::string_view ticket_id,
    std::string_view user_id, std::chrono::milliseconds wait);

// Steps 1 and 2 above, shared by purchases and draws: a refusal (an outcome), or nothing when the
// request may go on to the script. `snapshot` must hold `record`.
boost::asio::awaitable<base::Result<std::optional<PurchaseResult>>> PassGate(
    ServiceContext& context, const store::ActivityRecord& record, const PurchaseRequest& request,
    int64_t now_ms);

// The token under which an Idempotency-Key is kept (HMAC of user and key); empty without a key.
std::string IdempotencyToken(ServiceContext& context, const PurchaseRequest& request);

}  // namespace flashsale::service
