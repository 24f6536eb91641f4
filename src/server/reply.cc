#include "server/reply.h"

#include <array>

#include "base/json_writer.h"

namespace flashsale::server {

namespace {
constexpr std::array<std::string_view, static_cast<size_t>(Word::kCount)> kWords = {
    "reserved",
    "already_purchased",
    "sold_out",
    "not_started",
    "ended",
    "unknown_activity",
    "closed",
    "conflict",
    "rate_limited",
    "overloaded",
    "won",
    "no_prize",
    "limit_reached",
    "limit_exceeded",
    "paid",
    "compensation_due",
    "cancelled",
    "refused",
    "idempotency_key_reused",
    "queued",
    "pending",
    "ok",
    "created",
    "bad_request",
    "unauthorized",
    "not_found",
    "method_not_allowed",
    "payload_too_large",
    "headers_too_large",
    "unavailable",
    "unknown_outcome",
    "shutting_down",
    "error",
};
}  // namespace

std::string_view WordName(Word word) { return kWords[static_cast<size_t>(word)]; }

Word DrawWordFor(core::Outcome outcome) {
  switch (outcome) {
    case core::Outcome::kReserved:
      return Word::kWon;
    case core::Outcome::kLimitReached:
      return Word::kLimitReached;
    default:
      return WordFor(outcome);
  }
}

Word WordFor(core::Outcome outcome) {
  switch (outcome) {
    case core::Outcome::kNoPrize:
      return Word::kNoPrize;
    case core::Outcome::kReserved:
      return Word::kReserved;
    case core::Outcome::kLimitReached:
      return Word::kAlreadyPurchased;
    case core::Outcome::kSoldOut:
      return Word::kSoldOut;
    case core::Outcome::kNotStarted:
      return Word::kNotStarted;
    case core::Outcome::kEnded:
      return Word::kEnded;
    case core::Outcome::kUnknownActivity:
      return Word::kUnknownActivity;
    case core::Outcome::kClosed:
      return Word::kClosed;
    case core::Outcome::kConflict:
      return Word::kConflict;
    case core::Outcome::kRateLimited:
      return Word::kRateLimited;
    case core::Outcome::kOverloaded:
      return Word::kOverloaded;
    case core::Outcome::kLimitExceeded:
      return Word::kLimitExceeded;
    case core::Outcome::kPaid:
      return Word::kPaid;
    case core::Outcome::kCompensationDue:
      return Word::kCompensationDue;
    case core::Outcome::kCancelled:
      return Word::kCancelled;
    case core::Outcome::kRefused:
      return Word::kRefused;
    case core::Outcome::kKeyReused:
      return Word::kKeyReused;
    case core::Outcome::kBehind:
      return Word::kUnavailable;  // turned into the frozen answer before it gets here
  }
  return Word::kError;
}

Reply ErrorReply(http::status status, Word word, std::string_view message) {
  base::JsonWriter w;
  w.BeginObject().Key("status").String(WordName(word)).Key("error").String(message).EndObject();
  return JsonReply(status, word, std::move(w).Take());
}

Reply JsonReply(http::status status, Word word, std::string body) {
  Reply reply;
  reply.status = status;
  reply.word = word;
  reply.body = std::move(body);
  return reply;
}

}  // namespace flashsale::server
