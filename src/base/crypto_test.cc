#include "base/crypto.h"

#include <gtest/gtest.h>

#include <vector>

namespace flashsale::base {
namespace {

TEST(CryptoTest, HmacSha256KnownVector) {
  // RFC 4231, test case 2.
  EXPECT_EQ(HexEncode(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(CryptoTest, Md5KnownVector) {
  EXPECT_EQ(Md5Hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(Md5Hex("{\"id\":1}"), Md5Hex("{\"id\":1}"));
  EXPECT_NE(Md5Hex("{\"id\":1}"), Md5Hex("{\"id\":2}"));
}

TEST(CryptoTest, Base64UrlRoundTrips) {
  EXPECT_EQ(Base64UrlEncode("\xfb\xff"), "-_8");
  EXPECT_EQ(Base64UrlEncode("hello"), "aGVsbG8");
  for (const std::string& input :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\x01\xfe\xff", 4)}) {
    std::string decoded;
    ASSERT_TRUE(Base64UrlDecode(Base64UrlEncode(input), decoded)) << input;
    EXPECT_EQ(decoded, input);
  }
  std::string out;
  EXPECT_FALSE(Base64UrlDecode("a+b", out));
  EXPECT_FALSE(Base64UrlDecode("a", out));  // a lone character is never whole bytes
}

TEST(CryptoTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
}

TEST(CryptoTest, RandomHexIsFreshEachTime) {
  EXPECT_EQ(RandomHex(16).size(), 32u);
  EXPECT_NE(RandomHex(16), RandomHex(16));
}

}  // namespace
}  // namespace flashsale::base
