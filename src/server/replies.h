#pragma once
// Every mapping of a result to a reply, in one file: a purchase's and a draw's outcome as the
// hot-path contract's reply (docs/design.md, "Reply codes"; api/openapi.json), a use-case error as
// a status and words, an HTTP parse error, a payment's outcome. Pure formatting of the results;
// nothing here looks anything up. Handlers call these; the session and Dispatch only for the
// errors that come before a handler (a request that does not parse).

#include <boost/system/error_code.hpp>
#include <string_view>

#include "base/result.h"
#include "core/outcome.h"
#include "server/reply.h"
#include "service/draw.h"
#include "service/purchase.h"
#include "service/waiting_room.h"
#include "store/store.h"

namespace flashsale::server {

// The status word of an outcome: a purchase's, and a draw's ("won", "no_prize",
// "limit_reached", else as WordFor).
Word WordFor(core::Outcome outcome);
Word DrawWordFor(core::Outcome outcome);

Reply PurchaseOutcomeReply(std::string_view activity_id, const service::PurchaseResult& result);
// A decided draw (not a queued one: QueuedDrawReply; not an unknown one).
Reply DrawOutcomeReply(std::string_view activity_id, const service::DrawResult& result);
// 202 with the ticket to poll.
Reply QueuedDrawReply(std::string_view activity_id, std::string_view ticket);
// 202: the ticket is not decided yet.
Reply PendingTicketReply(std::string_view activity_id, std::string_view ticket);
// The waiting room (issue 37): 200 {"status": drawing|waiting|admitted|sold_out|not_joined,
// "activity_id", "place" (null until the start), "ahead", "waiting", "admit_at_ms" (null when
// none), "estimate_ms", "start_ms", "server_time_ms", "joined" (a join that took the place) and,
// admitted, "pass" and "pass_expires_ms"}.
Reply RoomReply(std::string_view activity_id, const service::RoomView& view);
// A purchase of a sale with a waiting room without a valid pass: 403 {"code": -13, "status":
// "pass_required", "activity_id", "error"}. Answered before Redis.
inline constexpr int kPassRequiredCode = -13;
Reply PassRequiredReply(std::string_view activity_id, std::string_view why);
// A purchase or draw whose outcome Redis did not report: 503 unknown_outcome with the order id
// it may exist under (GET /api/v1/orders shows it once it does); a retry with the same
// Idempotency-Key gets the first outcome. `reason` is logged, never sent.
Reply UnknownOutcomeReply(std::string_view activity_id, std::string_view order_id,
                          std::string_view reason, service::Use use);
// POST /api/v1/orders/{id}/pay: paid (or paid before), or refused (the order expired first) and
// flagged for a refund; an error as PaymentErrorReply.
Reply PaymentReply(std::string_view order_id, store::PayOutcome outcome);
Reply PaymentErrorReply(const base::Error& error);

// GET /api/v1/admin/activities/{id}/orders: one page of the export. JSON: {"orders": [...],
// "next": cursor or null}; CSV (text/csv, RFC 4180): a header row, then a row per order, text
// fields under the formula guard (base/csv.h). Either way the next page's cursor is in the
// X-Next-Cursor header, absent on the last page. Each order: order_id, activity_id, user_id,
// quantity, items (a sale's item ids; CSV: space-separated), prize and draw_no (a lottery win;
// null or empty for a sale), state, refund_due, compensation_due, created_ms, persisted_ms,
// paid_ms and cancelled_ms (when the state is paid or cancelled; null or empty otherwise).
Reply OrdersPageReply(const store::OrderPage& page, bool csv);
// The CSV header row of OrdersPageReply, CRLF included.
std::string_view OrdersCsvHeader();

// A use-case error as a reply: 400 for bad input, 404 not found, 409 exists or a state that
// forbids the operation, 503 for Redis or the database being unavailable (with Retry-After), 500
// only for our own bugs.
Reply ErrorToReply(const base::Error& error);
// A request that does not parse: 431, 413 or 400, and the connection closed after it.
Reply ParseErrorReply(const boost::system::error_code& error);
// The admin reads what failed where (Reply::detail); the public reads words (ErrorToReply).
Reply AdminDetail(Reply reply);

}  // namespace flashsale::server
