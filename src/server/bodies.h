#pragma once
// Request bodies: JSON in, typed values out, every mistake a kInvalidArgument naming the field.
// Pure functions (no I/O), so the fuzzer drives them directly. Unknown fields are refused, so a
// misspelt field is an error rather than a silently ignored setting.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/activity.h"
#include "store/store.h"

namespace flashsale::server {

// POST .../purchase: empty, or {"quantity": n}. The quantity (1 by default).
base::Result<int64_t> ParsePurchaseBody(std::string_view body);

// GET .../tickets/{ticket}: empty, or "wait_ms=N" (0 to 25000): how long to hold the request
// open waiting for the draw (a long poll).
base::Result<int64_t> ParseTicketQuery(std::string_view query);

// GET /api/v1/admin/events: "after=<cursor>&limit=N&wait_ms=M", each optional, in any order:
// after >= 0 (default 0), limit 1..1000 (default 100), wait_ms 0..25000 (default 0).
struct EventsQuery {
  int64_t after = 0;
  int64_t limit = 100;
  int64_t wait_ms = 0;
};
base::Result<EventsQuery> ParseEventsQuery(std::string_view query);

// GET /api/v1/admin/activities/{id}/orders (the export, issue 35 point 3):
// "after=<cursor>&limit=N&state=S,S&format=F", each optional and at most once, in any order: after
// a page's cursor (base64url), limit 1..10000 (default 1000), state any of reserved, paid and
// cancelled, comma-separated ("%2C" too; default every state), format csv or json (default: as
// the Accept header asks, OrdersFormatFor).
enum class OrdersFormat { kJson, kCsv };
struct OrdersQuery {
  std::string after;
  int64_t limit = 1000;
  store::OrderStates states;
  std::optional<OrdersFormat> format;
};
base::Result<OrdersQuery> ParseOrdersQuery(std::string_view query);
// The reply's form: the query's format when it names one; else CSV when the Accept header ranks
// text/csv above application/json (by q, then the range naming it more exactly: text/csv over
// text/* over */*), else JSON (an absent or empty Accept, or a tie).
OrdersFormat OrdersFormatFor(const OrdersQuery& query, std::string_view accept);

// POST /api/v1/admin/webhooks/retry: empty (every receiver), or {"receiver": URL}.
base::Result<std::string> ParseWebhookRetryBody(std::string_view body);

// POST .../draw: empty or {}.
base::Status ParseDrawBody(std::string_view body);

// POST /api/v1/admin/activities:
//   {"id": "phone", "title": "...", "kind": "counted"|"items", "start_ms": t, "end_ms": t,
//    "per_user_limit": n, "open": true, "stock": n, "items": ["C1", ...],
//    "user_rate": {"per_second": r, "burst": b}, "address_rate": {...},
//    "payment_window_ms": ms (0: orders never expire),
//    "webhook_urls": ["http://host[:port][/path]", ...] (this activity's own webhook receivers,
//    besides --webhook-url; at most 8),
//    "waiting_room": {"opens_before_ms", "admit_per_s", "pass_ttl_ms", "max_waiting"} or null
//    (core/waiting_room.h; a sale only)}
// or, for a lottery, "kind": "lottery" with "prizes": [{"id", "name", "weight", "stock"}, ...],
// "no_prize_weight": w, "admission": "direct"|"queue"|"fifo", "queue_capacity": n (the
// per-user limit then counts draws).
// Defaults: kind counted, start now, end one hour after the start, limit 1, open; a lottery:
// no_prize_weight 0, admission direct. What GET .../admin/activities/{id} returns is accepted
// back: "total_units" is the stock (alone it sets a counted stock; otherwise it must agree),
// a null rate is off, "version", "created_ms" and "updated_ms" are ignored.
base::Result<core::Activity> ParseActivityBody(std::string_view body, int64_t now_ms);

// PATCH /api/v1/admin/activities/{id}: any of title, start_ms, end_ms, per_user_limit, open,
// user_rate, address_rate (null: off), payment_window_ms, webhook_urls ([]: none), waiting_room
// (null: none). It also takes
// back what GET returns: version, created_ms and updated_ms are ignored; id, kind, total_units and
// a lottery's prizes, no_prize_weight, admission and queue_capacity must equal `current`'s (when
// given) or the update is refused naming the field.
base::Result<store::ActivityUpdate> ParseActivityUpdate(
    std::string_view body, const store::ActivityRecord* current = nullptr);

// POST .../stock: {"units": n} (counted) or {"items": ["C7", ...]} (itemised).
struct StockBody {
  int64_t units = 0;
  std::vector<std::string> items;
};
base::Result<StockBody> ParseStockBody(std::string_view body);

// POST /api/v1/admin/jobs/{job}: empty, or {"activity_id": "phone", "repair": false}.
struct JobBody {
  std::string activity_id;  // empty: every activity
  bool repair = true;
};
base::Result<JobBody> ParseJobBody(std::string_view body);

// POST /api/v1/admin/tokens: {"user_id": "alice", "ttl_s": 3600}.
struct TokenBody {
  std::string user_id;
  int64_t ttl_s = 3600;
};
base::Result<TokenBody> ParseTokenBody(std::string_view body);

}  // namespace flashsale::server
