// The OpenAPI description (api/openapi.json) against the server: it is served byte for byte at
// /api/v1/openapi.json, it documents exactly the routes of the route table, and the routes other
// tests here reach rarely are called once so that their replies are validated too
// (scripts/api-test.sh validates every reply server_integration_test receives against the
// description).

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "server/router.h"
#include "server/server_fixture.h"

namespace flashsale::server {
namespace {

namespace json = boost::json;
using testing::RedisServer;
using testing::ServerFixture;

std::string RepositoryFile(const std::string& relative) {
  std::ifstream in(std::string(FLASHSALE_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

class ApiHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }
  void SetUp() override { server_ = std::make_unique<ServerFixture>(*redis_); }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
};
RedisServer* ApiHttpTest::redis_ = nullptr;

TEST_F(ApiHttpTest, TheDescriptionIsServedAsInTheRepository) {
  const std::string file = RepositoryFile("api/openapi.json");
  ASSERT_FALSE(file.empty());
  auto client = server_->Client();
  auto reply = client.Get("/api/v1/openapi.json");
  ASSERT_EQ(reply.status, 200);
  EXPECT_EQ(reply.headers["content-type"], "application/json");
  EXPECT_EQ(reply.body, file);
  ASSERT_FALSE(reply.headers["etag"].empty());
  auto again = client.Get("/api/v1/openapi.json", {{"If-None-Match", reply.headers["etag"]}});
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());
}

TEST_F(ApiHttpTest, TheDescriptionDocumentsExactlyTheRouteTable) {
  boost::system::error_code error;
  const json::value spec = json::parse(RepositoryFile("api/openapi.json"), error);
  ASSERT_FALSE(error) << error.message();
  EXPECT_EQ(spec.at("openapi").as_string(), "3.1.0");
  EXPECT_EQ(spec.at("info").at("version").as_string(), FLASHSALE_PROJECT_VERSION)
      << "api/openapi.json's info.version is not the project's version (CMakeLists.txt)";
  const json::object& paths = spec.at("paths").as_object();
  std::set<std::string> in_table;
  for (const Route& route : Routes()) {
    const std::string method = Lower(http::to_string(route.method));
    const std::string pattern(route.pattern);
    in_table.insert(method + " " + pattern);
    const auto* item = paths.if_contains(pattern);
    ASSERT_NE(item, nullptr) << pattern << " is not in api/openapi.json";
    EXPECT_NE(item->as_object().if_contains(method), nullptr)
        << method << " " << pattern << " is not in api/openapi.json";
  }
  for (const auto& [path, item] : paths) {
    for (const auto& [method, operation] : item.as_object()) {
      EXPECT_TRUE(in_table.contains(std::string(method) + " " + std::string(path)))
          << method << " " << path << " is documented but not served";
    }
  }
}

// Replies of routes the other tests here call rarely; their shapes are checked by the API test.
TEST_F(ApiHttpTest, OperatorRoutesAnswer) {
  auto client = server_->Client();
  ASSERT_EQ(
      client.Post("/api/v1/admin/activities", R"({"id":"ops","stock":3})", server_->Admin()).status,
      201);
  EXPECT_EQ(client.Post("/api/v1/activities/ops/purchase", "", ServerFixture::User("u1")).status,
            200);
  EXPECT_EQ(client.Get("/api/v1/orders", ServerFixture::User("u1")).status, 200);
  EXPECT_EQ(client.Get("/api/v1/activities").status, 200);
  EXPECT_EQ(client
                .Post("/api/v1/admin/jobs/reconcile", R"({"activity_id":"ops","repair":false})",
                      server_->Admin())
                .status,
            200);
  EXPECT_EQ(client.Post("/api/v1/admin/jobs/prewarm", "", server_->Admin()).status, 200);
  EXPECT_EQ(client.Post("/api/v1/admin/jobs/expire", "", server_->Admin()).status, 200);
  EXPECT_EQ(client.Get("/api/v1/admin/activities/ops", server_->Admin()).status, 200);
  EXPECT_EQ(client.Get("/api/v1/admin/activities", server_->Admin()).status, 200);
  EXPECT_EQ(client.Get("/api/v1/admin/activities/ops/dead-letters", server_->Admin()).status, 200);
  EXPECT_EQ(
      client.Post("/api/v1/admin/tokens", R"({"user_id":"alice","ttl_s":60})", server_->Admin())
          .status,
      200);
  EXPECT_EQ(client.Get("/healthz").status, 200);
  EXPECT_EQ(client.Get("/readyz").status, 200);
  EXPECT_EQ(client.Get("/metrics").status, 200);
  EXPECT_EQ(client.Get("/").status, 200);
  EXPECT_EQ(client.Get("/dashboard").status, 200);
  EXPECT_EQ(client.Get("/web/nope.css").status, 404);
  EXPECT_EQ(client.Post("/api/v1/orders/nope/pay", "", ServerFixture::User("u1")).status, 404);
  EXPECT_EQ(client.Post("/api/v1/admin/jobs/nope", "", server_->Admin()).status, 404);
  EXPECT_EQ(client.Get("/api/v1/admin/activities", {}).status, 401);
}

}  // namespace
}  // namespace flashsale::server
