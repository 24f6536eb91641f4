#pragma once
// The outcome of a purchase (and later a draw), as the integer codes of the seeds (S3-2) that the
// Redis scripts return and the HTTP API echoes in `code`, with a status word for humans.
// A replay (a retry with the Idempotency-Key of a request that made an order) reports the order
// as it is now: reserved (won), or one of the order states below.

#include <cstdint>
#include <optional>
#include <string_view>

namespace flashsale::core {

enum class Outcome : int {
  // Order states a replay reports, from the record (answered by the service, never by a script):
  kCompensationDue = 4,   // the order was sold again after Redis lost it: to be compensated
  kPaid = 3,              // the order was paid
  kNoPrize = 2,           // a draw that won nothing (it counts against the user's draws)
  kReserved = 1,          // a unit was taken and the order intent recorded (a draw: won)
  kLimitReached = 0,      // the user already bought their per-user limit ("already_purchased")
  kSoldOut = -1,          // not enough stock left for the quantity asked (a draw: every prize gone)
  kNotStarted = -2,       // before the activity's window
  kEnded = -3,            // after the activity's window
  kUnknownActivity = -4,  // no such activity (or not loaded into Redis yet)
  kClosed = -5,           // an operator closed (paused) the activity
  kConflict = -6,         // the order id was already used by another user
  kRateLimited = -7,      // answered by the service, never by a script
  kOverloaded = -8,       // answered by the service, never by a script
  // Answered by the service, never by a script: the quantity asked is over what the per-user limit
  // still allows, although the user may buy fewer (the script's 0 with units left to buy).
  kLimitExceeded = -9,
  // Order states a replay reports (a script's replay, from the order's record in Redis):
  kCancelled = -10,  // the order was cancelled (expired unpaid, or released): its units went back
  kRefused = -11,    // the record refused the order (dead-lettered): its units went back
  // The Idempotency-Key was used before with another request (another activity, action or
  // quantity): refused, nothing done (HTTP 422).
  kKeyReused = -12,
  // Answered by a script, never shown to a buyer: Redis holds less of the activity's write
  // sequence than the caller knows was written (it lost acknowledged writes); nothing was done,
  // and the service freezes the activity until its lost-write repair ran (a 503).
  kBehind = -20,
};

// Whether a replayed outcome is an order's state (an order exists under its order id): reserved
// (won), paid, compensation due, cancelled or refused.
bool IsOrderState(Outcome outcome);

// "reserved", "already_purchased", "sold_out", ...; for draws, "won", "no_prize" and
// "limit_reached" where a sale says "reserved" and "already_purchased".
std::string_view StatusWord(Outcome outcome);
std::string_view DrawStatusWord(Outcome outcome);

// The Outcome for a code a script returned (never kLimitExceeded, kPaid, kCompensationDue: the
// service's own), or nothing for a code we do not know.
std::optional<Outcome> OutcomeFromCode(int64_t code);

}  // namespace flashsale::core
