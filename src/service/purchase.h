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

struct PurchaseResult {
  core::Outcome outcome = core::Outcome::kUnknownActivity;
  LocalReason local = LocalReason::kNone;
  std::string order_id;
  std::vector<std::string> items;
  int64_t quantity = 0;
  int64_t remaining = -1;  // -1: not known (answered locally)
  int64_t bought = 0;
  bool replayed = false;
  int64_t retry_after_ms = 0;  // kRateLimited
};

// Errors: kInvalidArgument (bad input), or a Redis failure (kUnavailable: nothing happened;
// kUnknownOutcome: the reservation may exist, under the order id in the message).
boost::asio::awaitable<base::Result<PurchaseResult>> Purchase(ServiceContext& context,
                                                              PurchaseRequest request);

}  // namespace flashsale::service
