// The route table: every path the service answers, who may call it, and its handler.

#include "server/api_spec.h"
#include "server/handlers.h"
#include "server/router.h"

namespace flashsale::server {

namespace {

using http::verb;
constexpr Names kActivity = Names::kActivity;

constexpr Route kRoutes[] = {
    // The hot path (docs/design.md, "The hot path").
    {verb::post, "/api/v1/activities/{id}/purchase", RouteId::kPurchase, Access::kUser,
     HandlePurchase, kActivity},
    {verb::post, "/api/v1/activities/{id}/draw", RouteId::kDraw, Access::kUser, HandleDraw,
     kActivity},
    {verb::get, "/api/v1/activities/{id}/tickets/{ticket}", RouteId::kTicket, Access::kUser,
     HandleTicket, kActivity},
    // The waiting room (issue 37, service/waiting_room.h).
    {verb::post, "/api/v1/activities/{id}/join", RouteId::kRoom, Access::kUser, HandleRoomJoin,
     kActivity},
    {verb::get, "/api/v1/activities/{id}/wait", RouteId::kRoom, Access::kUser, HandleRoomWait,
     kActivity},
    // Public reads.
    {verb::get, "/api/v1/activities", RouteId::kActivity, Access::kPublic, HandleActivityList},
    {verb::get, "/api/v1/activities/{id}", RouteId::kActivity, Access::kPublic, HandleActivityInfo,
     kActivity},
    {verb::get, "/api/v1/config", RouteId::kActivity, Access::kPublic, HandleConfig},
    {verb::get, "/api/v1/orders", RouteId::kOrders, Access::kUser, HandleOrders},
    {verb::post, "/api/v1/orders/{id}/pay", RouteId::kOrders, Access::kUser, HandlePay},
    // Operators.
    {verb::get, "/api/v1/admin/activities", RouteId::kAdmin, Access::kAdmin, HandleAdminList},
    {verb::post, "/api/v1/admin/activities", RouteId::kAdmin, Access::kAdmin, HandleAdminCreate},
    {verb::get, "/api/v1/admin/activities/{id}", RouteId::kAdmin, Access::kAdmin, HandleAdminGet,
     kActivity},
    {verb::patch, "/api/v1/admin/activities/{id}", RouteId::kAdmin, Access::kAdmin,
     HandleAdminUpdate, kActivity},
    {verb::delete_, "/api/v1/admin/activities/{id}", RouteId::kAdmin, Access::kAdmin,
     HandleAdminDelete, kActivity},
    {verb::post, "/api/v1/admin/activities/{id}/open", RouteId::kAdmin, Access::kAdmin,
     HandleAdminOpen, kActivity},
    {verb::post, "/api/v1/admin/activities/{id}/close", RouteId::kAdmin, Access::kAdmin,
     HandleAdminClose, kActivity},
    {verb::post, "/api/v1/admin/activities/{id}/stock", RouteId::kAdmin, Access::kAdmin,
     HandleAdminStock, kActivity},
    {verb::get, "/api/v1/admin/activities/{id}/dead-letters", RouteId::kAdmin, Access::kAdmin,
     HandleAdminDeadLetters, kActivity},
    {verb::post, "/api/v1/admin/activities/{id}/dead-letters/{entry}/retry", RouteId::kAdmin,
     Access::kAdmin, HandleAdminRetryDeadLetter, kActivity},
    // The export (issue 35, point 3): an activity's orders, a page at a time.
    {verb::get, "/api/v1/admin/activities/{id}/orders", RouteId::kAdmin, Access::kAdmin,
     HandleAdminOrders, kActivity},
    // The report after the sale (issue 35, point 4).
    {verb::get, "/api/v1/admin/activities/{id}/report", RouteId::kAdmin, Access::kAdmin,
     HandleAdminReport, kActivity},
    {verb::post, "/api/v1/admin/tokens", RouteId::kAdmin, Access::kAdmin, HandleAdminToken},
    {verb::post, "/api/v1/admin/jobs/{job}", RouteId::kAdmin, Access::kAdmin, HandleAdminJob},
    {verb::get, "/api/v1/admin/redis", RouteId::kAdmin, Access::kAdmin, HandleAdminRedis},
    {verb::get, "/api/v1/admin/events", RouteId::kAdmin, Access::kAdmin, HandleAdminEvents},
    {verb::get, "/api/v1/admin/webhooks/parked", RouteId::kAdmin, Access::kAdmin,
     HandleAdminWebhooksParked},
    {verb::post, "/api/v1/admin/webhooks/retry", RouteId::kAdmin, Access::kAdmin,
     HandleAdminWebhooksRetry},
    // CORS preflights of the public routes a page of another origin may call (server/cors.h);
    // never of the admin routes.
    {verb::options, "/api/v1/activities/{id}/purchase", RouteId::kPreflight, Access::kPublic,
     HandlePreflight, kActivity},
    {verb::options, "/api/v1/activities/{id}/draw", RouteId::kPreflight, Access::kPublic,
     HandlePreflight, kActivity},
    {verb::options, "/api/v1/activities/{id}/tickets/{ticket}", RouteId::kPreflight,
     Access::kPublic, HandlePreflight, kActivity},
    {verb::options, "/api/v1/activities/{id}/join", RouteId::kPreflight, Access::kPublic,
     HandlePreflight, kActivity},
    {verb::options, "/api/v1/activities/{id}/wait", RouteId::kPreflight, Access::kPublic,
     HandlePreflight, kActivity},
    {verb::options, "/api/v1/activities", RouteId::kPreflight, Access::kPublic, HandlePreflight},
    {verb::options, "/api/v1/activities/{id}", RouteId::kPreflight, Access::kPublic,
     HandlePreflight, kActivity},
    {verb::options, "/api/v1/config", RouteId::kPreflight, Access::kPublic, HandlePreflight},
    {verb::options, "/api/v1/orders", RouteId::kPreflight, Access::kPublic, HandlePreflight},
    {verb::options, "/api/v1/orders/{id}/pay", RouteId::kPreflight, Access::kPublic,
     HandlePreflight},
    // Operations.
    {verb::get, "/healthz", RouteId::kHealth, Access::kPublic, HandleHealth},
    {verb::get, "/readyz", RouteId::kReady, Access::kPublic, HandleReady},
    {verb::get, "/metrics", RouteId::kMetrics, Access::kPublic, HandleMetrics},
    {verb::get, "/api/v1/openapi.json", RouteId::kPage, Access::kPublic, HandleOpenApi},
    // The buyer page, the operator dashboard and their files (web/).
    {verb::get, "/", RouteId::kPage, Access::kPublic, HandlePage},
    {verb::get, "/dashboard", RouteId::kPage, Access::kPublic, HandleDashboard},
    {verb::get, "/report", RouteId::kPage, Access::kPublic, HandleReportPage},
    {verb::get, "/web/{file}", RouteId::kPage, Access::kPublic, HandleWebFile},
};

// flashsale worker: no buyer, admin or page routes.
constexpr Route kOpsRoutes[] = {
    {verb::get, "/healthz", RouteId::kHealth, Access::kPublic, HandleHealth},
    {verb::get, "/readyz", RouteId::kReady, Access::kPublic, HandleReady},
    {verb::get, "/metrics", RouteId::kMetrics, Access::kPublic, HandleMetrics},
};

}  // namespace

std::span<const Route> Routes() { return kRoutes; }
std::span<const Route> OpsRoutes() { return kOpsRoutes; }

}  // namespace flashsale::server
