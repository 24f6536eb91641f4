#include "core/token.h"

#include <gtest/gtest.h>

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
