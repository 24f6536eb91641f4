// Route matching over the service's one route table, with no server: which route a target
// reaches, its parameters, the query, and the 404/405 cases with their Allow header.

#include "server/router.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace flashsale::server {
namespace {

using http::verb;

const Route* Find(verb method, std::string_view target) {
  return MatchRoute(Routes(), method, target).route;
}

TEST(RouterTest, TheHotPathRoutesTakeTheActivityId) {
  const RouteMatch purchase = MatchRoute(Routes(), verb::post, "/api/v1/activities/phone/purchase");
  ASSERT_NE(purchase.route, nullptr);
  EXPECT_EQ(purchase.route->id, RouteId::kPurchase);
  EXPECT_EQ(purchase.route->access, Access::kUser);
  EXPECT_EQ(purchase.params[0], "phone");

  const RouteMatch draw = MatchRoute(Routes(), verb::post, "/api/v1/activities/spring/draw");
  ASSERT_NE(draw.route, nullptr);
  EXPECT_EQ(draw.route->id, RouteId::kDraw);
  EXPECT_EQ(draw.params[0], "spring");
}

TEST(RouterTest, TwoParametersAndTheQueryAreSeparated) {
  const RouteMatch ticket =
      MatchRoute(Routes(), verb::get, "/api/v1/activities/spring/tickets/t42?wait_ms=100");
  ASSERT_NE(ticket.route, nullptr);
  EXPECT_EQ(ticket.route->id, RouteId::kTicket);
  EXPECT_EQ(ticket.params[0], "spring");
  EXPECT_EQ(ticket.params[1], "t42");
  EXPECT_EQ(ticket.query, "wait_ms=100");

  const RouteMatch retry =
      MatchRoute(Routes(), verb::post, "/api/v1/admin/activities/sale/dead-letters/1-0/retry");
  ASSERT_NE(retry.route, nullptr);
  EXPECT_EQ(retry.route->access, Access::kAdmin);
  EXPECT_EQ(retry.params[0], "sale");
  EXPECT_EQ(retry.params[1], "1-0");
}

TEST(RouterTest, AdminRoutesNeedTheAdminAndPublicReadsNobody) {
  for (const Route& route : Routes()) {
    SCOPED_TRACE(std::string(route.pattern));
    if (route.pattern.starts_with("/api/v1/admin/")) {
      EXPECT_EQ(route.access, Access::kAdmin);
    }
    if (route.id == RouteId::kPurchase || route.id == RouteId::kDraw ||
        route.id == RouteId::kTicket || route.id == RouteId::kOrders) {
      EXPECT_EQ(route.access, Access::kUser);
    }
  }
  EXPECT_EQ(Find(verb::get, "/api/v1/activities")->access, Access::kPublic);
  EXPECT_EQ(Find(verb::get, "/healthz")->access, Access::kPublic);
}

TEST(RouterTest, NoTwoRoutesShareAMethodAndPattern) {
  std::set<std::pair<int, std::string_view>> seen;
  for (const Route& route : Routes()) {
    EXPECT_TRUE(seen.emplace(static_cast<int>(route.method), route.pattern).second)
        << route.pattern;
  }
}

TEST(RouterTest, UnknownPathsMatchNothingAndSayNoAllow) {
  for (std::string_view target :
       {"/", "/api", "/api/v1", "/api/v1/activities/phone/purchase/extra",
        "/api/v1/activities//purchase", "/api/v1/activities/phone/buy", "api/v1/activities",
        "/api/v1/activities/phone/tickets/", "/API/V1/ACTIVITIES", "", "//", "/healthz/"}) {
    SCOPED_TRACE(std::string(target));
    const RouteMatch match = MatchRoute(Routes(), verb::post, target);
    EXPECT_EQ(match.route, nullptr);
    if (target != "/" && target != "/healthz/") {
      EXPECT_TRUE(match.allow.empty()) << match.allow;
    }
  }
}

TEST(RouterTest, AKnownPathWithAnotherMethodListsTheMethodsItTakes) {
  const RouteMatch purchase = MatchRoute(Routes(), verb::get, "/api/v1/activities/phone/purchase");
  EXPECT_EQ(purchase.route, nullptr);
  EXPECT_EQ(purchase.allow, "POST, OPTIONS");  // OPTIONS: its CORS preflight (server/cors.h)

  const RouteMatch admin = MatchRoute(Routes(), verb::delete_, "/api/v1/admin/activities");
  EXPECT_EQ(admin.route, nullptr);
  EXPECT_EQ(admin.allow, "GET, POST");
}

TEST(RouterTest, AParameterIsOneWholeSegment) {
  const RouteMatch match = MatchRoute(Routes(), verb::get, "/api/v1/activities/a%2Fb");
  ASSERT_NE(match.route, nullptr);
  EXPECT_EQ(match.params[0], "a%2Fb");  // decoding and validation are the handler's
  EXPECT_EQ(Find(verb::get, "/api/v1/activities/a/b"), nullptr);
}

}  // namespace
}  // namespace flashsale::server
