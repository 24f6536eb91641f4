// CORS for a shop front on another origin (issue 32 point 11), through the route table and the
// session of a server in the test process: preflights of the public routes answered for allowed
// origins only, never for the admin routes; answers carrying Access-Control-Allow-Origin for an
// allowed origin only. The API test checks every exchange here against api/openapi.json too.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <map>
#include <string>
#include <vector>

#include "server/server_fixture.h"

namespace flashsale::server {
namespace {

using testing::HttpClient;
using testing::HttpResult;
using testing::RedisServer;
using testing::ServerFixture;

constexpr std::string_view kShop = "http://shop.example";

class CorsHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }

  // A server allowing `origins` (none: CORS off), with the sale "sale" created.
  void Start(std::vector<std::string> origins) {
    testing::ServerFixtureOptions options;
    options.server.cors_origins = std::move(origins);
    server_ = std::make_unique<ServerFixture>(*redis_, options);
    ASSERT_EQ(server_->Client()
                  .Post("/api/v1/admin/activities", R"({"id":"sale","stock":5})", server_->Admin())
                  .status,
              201);
  }

  static HttpResult Preflight(HttpClient& client, const std::string& target,
                              std::string_view origin, std::string_view method) {
    return client.Request("OPTIONS", target, "",
                          {{"Origin", std::string(origin)},
                           {"Access-Control-Request-Method", std::string(method)},
                           {"Access-Control-Request-Headers", "authorization,content-type"}});
  }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
};
RedisServer* CorsHttpTest::redis_ = nullptr;

TEST_F(CorsHttpTest, APreflightOfAPublicRouteIsAnsweredForAnAllowedOriginOnly) {
  Start({std::string(kShop)});
  HttpClient client = server_->Client();
  auto allowed = Preflight(client, "/api/v1/activities/sale/purchase", kShop, "POST");
  EXPECT_EQ(allowed.status, 204) << allowed.body;
  EXPECT_TRUE(allowed.body.empty());
  EXPECT_EQ(allowed.headers.count("content-length"), 0u) << "a 204 has no Content-Length";
  EXPECT_EQ(allowed.headers["allow"], "POST, OPTIONS");
  EXPECT_EQ(allowed.headers["access-control-allow-origin"], kShop);
  EXPECT_EQ(allowed.headers["access-control-allow-methods"], "POST, OPTIONS");
  EXPECT_EQ(allowed.headers["access-control-allow-headers"],
            "Authorization, Content-Type, Idempotency-Key, X-User-Id, X-Waiting-Room-Pass");
  EXPECT_EQ(allowed.headers["access-control-max-age"], "600");
  EXPECT_EQ(allowed.headers["vary"], "Origin");
  EXPECT_EQ(allowed.headers.count("access-control-allow-credentials"), 0u);
  // The same answer on the keep-alive connection, and for the reads.
  auto reads = Preflight(client, "/api/v1/activities/sale", kShop, "GET");
  EXPECT_EQ(reads.status, 204);
  EXPECT_EQ(reads.headers["access-control-allow-methods"], "GET, OPTIONS");

  // An origin not allowed: 204 with the methods, nothing a browser would take as a yes.
  auto stranger =
      Preflight(client, "/api/v1/activities/sale/purchase", "http://evil.example", "POST");
  EXPECT_EQ(stranger.status, 204);
  EXPECT_EQ(stranger.headers["allow"], "POST, OPTIONS");
  EXPECT_EQ(stranger.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(stranger.headers.count("access-control-allow-methods"), 0u);
  EXPECT_EQ(stranger.headers["vary"], "Origin");
  // Almost the origin is not the origin: another scheme, port or host.
  for (std::string_view near :
       {"https://shop.example", "http://shop.example:8080", "http://shop.example.evil", "null"}) {
    auto answer = Preflight(client, "/api/v1/orders", near, "GET");
    EXPECT_EQ(answer.headers.count("access-control-allow-origin"), 0u) << near;
  }
  // Browsers send the origin in lower case; the configured one matches whatever its case.
  EXPECT_EQ(Preflight(client, "/api/v1/config", "HTTP://SHOP.EXAMPLE", "GET")
                .headers["access-control-allow-origin"],
            kShop);
}

TEST_F(CorsHttpTest, TheAdminAndOperationsRoutesAnswerNoPreflight) {
  Start({std::string(kShop)});
  HttpClient client = server_->Client();
  for (const std::string target :
       {"/api/v1/admin/activities", "/api/v1/admin/activities/sale", "/api/v1/admin/tokens",
        "/api/v1/admin/jobs/reconcile", "/metrics", "/healthz"}) {
    SCOPED_TRACE(target);
    auto answer = Preflight(client, target, kShop, "POST");
    EXPECT_EQ(answer.status, 405) << answer.body;
    EXPECT_EQ(answer.headers.count("access-control-allow-origin"), 0u);
    EXPECT_EQ(answer.headers.count("access-control-allow-methods"), 0u);
  }
}

TEST_F(CorsHttpTest, AnswersCarryTheOriginForAnAllowedOriginOnAPublicRouteOnly) {
  Start({std::string(kShop), "https://other.example:8443"});
  HttpClient client = server_->Client();
  auto bought = client.Post("/api/v1/activities/sale/purchase", "",
                            {{"X-User-Id", "ann"}, {"Origin", std::string(kShop)}});
  EXPECT_EQ(bought.status, 200) << bought.body;
  EXPECT_EQ(bought.headers["access-control-allow-origin"], kShop);
  EXPECT_EQ(bought.headers["access-control-expose-headers"], "Location, Retry-After");
  EXPECT_EQ(bought.headers["vary"], "Origin");
  // A refusal the page must be able to read is readable too: a 401.
  auto refused = client.Get("/api/v1/orders", {{"Origin", "https://other.example:8443"}});
  EXPECT_EQ(refused.status, 401) << refused.body;
  EXPECT_EQ(refused.headers["access-control-allow-origin"], "https://other.example:8443");

  auto stranger = client.Get("/api/v1/activities", {{"Origin", "http://evil.example"}});
  EXPECT_EQ(stranger.status, 200);
  EXPECT_EQ(stranger.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(stranger.headers["vary"], "Origin");
  auto no_origin = client.Get("/api/v1/activities");
  EXPECT_EQ(no_origin.headers.count("access-control-allow-origin"), 0u);
  // Admin and operations answers never carry it.
  auto admin_headers = server_->Admin();
  admin_headers["Origin"] = std::string(kShop);
  auto admin = client.Get("/api/v1/admin/activities", admin_headers);
  EXPECT_EQ(admin.status, 200) << admin.body;
  EXPECT_EQ(admin.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(admin.headers.count("vary"), 0u);
  auto health = client.Get("/healthz", {{"Origin", std::string(kShop)}});
  EXPECT_EQ(health.headers.count("access-control-allow-origin"), 0u);
}

TEST_F(CorsHttpTest, AStarAllowsAnyOriginAndNoneAllowsNone) {
  Start({"*"});
  HttpClient client = server_->Client();
  auto any = Preflight(client, "/api/v1/activities/sale/draw", "http://anywhere.example", "POST");
  EXPECT_EQ(any.status, 204);
  EXPECT_EQ(any.headers["access-control-allow-origin"], "*");
  EXPECT_EQ(any.headers.count("vary"), 0u) << "* does not depend on the origin";
  EXPECT_EQ(client.Get("/api/v1/config", {{"Origin", "http://anywhere.example"}})
                .headers["access-control-allow-origin"],
            "*");

  Start({});
  HttpClient off = server_->Client();
  auto none = Preflight(off, "/api/v1/activities/sale/purchase", kShop, "POST");
  EXPECT_EQ(none.status, 204);
  EXPECT_EQ(none.headers["allow"], "POST, OPTIONS");
  EXPECT_EQ(none.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(none.headers.count("vary"), 0u);
  EXPECT_EQ(off.Get("/api/v1/activities", {{"Origin", std::string(kShop)}})
                .headers.count("access-control-allow-origin"),
            0u);
}

}  // namespace
}  // namespace flashsale::server
