#pragma once
// What a handler answers: a status, a body and the few headers we set, plus what the access log
// and the metrics read of it (the route, the status word, the activity and the order id), so
// nothing is parsed back from the body or the URL. The session turns it into an HTTP response.

// clang-format off
#include <ostream>  // Boost 1.81's core/string_view.hpp uses std::ostream without including it
#include <boost/beast/http/status.hpp>
// clang-format on
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashsale::server {

namespace http = boost::beast::http;

// The routes, as the metrics label them (RouteName, server/metrics.h).
enum class RouteId : uint8_t {
  kPurchase,
  kDraw,
  kTicket,
  kRoom,  // the waiting room's join and wait
  kActivity,
  kOrders,
  kAdmin,
  kHealth,
  kReady,
  kMetrics,
  kPage,
  kPreflight,  // OPTIONS: a CORS preflight (server/cors.h)
  kUnmatched,
  kCount,
};

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
  kPassRequired,     // a purchase of a sale with a waiting room without a valid pass (403)
  kDrawing,          // a waiting room's place taken before the start, drawn at the start
  kWaiting,          // a waiting room's place not admitted yet
  kAdmitted,         // a waiting room's place admitted: a pass
  kNotJoined,        // no place in the waiting room
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

// The small fields come first and together, so that the labels below cost the reply no size: it
// is held in the hot path's coroutine frames, which Asio recycles only up to about a kilobyte
// (tests/server/alloc_integration_test.cc).
struct Reply {
  http::status status = http::status::ok;
  Word word = Word::kOk;  // the outcome, as the metrics and the access log name it
  // The route that answered (set by Dispatch): the metrics' route label.
  RouteId route = RouteId::kUnmatched;
  bool close = false;  // close the connection after this reply
  // Vary: Origin when the answer depends on the request's origin (server/cors.h).
  bool vary_origin = false;
  std::string body;
  std::string_view content_type = "application/json";
  int64_t retry_after_s = -1;      // a Retry-After header when >= 0
  std::string allow;               // an Allow header (405)
  std::string_view cache_control;  // a Cache-Control header when set (static storage)
  std::string_view etag;           // an ETag header when set, without quotes (static storage)
  // More header lines, each "Name: value\r\n", written as they are (a 202's Location, a CORS
  // preflight's Access-Control-*). Values are the server's own, never a request's bytes.
  std::string headers;
  // Access-Control-Allow-Origin when set (the CORS policy's storage: an allowed origin, or *).
  std::string_view allow_origin;
  // An error's full text (endpoints included) when the body only says it in words: replaces the
  // body's message on admin routes, logged otherwise.
  std::string detail;
  // The activity the request is about, for the access log: set by Dispatch from a route that
  // names one (server/router.h), a view into the request's target (valid while the request is).
  std::string_view activity_id;

  // The order the reply names (a reservation, a win, a payment, an unknown outcome), for the
  // access log: set by the reply's maker (server/replies.h) as where the id is in `body`, so it
  // costs neither a copy nor an allocation. Empty when the reply names none.
  std::string_view order_id() const {
    if (order_id_size_ == 0 || size_t{order_id_at_} + order_id_size_ > body.size()) return {};
    return std::string_view(body).substr(order_id_at_, order_id_size_);
  }
  // The id's text is body[at, at + size); ignored past what the fields hold (ids are at most 64).
  void NameOrder(size_t at, size_t size) {
    if (at > UINT16_MAX || size > UINT8_MAX) return;
    order_id_at_ = static_cast<uint16_t>(at);
    order_id_size_ = static_cast<uint8_t>(size);
  }

 private:
  uint16_t order_id_at_ = 0;
  uint8_t order_id_size_ = 0;
};

// {"status":"<word>","error":"<message>"}
Reply ErrorReply(http::status status, Word word, std::string_view message);
Reply JsonReply(http::status status, Word word, std::string body);

}  // namespace flashsale::server
