#pragma once
// The lottery draw use case: admission as for a purchase (service/admission.h), then the draw
// script with the fresh order id and two random numbers from the context's random source; a reply
// that never came is retried with the same order id and the same numbers, which the script makes
// safe (it replays the first draw). A lottery with an admission queue answers with a ticket
// instead, decided later by the queue's consumer (service/draw_queue_consumer.h).

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/result.h"
#include "base/string_pool.h"
#include "core/outcome.h"
#include "service/admission.h"
#include "service/context.h"

namespace flashsale::service {

// A prize won, as the activity names it.
struct WonPrize {
  std::string id;
  std::string name;  // the prize's name in the registry; its id when the registry has none
};

// The outcome of a draw, or of a queued draw's ticket. A replayed win (and a ticket's) is
// reported as it is now (service/replay.h): won, refused, compensation due.
struct DrawResult {
  core::Outcome outcome = core::Outcome::kUnknownActivity;  // kReserved: won; kNoPrize: lost
  LocalReason local = LocalReason::kNone;
  std::string order_id;        // the draw's id (kReserved, kNoPrize)
  WonPrize prize;              // kReserved
  int64_t draws = 0;           // the user's draws so far (this one included)
  int64_t remaining = -1;      // prize units left, all prizes; -1: not known
  bool replayed = false;       // decided by an earlier request with the same Idempotency-Key
  int64_t retry_after_ms = 0;  // kRateLimited, kOverloaded
  std::string ticket;          // a queued draw: the ticket to poll (outcome not decided yet)
  // As PurchaseResult::unknown: the draw may have been made under `order_id`.
  bool unknown = false;
  std::string unknown_reason;

  DrawResult() = default;
  DrawResult(const DrawResult&) = default;
  DrawResult(DrawResult&&) = default;
  DrawResult& operator=(const DrawResult&) = default;
  DrawResult& operator=(DrawResult&&) = default;
  // The order id's storage goes back to the thread's pool (base/string_pool.h) for the next one:
  // it came from there (OrderIdGenerator::Next, or the script's reply in
  // keyspace/activity_scripts.cc).
  ~DrawResult() { base::GiveString(std::move(order_id)); }
};

// Errors: kInvalidArgument (bad input, or a sale), or a Redis failure that left nothing done
// (kUnavailable). An outcome Redis did not report is a value (DrawResult::unknown).
boost::asio::awaitable<base::Result<DrawResult>> Draw(ServiceContext& context,
                                                      AdmissionRequest request);

// A queued draw's ticket, for its owner: nothing while it waits (after waiting up to `wait` for
// it to be decided: a long poll), the draw's outcome once decided; kNotFound for a ticket that
// does not exist, is another user's, or expired.
boost::asio::awaitable<base::Result<std::optional<DrawResult>>> GetTicket(
    ServiceContext& context, std::string_view activity_id, std::string_view ticket_id,
    std::string_view user_id, std::chrono::milliseconds wait);

// A prize id as the activity `record` names it (null record, or a prize it does not have: the id).
WonPrize NamePrize(const store::ActivityRecord* record, std::string prize_id);

}  // namespace flashsale::service
