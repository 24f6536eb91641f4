#pragma once
// The purchase use case: everything between "an authenticated user asks for a unit" and "this is
// the outcome".
//
//   1. admission (service/admission.h): the request, the activity, the local gate, rate limits, a
//      fresh order id and the Idempotency-Key's token;
//   2. the reserve script with them;
//   3. a reply that never came (kUnknownOutcome) is retried with the SAME order id, which the
//      script makes safe: it returns the first call's reservation instead of taking another unit.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/string_pool.h"
#include "core/outcome.h"
#include "service/admission.h"
#include "service/context.h"

namespace flashsale::service {

// A purchase's fields; AdmissionRequest's quantity is the units asked for.
using PurchaseRequest = AdmissionRequest;

// The outcome of a purchase. A replay reports the order as it is now (service/replay.h): one of
// core::IsOrderState's outcomes, with the order's own quantity and items.
struct PurchaseResult {
  core::Outcome outcome = core::Outcome::kUnknownActivity;
  LocalReason local = LocalReason::kNone;
  std::string order_id;
  std::vector<std::string> items;  // an order, itemised stock: the item ids taken
  int64_t quantity = 0;
  int64_t remaining = -1;  // -1: not known (answered locally)
  int64_t bought = 0;      // units the user holds
  int64_t may_buy = 0;     // kLimitExceeded: units the per-user limit still allows
  int64_t pay_by_ms = 0;   // a reservation in a payment window: when it expires unpaid; 0: none
  bool replayed = false;
  bool refund_due = false;     // kCancelled: a payment came after it and is to be refunded
  int64_t retry_after_ms = 0;  // kRateLimited
  // Set when an attempt's outcome was unknown (sent, no answer) and no later attempt decided
  // it: the reservation may exist under `order_id`; `unknown_reason` says what happened. Once
  // one attempt is unknown, a later attempt failing fast does not make it "not done".
  bool unknown = false;
  std::string unknown_reason;

  PurchaseResult() = default;
  PurchaseResult(const PurchaseResult&) = default;
  PurchaseResult(PurchaseResult&&) = default;
  PurchaseResult& operator=(const PurchaseResult&) = default;
  PurchaseResult& operator=(PurchaseResult&&) = default;
  // The order id's storage goes back to the thread's pool (base/string_pool.h) for the next one:
  // it came from there (OrderIdGenerator::Next, or the script's reply in
  // keyspace/activity_scripts.cc).
  ~PurchaseResult() { base::GiveString(std::move(order_id)); }
};

// Errors: kInvalidArgument (bad input, or a lottery), or a Redis failure that left nothing done
// (kUnavailable). An outcome Redis did not report is a value (PurchaseResult::unknown).
boost::asio::awaitable<base::Result<PurchaseResult>> Purchase(ServiceContext& context,
                                                              PurchaseRequest request);

}  // namespace flashsale::service
