#pragma once
// A purchase's and a draw's outcome as the hot-path contract's reply (docs/design.md, "Reply
// codes"; api/openapi.json): the JSON body, the HTTP status, Retry-After and the status word. Pure
// formatting of the use cases' results; nothing here looks anything up.

#include <string_view>

#include "server/reply.h"
#include "service/draw.h"
#include "service/purchase.h"

namespace flashsale::server {

Reply PurchaseOutcomeReply(std::string_view activity_id, const service::PurchaseResult& result);
// A decided draw (not a queued one: QueuedDrawReply; not an unknown one).
Reply DrawOutcomeReply(std::string_view activity_id, const service::DrawResult& result);
// 202 with the ticket to poll.
Reply QueuedDrawReply(std::string_view activity_id, std::string_view ticket);

}  // namespace flashsale::server
