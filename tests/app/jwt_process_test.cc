// `flashsale serve --identity jwt` as a process (issue 35 point 2): a buyer who sends the shop's
// own access token buys as the token's `sub`; a bad token is 401 saying why; the keys rotate by
// replacing the JWKS file under the running serve; a missing setting or key set stops serve at
// start with a message naming it. Keys by openssl, JWKS and tokens by Debian's python3-jwt
// (support/jwt_kit.h). Every child is SIGKILLed by PID at the end of a test; every wait is
// bounded.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "support/flashsale_process.h"
#include "support/http_client.h"
#include "support/jwt_kit.h"
#include "support/wait.h"

namespace flashsale {
namespace {

namespace json = boost::json;
using std::chrono::seconds;
using testing::FreePort;
using testing::HttpClient;
using testing::HttpResult;
using testing::JwtKit;
using testing::ReadFile;

constexpr const char* kIssuer = "https://login.shop.example/realms/shop";
constexpr const char* kAudience = "flashsale";

int64_t NowS() {
  return std::chrono::duration_cast<seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Field(const HttpResult& result, std::string_view key) {
  boost::system::error_code ec;
  const json::value value = json::parse(result.body, ec);
  if (ec || !value.is_object() || !value.as_object().contains(key)) return "<none>";
  const json::value& field = value.at(key);
  return field.is_string() ? std::string(field.as_string()) : json::serialize(field);
}

std::map<std::string, std::string> Bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

class JwtServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kit_.RsaKey("rsa1"));
    ASSERT_TRUE(kit_.EcKey("ec1"));
    ASSERT_TRUE(kit_.WriteJwks(jwks_, {{"r1", "rsa1"}, {"e1", "ec1"}}));
  }

  std::vector<std::string> Args(std::vector<std::string> more) const {
    std::vector<std::string> args = {"serve",      "--listen",   fmt::format("127.0.0.1:{}", port_),
                                     "--data-dir", data_dir_,    "--threads",
                                     "2",          "--identity", "jwt"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  // A token spec (support/jwt_tool.py) valid for ten minutes from now.
  std::string Spec(const std::string& key, const std::string& alg, const std::string& kid,
                   const std::string& sub, const std::string& extra = "") const {
    const int64_t now = NowS();
    return fmt::format(
        R"({{"key":"{}","alg":"{}","kid":"{}","claims":{{"sub":"{}","iss":"{}","aud":"{}",)"
        R"("iat":{},"exp":{}}}{}}})",
        kit_.PrivatePem(key), alg, kid, sub, kIssuer, kAudience, now, now + 600, extra);
  }

  JwtKit kit_;
  std::string jwks_ = kit_.dir() / "jwks.json";
  std::string data_dir_ = kit_.dir() / "data";
  uint16_t port_ = FreePort();
};

TEST_F(JwtServeTest, ABuyerWithTheShopsTokenBuysAsItsSubjectAndABadTokenIs401) {
  testing::FlashsaleProcess serve(FLASHSALE_BINARY,
                                  Args({"--jwt-jwks", jwks_, "--jwt-issuer", kIssuer,
                                        "--jwt-audience", kAudience, "--jwt-jwks-refresh-s", "1"}),
                                  kit_.dir() / "serve.log", data_dir_);
  ASSERT_TRUE(testing::WaitHealthy(serve, port_, seconds(20))) << serve.Log();
  EXPECT_NE(serve.Log().find("jwt (Bearer, JWKS) identity"), std::string::npos) << serve.Log();
  std::string admin_token = ReadFile(data_dir_ + "/admin-token");
  admin_token = admin_token.substr(0, admin_token.find('\n'));
  HttpClient client("127.0.0.1", port_);
  ASSERT_EQ(
      client.Post("/api/v1/admin/activities", R"({"id":"shoes","stock":10})", Bearer(admin_token))
          .status,
      201);
  EXPECT_EQ(Field(client.Get("/api/v1/config"), "identity"), "jwt");
  // flashsale's own tokens would be refused here: the admin route that issues them says so.
  auto issued = client.Post("/api/v1/admin/tokens", R"({"user_id":"alice"})", Bearer(admin_token));
  EXPECT_EQ(issued.status, 400) << issued.body;
  EXPECT_NE(Field(issued, "error").find("identity is jwt"), std::string::npos) << issued.body;

  const auto tokens = kit_.Mint(
      fmt::format(R"({{"alice":{},"bob":{},"tampered":{},"unknown_kid":{},"none":{}}})",
                  Spec("rsa1", "RS256", "r1", "alice"), Spec("ec1", "ES256", "e1", "bob"),
                  Spec("rsa1", "RS256", "r1", "carol", R"(,"tamper":{"sub":"mallory"})"),
                  Spec("rsa1", "RS256", "r9", "carol"),
                  fmt::format(R"({{"alg":"none","kid":"r1","claims":{{"sub":"carol","iss":"{}",)"
                              R"("aud":"{}","exp":{}}}}})",
                              kIssuer, kAudience, NowS() + 600)));
  ASSERT_EQ(tokens.size(), 5u);
  // The key-confusion attack: HS256 with the RSA public key's PEM (which anyone can fetch from the
  // JWKS) as the HMAC secret.
  const auto confused = kit_.Mint(fmt::format(
      R"({{"hs256":{{"alg":"HS256","kid":"r1","hmac_key_file":"{}","claims":{{"sub":"carol",)"
      R"("iss":"{}","aud":"{}","exp":{}}}}}}})",
      kit_.PublicPem("rsa1"), kIssuer, kAudience, NowS() + 600));
  ASSERT_EQ(confused.size(), 1u);

  // alice (RS256) and bob (ES256) buy, each as the token's sub.
  auto bought = client.Post("/api/v1/activities/shoes/purchase", "", Bearer(tokens.at("alice")));
  ASSERT_EQ(bought.status, 200) << bought.body;
  EXPECT_EQ(Field(bought, "status"), "reserved") << bought.body;
  auto orders = client.Get("/api/v1/orders", Bearer(tokens.at("alice")));
  ASSERT_EQ(orders.status, 200) << orders.body;
  EXPECT_EQ(Field(orders, "user_id"), "alice") << orders.body;
  EXPECT_NE(orders.body.find("shoes"), std::string::npos) << orders.body;
  auto bob = client.Post("/api/v1/activities/shoes/purchase", "", Bearer(tokens.at("bob")));
  ASSERT_EQ(bob.status, 200) << bob.body;
  EXPECT_EQ(Field(client.Get("/api/v1/orders", Bearer(tokens.at("bob"))), "user_id"), "bob");

  // Refused, 401, each saying why; none of them bought.
  struct Refusal {
    std::map<std::string, std::string> headers;
    std::string why;
  };
  const std::vector<Refusal> refusals = {
      {{}, "missing 'Authorization: Bearer <access token>' (jwt mode"},
      {Bearer(tokens.at("tampered")), "bad JWT: bad signature"},
      {Bearer(tokens.at("unknown_kid")), "bad JWT: unknown kid 'r9'"},
      {Bearer(tokens.at("none")), "bad JWT: alg 'none' is not accepted"},
      {Bearer(confused.at("hs256")), "bad JWT: alg 'HS256' is not accepted"},
      {Bearer("not-a-jwt"), "bad JWT: not a JWT"},
      // A gateway's header means nothing in jwt mode.
      {{{"X-User-Id", "carol"}}, "missing 'Authorization: Bearer"},
  };
  for (const Refusal& refusal : refusals) {
    auto refused = client.Post("/api/v1/activities/shoes/purchase", "", refusal.headers);
    EXPECT_EQ(refused.status, 401) << refused.body;
    EXPECT_EQ(Field(refused, "status"), "unauthorized") << refused.body;
    EXPECT_NE(Field(refused, "error").find(refusal.why), std::string::npos)
        << refused.body << " (expected: " << refusal.why << ")";
  }
  auto info = client.Get("/api/v1/admin/activities/shoes", Bearer(admin_token));
  EXPECT_NE(info.body.find(R"("buyers":2)"), std::string::npos) << info.body;

  // Rotation: the file now holds a new key only. Once serve has read it again, the new key's
  // tokens buy and the old key's are refused.
  ASSERT_TRUE(kit_.RsaKey("rsa2"));
  ASSERT_TRUE(kit_.WriteJwks(jwks_, {{"r2", "rsa2"}}));
  const auto rotated =
      kit_.Mint(fmt::format(R"({{"dave":{}}})", Spec("rsa2", "RS256", "r2", "dave")));
  ASSERT_EQ(rotated.size(), 1u);
  EXPECT_TRUE(testing::Eventually(
      [&] { return client.Get("/api/v1/orders", Bearer(rotated.at("dave"))).status == 200; },
      std::chrono::seconds(30)))
      << serve.Log();
  auto dave = client.Post("/api/v1/activities/shoes/purchase", "", Bearer(rotated.at("dave")));
  EXPECT_EQ(dave.status, 200) << dave.body;
  auto old = client.Get("/api/v1/orders", Bearer(tokens.at("alice")));
  EXPECT_EQ(old.status, 401) << old.body;
  EXPECT_NE(Field(old, "error").find("unknown kid 'r1'"), std::string::npos) << old.body;
}

TEST_F(JwtServeTest, AMissingSettingOrKeySetStopsServeAtStart) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--jwt-issuer", kIssuer, "--jwt-audience", kAudience},
       "identity jwt needs the setting 'jwt-jwks' (--jwt-jwks or FLASHSALE_JWT_JWKS)"},
      {{"--jwt-jwks", jwks_, "--jwt-audience", kAudience},
       "identity jwt needs the setting 'jwt-issuer'"},
      {{"--jwt-jwks", jwks_, "--jwt-issuer", kIssuer},
       "identity jwt needs the setting 'jwt-audience'"},
      {{"--jwt-jwks", kit_.dir() / "missing.json", "--jwt-issuer", kIssuer, "--jwt-audience",
        kAudience},
       "setting 'jwt-jwks': cannot read the JWKS file"},
      {{"--jwt-jwks", "http://login.shop.example/certs", "--jwt-issuer", kIssuer, "--jwt-audience",
        kAudience},
       "must be a file or an https:// URL, not http://"},
  };
  int n = 0;
  for (const Case& c : cases) {
    testing::FlashsaleProcess serve(FLASHSALE_BINARY, Args(c.args),
                                    kit_.dir() / fmt::format("serve-{}.log", ++n), data_dir_);
    const std::optional<int> status = serve.WaitExit(seconds(30));
    ASSERT_TRUE(status.has_value()) << "still running: " << serve.Log();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) != 0) << serve.Log();
    EXPECT_NE(serve.Log().find(c.message), std::string::npos)
        << serve.Log() << " (expected: " << c.message << ")";
    EXPECT_EQ(serve.Log().find("serving on"), std::string::npos) << serve.Log();
  }
}

}  // namespace
}  // namespace flashsale
