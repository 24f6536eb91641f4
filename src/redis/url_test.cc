#include "redis/url.h"

#include <gtest/gtest.h>

namespace flashsale::redis {
namespace {

TEST(UrlTest, Tcp) {
  auto e = ParseUrl("redis://127.0.0.1:6380/2");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->kind, Endpoint::Kind::kTcp);
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 6380);
  EXPECT_EQ(e->db, 2);
  EXPECT_TRUE(e->password.empty());

  auto defaults = ParseUrl("redis://cache.internal");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->port, 6379);
  EXPECT_EQ(defaults->db, 0);
}

TEST(UrlTest, Credentials) {
  auto e = ParseUrl("redis://app:s3cret@localhost:7000");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->username, "app");
  EXPECT_EQ(e->password, "s3cret");
  EXPECT_EQ(e->Describe().find("s3cret"), std::string::npos);

  auto password_only = ParseUrl("redis://:pw@localhost");
  ASSERT_TRUE(password_only.ok());
  EXPECT_EQ(password_only->username, "");
  EXPECT_EQ(password_only->password, "pw");
}

TEST(UrlTest, UnixSocket) {
  auto e = ParseUrl("unix:///run/redis/redis.sock?db=3&password=pw");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->kind, Endpoint::Kind::kUnix);
  EXPECT_EQ(e->path, "/run/redis/redis.sock");
  EXPECT_EQ(e->db, 3);
  EXPECT_EQ(e->password, "pw");
}

TEST(UrlTest, Tls) {
  auto e = ParseUrl("rediss://app:pw@cache.example:6380/1?cacert=/etc/ssl/ca.pem");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->kind, Endpoint::Kind::kTcp);
  EXPECT_TRUE(e->tls);
  EXPECT_EQ(e->host, "cache.example");
  EXPECT_EQ(e->port, 6380);
  EXPECT_EQ(e->db, 1);
  EXPECT_EQ(e->ca_file, "/etc/ssl/ca.pem");
  EXPECT_EQ(e->Describe(), "rediss://app@cache.example:6380/1");
  auto plain = ParseUrl("redis://cache.example");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
}

TEST(UrlTest, RejectsWithAClearMessage) {
  for (const char* bad :
       {"", "localhost:6379", "http://x", "redis://", "redis://h:0", "redis://h/notanumber",
        "unix://relative.sock", "redis://h?x=1", "redis://h?cacert=/ca.pem"}) {
    auto e = ParseUrl(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().code, base::ErrorCode::kInvalidArgument);
    EXPECT_NE(e.error().message.find("redis url"), std::string::npos) << e.error().message;
  }
}

}  // namespace
}  // namespace flashsale::redis
