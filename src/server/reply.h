#pragma once
// What a handler answers: a status, a body and the few headers we set, plus the status word the
// metrics count it under. The session turns it into an HTTP response.

// clang-format off
#include <ostream>  // Boost 1.81's core/string_view.hpp uses std::ostream without including it
#include <boost/beast/http/status.hpp>
// clang-format on
#include <cstdint>
#include <string>
#include <string_view>

#include "core/outcome.h"

namespace flashsale::server {

namespace http = boost::beast::http;

// Status words: the `status` field of JSON replies and the `status` label of metrics.
enum class Word : uint8_t {
  kReserved,
  kAlreadyPurchased,
  kSoldOut,
  kNotStarted,
  kEnded,
  kUnknownActivity,
  kClosed,
  kConflict,
  kRateLimited,
  kOverloaded,
  kWon,
  kNoPrize,
  kLimitReached,
  kLimitExceeded,
  kPaid,             // a replayed order: paid
  kCompensationDue,  // a replayed order: flagged for compensation
  kCancelled,        // a replayed order: cancelled (expired unpaid, or released)
  kRefused,          // a replayed order: refused by the record (dead-lettered)
  kKeyReused,        // an Idempotency-Key used before with another request (422)
  kQueued,           // a draw joined the admission queue (202, with a ticket)
  kPending,          // a ticket not decided yet
  kOk,
  kCreated,
  kBadRequest,
  kUnauthorized,
  kNotFound,
  kMethodNotAllowed,
  kPayloadTooLarge,
  kHeadersTooLarge,
  kUnavailable,
  kUnknownOutcome,
  kShuttingDown,
  kError,
  kCount,
};

std::string_view WordName(Word word);
Word WordFor(core::Outcome outcome);
Word DrawWordFor(core::Outcome outcome);  // "won", "no_prize", "limit_reached", else as WordFor

struct Reply {
  http::status status = http::status::ok;
  std::string body;
  std::string_view content_type = "application/json";
  Word word = Word::kOk;
  int64_t retry_after_s = -1;      // a Retry-After header when >= 0
  std::string allow;               // an Allow header (405)
  std::string_view cache_control;  // a Cache-Control header when set (static storage)
  std::string_view etag;           // an ETag header when set, without quotes (static storage)
  bool close = false;              // close the connection after this reply
  // More header lines, each "Name: value\r\n", written as they are (a 202's Location, a CORS
  // preflight's Access-Control-*). Values are the server's own, never a request's bytes.
  std::string headers;
  // Access-Control-Allow-Origin when set (the CORS policy's storage: an allowed origin, or *),
  // and Vary: Origin when the answer depends on the request's origin (server/cors.h).
  std::string_view allow_origin;
  bool vary_origin = false;
  // An error's full text (endpoints included) when the body only says it in words: replaces the
  // body's message on admin routes, logged otherwise.
  std::string detail;
};

// {"status":"<word>","error":"<message>"}
Reply ErrorReply(http::status status, Word word, std::string_view message);
Reply JsonReply(http::status status, Word word, std::string body);

}  // namespace flashsale::server
