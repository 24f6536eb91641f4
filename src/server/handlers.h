#pragma once
// Route handlers: each turns one request into a use-case call and its result into a Reply.
// The route table that maps paths to them is in routes.cc.

#include <array>
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "server/cors.h"
#include "server/identity.h"
#include "server/metrics.h"
#include "server/reply.h"
#include "server/router.h"
#include "service/context.h"

namespace flashsale::server {

// What Dispatch and the handlers on one I/O thread share.
struct WorkerServices {
  service::ServiceContext& service;
  MetricsShard& metrics;
  const Metrics& all_metrics;
  const IdentityConfig& identity;
  // Readiness of the parts outside the process: what failed reaching Redis and the database
  // (endpoints included: for the log and the admin only); both empty when ready.
  struct Readiness {
    std::string redis;
    std::string db;
  };
  std::function<boost::asio::awaitable<Readiness>()> check_ready;
  // Set while the server drains for shutdown.
  const bool* draining = nullptr;
  // The origins whose pages may call the public routes (server/cors.h).
  const CorsPolicy* cors = nullptr;
  // The routes served (Routes(), or OpsRoutes() for `flashsale worker`).
  std::span<const Route> routes;
  // Take the client address from X-Forwarded-For (behind a proxy we trust).
  bool trust_forwarded_for = false;
};

// One request being handled.
struct Call {
  const Request& request;
  std::array<std::string_view, 2> params;  // the {..} segments of the route, in order
  std::string_view query;
  std::string user_id;  // for Access::kUser routes
  std::string_view client_address;
  WorkerServices& worker;
};

boost::asio::awaitable<Reply> HandlePurchase(Call& call);
boost::asio::awaitable<Reply> HandleDraw(Call& call);
boost::asio::awaitable<Reply> HandleTicket(Call& call);
boost::asio::awaitable<Reply> HandlePay(Call& call);
// POST /api/v1/activities/{id}/join and GET .../wait?wait_ms=N: the waiting room (issue 37,
// service/waiting_room.h); the reply is the caller's place (server/replies.h RoomReply).
boost::asio::awaitable<Reply> HandleRoomJoin(Call& call);
boost::asio::awaitable<Reply> HandleRoomWait(Call& call);
boost::asio::awaitable<Reply> HandleActivityInfo(Call& call);
boost::asio::awaitable<Reply> HandleActivityList(Call& call);
// What a page needs to know of the service: {"identity": "token" | "gateway" | "jwt"}.
boost::asio::awaitable<Reply> HandleConfig(Call& call);
boost::asio::awaitable<Reply> HandleOrders(Call& call);
boost::asio::awaitable<Reply> HandleAdminList(Call& call);
boost::asio::awaitable<Reply> HandleAdminCreate(Call& call);
boost::asio::awaitable<Reply> HandleAdminGet(Call& call);
boost::asio::awaitable<Reply> HandleAdminUpdate(Call& call);
boost::asio::awaitable<Reply> HandleAdminOpen(Call& call);
boost::asio::awaitable<Reply> HandleAdminClose(Call& call);
boost::asio::awaitable<Reply> HandleAdminStock(Call& call);
// DELETE /api/v1/admin/activities/{id}: an activity that sold nothing.
boost::asio::awaitable<Reply> HandleAdminDelete(Call& call);
boost::asio::awaitable<Reply> HandleAdminDeadLetters(Call& call);
boost::asio::awaitable<Reply> HandleAdminRetryDeadLetter(Call& call);
boost::asio::awaitable<Reply> HandleAdminToken(Call& call);
boost::asio::awaitable<Reply> HandleAdminJob(Call& call);
// GET /api/v1/admin/redis: Redis restarts and failovers seen, freezes and repairs
// (service/redis_watch.h).
boost::asio::awaitable<Reply> HandleAdminRedis(Call& call);
// GET /api/v1/admin/events?after=&limit=&wait_ms=: the record's order events after a cursor
// (service/events.h), {"events": [...], "next": cursor}.
boost::asio::awaitable<Reply> HandleAdminEvents(Call& call);
// GET /api/v1/admin/activities/{id}/orders?after=&limit=&state=&format=: one page of the
// activity's orders, JSON or CSV (by format=, else Accept), the next page's cursor in
// X-Next-Cursor (server/replies.h OrdersPageReply; the export, issue 35 point 3).
boost::asio::awaitable<Reply> HandleAdminOrders(Call& call);
// GET /api/v1/admin/activities/{id}/report: the report after the sale (issue 35, point 4), from the
// record: orders per second, totals by state, time to sell out, prizes won, refusals.
boost::asio::awaitable<Reply> HandleAdminReport(Call& call);
// GET /api/v1/admin/webhooks/parked: webhook deliveries that kept failing (service/event_relay.h);
// POST /api/v1/admin/webhooks/retry: ask for them to be tried again ({"receiver": URL} or all).
boost::asio::awaitable<Reply> HandleAdminWebhooksParked(Call& call);
boost::asio::awaitable<Reply> HandleAdminWebhooksRetry(Call& call);
// OPTIONS on a public route: a CORS preflight. 204 with Allow (the path's methods) and, for a page
// of an allowed origin, the Access-Control-* a browser needs before the request itself.
boost::asio::awaitable<Reply> HandlePreflight(Call& call);
boost::asio::awaitable<Reply> HandleHealth(Call& call);
boost::asio::awaitable<Reply> HandleReady(Call& call);
boost::asio::awaitable<Reply> HandleMetrics(Call& call);
// The files of web/: the buyer page at /, the dashboard at /dashboard, the rest at /web/{file}.
boost::asio::awaitable<Reply> HandlePage(Call& call);
boost::asio::awaitable<Reply> HandleDashboard(Call& call);
// The report page, /report?activity=<id> (web/report.html).
boost::asio::awaitable<Reply> HandleReportPage(Call& call);
boost::asio::awaitable<Reply> HandleWebFile(Call& call);

}  // namespace flashsale::server
