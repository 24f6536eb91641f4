#include "core/outcome.h"

namespace flashsale::core {

std::string_view StatusWord(Outcome outcome) {
  switch (outcome) {
    case Outcome::kNoPrize:
      return "no_prize";
    case Outcome::kReserved:
      return "reserved";
    case Outcome::kLimitReached:
      return "already_purchased";
    case Outcome::kSoldOut:
      return "sold_out";
    case Outcome::kNotStarted:
      return "not_started";
    case Outcome::kEnded:
      return "ended";
    case Outcome::kUnknownActivity:
      return "unknown_activity";
    case Outcome::kClosed:
      return "closed";
    case Outcome::kConflict:
      return "conflict";
    case Outcome::kRateLimited:
      return "rate_limited";
    case Outcome::kOverloaded:
      return "overloaded";
    case Outcome::kLimitExceeded:
      return "limit_exceeded";
    case Outcome::kPaid:
      return "paid";
    case Outcome::kCompensationDue:
      return "compensation_due";
    case Outcome::kCancelled:
      return "cancelled";
    case Outcome::kRefused:
      return "refused";
    case Outcome::kKeyReused:
      return "idempotency_key_reused";
    case Outcome::kBehind:
      return "frozen";
  }
  return "unknown";
}

std::string_view DrawStatusWord(Outcome outcome) {
  switch (outcome) {
    case Outcome::kReserved:
      return "won";
    case Outcome::kLimitReached:
      return "limit_reached";
    default:
      return StatusWord(outcome);
  }
}

bool IsOrderState(Outcome outcome) {
  switch (outcome) {
    case Outcome::kReserved:
    case Outcome::kPaid:
    case Outcome::kCompensationDue:
    case Outcome::kCancelled:
    case Outcome::kRefused:
      return true;
    default:
      return false;
  }
}

std::optional<Outcome> OutcomeFromCode(int64_t code) {
  if (code >= static_cast<int>(Outcome::kOverloaded) &&
      code <= static_cast<int>(Outcome::kNoPrize)) {
    return static_cast<Outcome>(code);
  }
  if (code == static_cast<int>(Outcome::kCancelled) ||
      code == static_cast<int>(Outcome::kRefused) ||
      code == static_cast<int>(Outcome::kKeyReused) || code == static_cast<int>(Outcome::kBehind)) {
    return static_cast<Outcome>(code);
  }
  return std::nullopt;
}

}  // namespace flashsale::core
