// The JWT verifier (service/jwt.h) against tokens minted by Debian's python3-jwt with keys made by
// openssl (support/jwt_kit.h): each case accepted or refused as it must be, and the key set kept
// fresh from a file whose keys rotate. The clock is a manual one: no test waits for a token to
// expire.

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <optional>

#include "base/subprocess.h"
#include "service/jwt.h"
#include "support/certificate.h"
#include "support/jwt_kit.h"
#include "support/wait.h"

namespace flashsale {
namespace {

using service::JwksRefresher;
using service::JwksSourceOptions;
using service::JwtKeySet;
using service::JwtSettings;
using service::JwtVerifier;
using testing::JwtKit;

constexpr int64_t kNow = 1'800'000'000;  // seconds; the manual clock stands here
constexpr const char* kIssuer = "https://idp.example/realms/shop";
constexpr const char* kAudience = "flashsale";

// Claims as JSON text: the good ones with `more` merged over them (JSON object members).
std::string Claims(const std::string& more = "", const std::string& sub = "\"alice\"") {
  std::string claims = fmt::format(R"({{"sub":{},"iss":"{}","aud":"{}","iat":{},"exp":{})", sub,
                                   kIssuer, kAudience, kNow - 10, kNow + 300);
  // A later member of the same name wins in Python's json.loads, so `more` overrides.
  if (!more.empty()) claims += "," + more;
  return claims + "}";
}

class JwtVerifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kit_.RsaKey("rsa1"));
    ASSERT_TRUE(kit_.EcKey("ec1"));
    ASSERT_TRUE(kit_.WriteJwks(jwks_path_, {{"r1", "rsa1"}, {"e1", "ec1"}}));
    auto text = service::FetchJwks({.source = jwks_path_});
    ASSERT_TRUE(text.ok()) << text.error().message;
    auto keys = JwtKeySet::Parse(*text);
    ASSERT_TRUE(keys.ok()) << keys.error().message;
    verifier_.SetKeys(*keys);
  }

  // A token spec: signed by `key` with `alg` and `kid`, over `claims`.
  std::string Spec(const std::string& key, const std::string& alg, const std::string& kid,
                   const std::string& claims, const std::string& extra = "") const {
    return fmt::format(R"({{"key":"{}","alg":"{}","kid":"{}","claims":{}{}}})",
                       kit_.PrivatePem(key), alg, kid, claims, extra);
  }

  // The verifier's answer for a token: the user id, or "refused: <why>".
  std::string Check(const std::string& token) const;

  JwtKit kit_;
  std::string jwks_path_ = kit_.dir() / "jwks.json";
  base::ManualClock clock_{kNow * 1000};
  JwtVerifier verifier_{JwtSettings{.issuer = kIssuer, .audience = kAudience}, clock_};
};

// A verifier's answer for a token: the user id, or "refused: <why>".
std::string Answer(const JwtVerifier& verifier, const std::string& token) {
  auto user = verifier.Verify(token);
  return user.ok() ? *user : "refused: " + user.error().message;
}

bool Refused(const std::string& answer, const std::string& why) {
  return answer.starts_with("refused: ") && answer.find(why) != std::string::npos;
}

std::string JwtVerifierTest::Check(const std::string& token) const {
  return Answer(verifier_, token);
}

TEST_F(JwtVerifierTest, EachTokenIsAcceptedOrRefusedAsItMustBe) {
  const auto tokens = kit_.Mint(
      "{" + fmt::format(R"("rs256":{},)", Spec("rsa1", "RS256", "r1", Claims())) +
      fmt::format(R"("es256":{},)", Spec("ec1", "ES256", "e1", Claims("", "\"bob\""))) +
      fmt::format(R"("expired":{},)",
                  Spec("rsa1", "RS256", "r1", Claims(fmt::format(R"("exp":{})", kNow - 31)))) +
      fmt::format(R"("expired_within_leeway":{},)",
                  Spec("rsa1", "RS256", "r1", Claims(fmt::format(R"("exp":{})", kNow - 29)))) +
      fmt::format(R"("not_yet_valid":{},)",
                  Spec("ec1", "ES256", "e1", Claims(fmt::format(R"("nbf":{})", kNow + 31)))) +
      fmt::format(R"("nbf_within_leeway":{},)",
                  Spec("ec1", "ES256", "e1", Claims(fmt::format(R"("nbf":{})", kNow + 29)))) +
      fmt::format(R"("no_exp":{},)", Spec("rsa1", "RS256", "r1",
                                          fmt::format(R"({{"sub":"alice","iss":"{}","aud":"{}"}})",
                                                      kIssuer, kAudience))) +
      fmt::format(R"("wrong_issuer":{},)",
                  Spec("rsa1", "RS256", "r1", Claims(R"("iss":"https://evil.example")"))) +
      fmt::format(R"("wrong_audience":{},)",
                  Spec("rsa1", "RS256", "r1", Claims(R"("aud":"another-app")"))) +
      fmt::format(R"("audience_in_list":{},)",
                  Spec("rsa1", "RS256", "r1", Claims(R"("aud":["account","flashsale"])"))) +
      fmt::format(R"("unknown_kid":{},)", Spec("rsa1", "RS256", "r9", Claims())) +
      fmt::format(R"("rsa_alg_on_ec_kid":{},)", Spec("rsa1", "RS256", "e1", Claims())) +
      fmt::format(R"("other_rsa_key":{},)", Spec("ec1", "ES256", "r1", Claims())) +
      fmt::format(R"("alg_none":{{"alg":"none","kid":"r1","claims":{}}},)", Claims()) +
      fmt::format(R"("hs256_public_pem":{{"alg":"HS256","kid":"r1","hmac_key_file":"{}",)"
                  R"("claims":{}}},)",
                  kit_.PublicPem("rsa1"), Claims()) +
      fmt::format(R"("tampered":{},)",
                  Spec("rsa1", "RS256", "r1", Claims(), R"(,"tamper":{"sub":"mallory"})")) +
      fmt::format(R"("tampered_es":{},)",
                  Spec("ec1", "ES256", "e1", Claims(), R"(,"tamper":{"exp":1900000000})")) +
      fmt::format(R"("no_sub":{},)", Spec("rsa1", "RS256", "r1",
                                          fmt::format(R"({{"iss":"{}","aud":"{}","exp":{}}})",
                                                      kIssuer, kAudience, kNow + 300))) +
      fmt::format(R"("sub_not_an_id":{})",
                  Spec("rsa1", "RS256", "r1", Claims("", "\"auth0|5f7c8ec7c33c6c004bbafe82\""))) +
      "}");
  ASSERT_EQ(tokens.size(), 19u);

  EXPECT_EQ(Check(tokens.at("rs256")), "alice");
  EXPECT_EQ(Check(tokens.at("es256")), "bob");
  EXPECT_PRED2(Refused, Check(tokens.at("expired")), "expired");
  EXPECT_EQ(Check(tokens.at("expired_within_leeway")), "alice");
  EXPECT_PRED2(Refused, Check(tokens.at("not_yet_valid")), "not valid before");
  EXPECT_EQ(Check(tokens.at("nbf_within_leeway")), "alice");
  EXPECT_PRED2(Refused, Check(tokens.at("no_exp")), "no exp");
  EXPECT_PRED2(Refused, Check(tokens.at("wrong_issuer")), "wrong issuer");
  EXPECT_PRED2(Refused, Check(tokens.at("wrong_audience")), "wrong audience");
  EXPECT_EQ(Check(tokens.at("audience_in_list")), "alice");
  EXPECT_PRED2(Refused, Check(tokens.at("unknown_kid")), "unknown kid 'r9'");
  EXPECT_PRED2(Refused, Check(tokens.at("rsa_alg_on_ec_kid")), "not a key for alg RS256");
  EXPECT_PRED2(Refused, Check(tokens.at("other_rsa_key")), "not a key for alg ES256");
  EXPECT_PRED2(Refused, Check(tokens.at("alg_none")), "alg 'none' is not accepted");
  EXPECT_PRED2(Refused, Check(tokens.at("hs256_public_pem")), "alg 'HS256' is not accepted");
  EXPECT_PRED2(Refused, Check(tokens.at("tampered")), "bad signature");
  EXPECT_PRED2(Refused, Check(tokens.at("tampered_es")), "bad signature");
  EXPECT_PRED2(Refused, Check(tokens.at("no_sub")), "no string claim 'sub'");
  EXPECT_PRED2(Refused, Check(tokens.at("sub_not_an_id")), "claim 'sub' must be");

  // The same tokens at other times: the valid one expires, the early one becomes valid.
  clock_.Set((kNow + 300 + 31) * 1000);
  EXPECT_PRED2(Refused, Check(tokens.at("rs256")), "expired");
  clock_.Set((kNow + 31 - 29) * 1000);
  EXPECT_EQ(Check(tokens.at("not_yet_valid")), "alice");
}

TEST_F(JwtVerifierTest, GarbageIsRefusedWithAReason) {
  EXPECT_PRED2(Refused, Check(""), "not a JWT");
  EXPECT_PRED2(Refused, Check("abc"), "not a JWT");
  EXPECT_PRED2(Refused, Check("a.b.c.d"), "not a JWT");
  EXPECT_PRED2(Refused, Check("eyJhbGciOiJSUzI1NiJ9.b."), "no signature");  // {"alg":"RS256"}
  EXPECT_PRED2(Refused, Check("!!.b.c"), "header is not base64url");
  EXPECT_PRED2(Refused, Check("bm90IGpzb24.b.c"), "header is not a JSON object");  // "not json"
  EXPECT_PRED2(Refused, Check(std::string(20000, 'a')), "over");
}

// --jwt-user-claim: the user id comes from the claim the operator names.
TEST_F(JwtVerifierTest, TheUserMayComeFromAnotherClaim) {
  JwtVerifier by_name(
      JwtSettings{.issuer = kIssuer, .audience = kAudience, .user_claim = "preferred_username"},
      clock_);
  by_name.SetKeys(verifier_.Keys());
  const auto tokens =
      kit_.Mint("{" +
                fmt::format(R"("named":{},)", Spec("rsa1", "RS256", "r1",
                                                   Claims(R"("preferred_username":"carol")"))) +
                fmt::format(R"("unnamed":{})", Spec("rsa1", "RS256", "r1", Claims())) + "}");
  ASSERT_EQ(tokens.size(), 2u);
  auto named = by_name.Verify(tokens.at("named"));
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_EQ(*named, "carol");
  auto unnamed = by_name.Verify(tokens.at("unnamed"));
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.error().message.find("no string claim 'preferred_username'"), std::string::npos)
      << unnamed.error().message;
}

// A token without kid is taken only when one key of the set fits its alg.
TEST_F(JwtVerifierTest, WithoutKidOnlyTheOneFittingKey) {
  const auto tokens = kit_.Mint(fmt::format(
      R"({{"rs":{},"es":{}}})",
      R"({"key":")" + kit_.PrivatePem("rsa1") + R"(","alg":"RS256","claims":)" + Claims() + "}",
      R"({"key":")" + kit_.PrivatePem("ec1") + R"(","alg":"ES256","claims":)" + Claims() + "}"));
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(Check(tokens.at("rs")), "alice");
  EXPECT_EQ(Check(tokens.at("es")), "alice");
  ASSERT_TRUE(kit_.RsaKey("rsa2"));
  ASSERT_TRUE(kit_.WriteJwks(jwks_path_, {{"r1", "rsa1"}, {"r2", "rsa2"}}));
  auto keys = JwtKeySet::Parse(*service::FetchJwks({.source = jwks_path_}));
  ASSERT_TRUE(keys.ok()) << keys.error().message;
  verifier_.SetKeys(*keys);
  EXPECT_PRED2(Refused, Check(tokens.at("rs")), "no kid and the JWKS has several keys");
}

TEST(JwtKeySetTest, WhatIsNotAJwksIsRefusedWithAReason) {
  const auto message = [](std::string_view text) {
    auto keys = JwtKeySet::Parse(text);
    return keys.ok() ? std::string("parsed") : keys.error().message;
  };
  EXPECT_NE(message("not json").find("not JSON"), std::string::npos);
  EXPECT_NE(message(R"({"kty":"RSA"})").find("\"keys\" array"), std::string::npos);
  EXPECT_NE(message(R"({"keys":[]})").find("no RSA or EC signature key"), std::string::npos);
  // A symmetric key is never taken: an HMAC secret published in a JWKS would be a shared secret.
  EXPECT_NE(message(R"({"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0c2VjcmV0c2VjcmV0"}]})")
                .find("no RSA or EC signature key"),
            std::string::npos);
  EXPECT_NE(message(R"({"keys":[{"kty":"RSA","kid":"x","n":"AQAB"}]})")
                .find("key 1 (kid 'x'): cannot be imported"),
            std::string::npos)
      << message(R"({"keys":[{"kty":"RSA","kid":"x","n":"AQAB"}]})");
}

// Rotation by replacing the file: the refresher's timer reads it again, the new key's tokens are
// taken and the removed key's refused. The wait is bounded and asserts no duration.
TEST_F(JwtVerifierTest, KeysRotateWhenTheFileIsReplaced) {
  JwtVerifier verifier(JwtSettings{.issuer = kIssuer, .audience = kAudience}, clock_);
  auto refresher = JwksRefresher::Start(
      JwksSourceOptions{.source = jwks_path_, .refresh_every = std::chrono::milliseconds(50)},
      verifier);
  ASSERT_TRUE(refresher.ok()) << refresher.error().message;
  ASSERT_TRUE(kit_.RsaKey("rsa2"));
  const auto tokens =
      kit_.Mint(fmt::format(R"({{"old":{},"new":{}}})", Spec("rsa1", "RS256", "r1", Claims()),
                            Spec("rsa2", "RS256", "r2", Claims("", "\"dave\""))));
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(Answer(verifier, tokens.at("old")), "alice");
  EXPECT_FALSE(verifier.Verify(tokens.at("new")).ok());

  ASSERT_TRUE(kit_.WriteJwks(jwks_path_, {{"r2", "rsa2"}}));
  EXPECT_TRUE(testing::Eventually([&] { return verifier.Verify(tokens.at("new")).ok(); },
                                  std::chrono::seconds(20)));
  EXPECT_EQ(Answer(verifier, tokens.at("new")), "dave");
  auto old = verifier.Verify(tokens.at("old"));
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message.find("unknown kid 'r1'"), std::string::npos) << old.error().message;

  // A broken file keeps the keys read before (and says why).
  std::ofstream(jwks_path_) << "{ broken";
  auto refreshed = (*refresher)->RefreshNow();
  ASSERT_FALSE(refreshed.ok());
  EXPECT_NE(refreshed.error().message.find("not JSON"), std::string::npos)
      << refreshed.error().message;
  EXPECT_EQ(Answer(verifier, tokens.at("new")), "dave");
}

TEST(JwksRefresherTest, AMissingSourceIsAStartupError) {
  base::ManualClock clock(kNow * 1000);
  JwtVerifier verifier(JwtSettings{.issuer = kIssuer, .audience = kAudience}, clock);
  auto refresher = JwksRefresher::Start({.source = "/nonexistent/jwks.json"}, verifier);
  ASSERT_FALSE(refresher.ok());
  EXPECT_NE(refresher.error().message.find("/nonexistent/jwks.json"), std::string::npos)
      << refresher.error().message;
}

// --- The JWKS from an https:// URL ---------------------------------------------------------------
// A real TLS server: `openssl s_server -WWW` serving the directory of the JWKS, with a certificate
// made by openssl for localhost. The test trusts it through SSL_CERT_FILE, as an operator with a
// private CA would.

class JwksUrlTest : public JwtVerifierTest {
 protected:
  void SetUp() override {
    JwtVerifierTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(Certificate("server"));
    ASSERT_TRUE(Certificate("stranger"));
    port_ = testing::FreePort();
    auto server = base::Subprocess::Spawn(
        {"sh", "-c",
         fmt::format("cd {} && exec openssl s_server -WWW -quiet -accept 127.0.0.1:{} -cert "
                     "server.crt -key server.key",
                     kit_.dir().path(), port_)},
        kit_.dir() / "s_server.log");
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_.emplace(std::move(*server));
    ::setenv("SSL_CERT_FILE", (kit_.dir() / "server.crt").c_str(), 1);
    url_ = fmt::format("https://localhost:{}/jwks.json", port_);
    ASSERT_TRUE(testing::Eventually([&] { return service::FetchJwks({.source = url_}).ok(); },
                                    std::chrono::seconds(20)))
        << service::FetchJwks({.source = url_}).error().message << "\n"
        << testing::ReadFile(kit_.dir() / "s_server.log");
  }
  void TearDown() override { ::unsetenv("SSL_CERT_FILE"); }

  // A self-signed certificate for localhost in <dir>/<name>.crt, its key in <dir>/<name>.key.
  bool Certificate(const std::string& name) {
    return testing::SelfSignedCertificate(kit_.dir().path(), name);
  }

  uint16_t port_ = 0;
  std::optional<base::Subprocess> server_;
  std::string url_;
};

TEST_F(JwksUrlTest, KeysComeFromTheUrlAndRotateThere) {
  JwtVerifier verifier(JwtSettings{.issuer = kIssuer, .audience = kAudience}, clock_);
  auto refresher = JwksRefresher::Start(JwksSourceOptions{.source = url_}, verifier);
  ASSERT_TRUE(refresher.ok()) << refresher.error().message;
  ASSERT_TRUE(kit_.RsaKey("rsa2"));
  const auto tokens =
      kit_.Mint(fmt::format(R"({{"old":{},"new":{}}})", Spec("rsa1", "RS256", "r1", Claims()),
                            Spec("rsa2", "RS256", "r2", Claims("", "\"dave\""))));
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(Answer(verifier, tokens.at("old")), "alice");
  EXPECT_PRED2(Refused, Answer(verifier, tokens.at("new")), "unknown kid 'r2'");

  ASSERT_TRUE(kit_.WriteJwks(jwks_path_, {{"r2", "rsa2"}}));
  auto refreshed = (*refresher)->RefreshNow();
  ASSERT_TRUE(refreshed.ok()) << refreshed.error().message;
  EXPECT_EQ(Answer(verifier, tokens.at("new")), "dave");
  EXPECT_PRED2(Refused, Answer(verifier, tokens.at("old")), "unknown kid 'r1'");
}

TEST_F(JwksUrlTest, ACertificateNotTrustedOrForAnotherNameIsRefused) {
  // The trusted certificate names localhost only: asked for by address, it is not the server's.
  auto by_address =
      service::FetchJwks({.source = fmt::format("https://127.0.0.1:{}/jwks.json", port_)});
  ASSERT_FALSE(by_address.ok());
  EXPECT_NE(by_address.error().message.find("TLS handshake"), std::string::npos)
      << by_address.error().message;
  ::setenv("SSL_CERT_FILE", (kit_.dir() / "stranger.crt").c_str(), 1);
  auto text = service::FetchJwks({.source = url_});
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("TLS handshake"), std::string::npos) << text.error().message;
}

TEST_F(JwksUrlTest, AServerThatNeverAnswersIsATimeoutNotAHang) {
  // A listening socket nobody accepts on: the TCP handshake completes, TLS never starts.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t size = sizeof(address);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size), 0);
  auto text = service::FetchJwks(
      {.source = fmt::format("https://localhost:{}/jwks.json", ntohs(address.sin_port)),
       .fetch_timeout = std::chrono::milliseconds(300)});
  ::close(fd);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("timeout"), std::string::npos) << text.error().message;
}

TEST(JwksUrlParseTest, OnlyHttpsUrlsAreFetched) {
  auto text = service::FetchJwks({.source = "https://user@host/jwks.json"});
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("not an https://host[:port]/path URL"), std::string::npos)
      << text.error().message;
  // A password in the URL is not repeated in the error.
  auto with_password = service::FetchJwks({.source = "https://idp:s3cret@host/jwks.json"});
  ASSERT_FALSE(with_password.ok());
  EXPECT_EQ(with_password.error().message.find("s3cret"), std::string::npos)
      << with_password.error().message;
}

// A token of a key published after the last read: refused at first, and its unknown kid makes the
// refresher read the set again without waiting for its (here hour-long) interval.
TEST_F(JwtVerifierTest, AnUnknownKidMakesTheRefresherReadTheSetEarly) {
  JwtVerifier verifier(JwtSettings{.issuer = kIssuer, .audience = kAudience}, clock_);
  auto refresher = JwksRefresher::Start(
      JwksSourceOptions{.source = jwks_path_, .refresh_every = std::chrono::hours(1)}, verifier);
  ASSERT_TRUE(refresher.ok()) << refresher.error().message;
  ASSERT_TRUE(kit_.RsaKey("rsa2"));
  const auto tokens = kit_.Mint(
      fmt::format(R"({{"new":{}}})", Spec("rsa2", "RS256", "r2", Claims("", "\"erin\""))));
  ASSERT_EQ(tokens.size(), 1u);
  ASSERT_TRUE(kit_.WriteJwks(jwks_path_, {{"r1", "rsa1"}, {"r2", "rsa2"}}));
  EXPECT_PRED2(Refused, Answer(verifier, tokens.at("new")), "unknown kid 'r2'");
  EXPECT_TRUE(testing::Eventually([&] { return Answer(verifier, tokens.at("new")) == "erin"; },
                                  std::chrono::seconds(30)));
}

// A provider's set may hold keys flashsale cannot use (encryption keys, symmetric ones, a curve
// cjose lacks): they are left out, saying why, and the signature keys beside them still work.
TEST_F(JwtVerifierTest, KeysThatCannotBeUsedAreLeftOutAndTheOthersKept) {
  auto text = service::FetchJwks({.source = jwks_path_});
  ASSERT_TRUE(text.ok()) << text.error().message;
  const size_t open = text->find('[');
  ASSERT_NE(open, std::string::npos) << *text;
  text->insert(open + 1, R"({"kty":"RSA","kid":"enc1","use":"enc","n":"AQAB","e":"AQAB"},)"
                         R"({"kty":"oct","kid":"h1","k":"c2VjcmV0c2VjcmV0c2VjcmV0"},)"
                         R"({"kty":"EC","kid":"k1","crv":"secp256k1","x":"AQAB","y":"AQAB"},)"
                         R"({"kty":"OKP","kid":"ed1","crv":"Ed25519","x":"AQAB"},)");
  auto keys = JwtKeySet::Parse(*text);
  ASSERT_TRUE(keys.ok()) << keys.error().message;
  // WriteJwks writes its keys in the order of its map.
  EXPECT_EQ((*keys)->Kids(), (std::vector<std::string>{"e1", "r1"}));
  ASSERT_EQ((*keys)->skipped().size(), 4u);
  EXPECT_NE((*keys)->skipped()[0].find("use is 'enc'"), std::string::npos);
  EXPECT_NE((*keys)->skipped()[2].find("kid 'k1'): cannot be imported"), std::string::npos)
      << (*keys)->skipped()[2];
  verifier_.SetKeys(*keys);
  const auto tokens =
      kit_.Mint(fmt::format(R"({{"rs":{}}})", Spec("rsa1", "RS256", "r1", Claims())));
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(Check(tokens.at("rs")), "alice");
}

}  // namespace
}  // namespace flashsale
