#include "core/token.h"

#include <gtest/gtest.h>

#include "base/crypto.h"

namespace flashsale::core {
namespace {

TEST(TokenTest, IssuedTokenVerifiesUntilItExpires) {
  TokenSigner signer("secret");
  const std::string token = signer.Issue("alice", 2000);
  auto user = signer.Verify(token, 1999);
  ASSERT_TRUE(user.ok()) << user.error().message;
  EXPECT_EQ(*user, "alice");
  auto expired = signer.Verify(token, 2000);
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.error().message, "token expired");
}

// One secret, separate keys per purpose (issue 15, point 15): a token is not signed with the
// raw secret, which also keyed the ids in Redis key names; a token signed so before the change
// (with the raw secret) still verifies until it expires.
TEST(TokenTest, SignsWithAKeyOfItsOwnNotTheRawSecret) {
  TokenSigner signer("secret");
  const std::string token = signer.Issue("alice", 5000);
  const std::string body = token.substr(0, token.rfind('.'));
  EXPECT_NE(token.substr(token.rfind('.') + 1),
            base::Base64UrlEncode(base::HmacSha256("secret", body)));
  const std::string before = body + "." + base::Base64UrlEncode(base::HmacSha256("secret", body));
  auto user = signer.Verify(before, 0);
  ASSERT_TRUE(user.ok()) << user.error().message;
  EXPECT_EQ(*user, "alice");
  EXPECT_FALSE(signer.Verify(before, 5000).ok());
}

TEST(TokenTest, ForgedOrMangledTokensFail) {
  TokenSigner signer("secret");
  const std::string token = signer.Issue("alice", 5000);
  EXPECT_FALSE(TokenSigner("other").Verify(token, 0).ok());
  // Changing the user or the expiry breaks the signature.
  std::string mallory = TokenSigner("secret").Issue("mallory", 5000);
  std::string spliced = mallory.substr(0, mallory.find('.')) + token.substr(token.find('.'));
  EXPECT_FALSE(signer.Verify(spliced, 0).ok());
  std::string later = token;
  later.replace(later.find(".5000."), 6, ".9000.");
  EXPECT_FALSE(signer.Verify(later, 0).ok());
  for (const std::string& bad :
       std::vector<std::string>{"", ".", "..", "a.b.c", "no-dots", std::string(600, 'a')}) {
    EXPECT_FALSE(signer.Verify(bad, 0).ok()) << bad;
  }
}

}  // namespace
}  // namespace flashsale::core
