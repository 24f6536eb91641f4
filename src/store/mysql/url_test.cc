// The MySQL/MariaDB URL parser alone (store/mysql/url.h): TCP and socket forms, TLS options, and
// malformed URLs refused without echoing the password. No server involved.

#include "store/mysql/url.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace flashsale::store {
namespace {

using base::ErrorCode;

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

TEST(MySqlUrlTest, ParsesTcpAndSocketForms) {
  auto tcp = ParseMySqlUrl("mysql://app:p%40ss%3Aw%2Frd@db.example:3307/shop");
  ASSERT_TRUE(tcp.ok()) << tcp.error().ToString();
  EXPECT_EQ(tcp->user, "app");
  EXPECT_EQ(tcp->password, "p@ss:w/rd");
  EXPECT_EQ(tcp->host, "db.example");
  EXPECT_EQ(tcp->port, 3307);
  EXPECT_EQ(tcp->database, "shop");
  EXPECT_TRUE(tcp->socket.empty());
  EXPECT_EQ(tcp->Describe(), "mysql://app@db.example:3307/shop");

  auto plain = ParseMySqlUrl("mysql://app@10.0.0.1/shop");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->port, 3306);
  EXPECT_TRUE(plain->password.empty());

  auto ipv6 = ParseMySqlUrl("mysql://app:pw@[::1]:3310/shop");
  ASSERT_TRUE(ipv6.ok()) << ipv6.error().ToString();
  EXPECT_EQ(ipv6->host, "::1");
  EXPECT_EQ(ipv6->port, 3310);
  EXPECT_EQ(ipv6->Describe(), "mysql://app@[::1]:3310/shop");

  for (const char* url : {"mysql://app:pw@localhost/shop?socket=/run/mysqld/mysqld.sock",
                          "mysql://app:pw@/shop?socket=%2Frun%2Fmysqld%2Fmysqld.sock"}) {
    auto socket = ParseMySqlUrl(url);
    ASSERT_TRUE(socket.ok()) << url << ": " << socket.error().ToString();
    EXPECT_EQ(socket->socket, "/run/mysqld/mysqld.sock");
    EXPECT_TRUE(socket->host.empty());
    EXPECT_EQ(socket->Describe(), "mysql://app@localhost/shop?socket=/run/mysqld/mysqld.sock");
  }
}

TEST(MySqlUrlTest, RejectsMalformedUrlsWithoutEchoingThePassword) {
  for (const char* url :
       {"postgres://app:secret@host/shop", "mysql://app:secret@host", "mysql://host/shop",
        "mysql://:secret@host/shop", "mysql://app:secret@host/", "mysql://app:secret@host:0/shop",
        "mysql://app:secret@host:99999/shop", "mysql://app:secret@host:x/shop",
        "mysql://app:secret@host:/shop", "mysql://app:secret@/shop",
        "mysql://app:secret@host/shop?sslmode=on", "mysql://app:secret@host/shop?socket=",
        "mysql://app:secret@host:3306/shop?socket=/x.sock", "mysql://app:secret%zz@host/shop",
        "mysql://app:secret@[::1/shop", "mysql://app:secret@host/shop#frag"}) {
    auto parsed = ParseMySqlUrl(url);
    ASSERT_FALSE(parsed.ok()) << url;
    EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument) << url;
    EXPECT_FALSE(Contains(parsed.error().message, "secret")) << parsed.error().message;
  }
}

TEST(MySqlUrlTest, ParsesTlsOptions) {
  auto verify_ca = ParseMySqlUrl("mysql://app:pw@db.example/shop?ssl-mode=verify_ca");
  ASSERT_TRUE(verify_ca.ok()) << verify_ca.error().ToString();
  EXPECT_EQ(verify_ca->ssl_mode, SslMode::kVerifyCa);
  EXPECT_TRUE(verify_ca->ssl_ca.empty());
  EXPECT_EQ(verify_ca->Describe(), "mysql://app@db.example:3306/shop?ssl-mode=VERIFY_CA");

  // ssl-ca alone asks for TLS verified against it.
  auto ca_only = ParseMySqlUrl("mysql://app:pw@db.example/shop?ssl-ca=%2Fetc%2Fca.pem");
  ASSERT_TRUE(ca_only.ok()) << ca_only.error().ToString();
  EXPECT_EQ(ca_only->ssl_mode, SslMode::kVerifyCa);
  EXPECT_EQ(ca_only->ssl_ca, "/etc/ca.pem");
  EXPECT_EQ(ca_only->Describe(),
            "mysql://app@db.example:3306/shop?ssl-mode=VERIFY_CA&ssl-ca=/etc/ca.pem");

  auto identity =
      ParseMySqlUrl("mysql://app:pw@db.example/shop?ssl-mode=VERIFY_IDENTITY&ssl-ca=/ca.pem");
  ASSERT_TRUE(identity.ok()) << identity.error().ToString();
  EXPECT_EQ(identity->ssl_mode, SslMode::kVerifyIdentity);
  EXPECT_EQ(identity->ssl_ca, "/ca.pem");
  EXPECT_TRUE(identity->tls());

  auto required = ParseMySqlUrl("mysql://app:pw@db.example/shop?ssl-mode=Required");
  ASSERT_TRUE(required.ok()) << required.error().ToString();
  EXPECT_EQ(required->ssl_mode, SslMode::kRequired);

  for (const char* plain :
       {"mysql://app:pw@db.example/shop", "mysql://app:pw@db.example/shop?ssl-mode=DISABLED"}) {
    auto parsed = ParseMySqlUrl(plain);
    ASSERT_TRUE(parsed.ok()) << plain;
    EXPECT_EQ(parsed->ssl_mode, SslMode::kDisabled) << plain;
    EXPECT_FALSE(parsed->tls()) << plain;
    EXPECT_EQ(parsed->Describe(), "mysql://app@db.example:3306/shop") << plain;
  }
}

TEST(MySqlUrlTest, RejectsBadTlsOptionsNamingThemWithoutThePassword) {
  struct Case {
    const char* url;
    const char* says;
  };
  for (const Case& c : {
           Case{"mysql://app:secret@h/shop?ssl-mode=on",
                "ssl-mode 'on' is not one of DISABLED, "
                "REQUIRED, VERIFY_CA, VERIFY_IDENTITY"},
           Case{"mysql://app:secret@h/shop?ssl-mode=PREFERRED", "falls back to plaintext"},
           Case{"mysql://app:secret@h/shop?ssl-mode=", "empty value for ssl-mode"},
           Case{"mysql://app:secret@h/shop?ssl-ca=", "empty value for ssl-ca"},
           Case{"mysql://app:secret@h/shop?ssl-mode", "parameter 'ssl-mode' has no value"},
           Case{"mysql://app:secret@h/shop?ssl-mode=REQUIRED&ssl-ca=/ca.pem",
                "ssl-ca is used only with ssl-mode=VERIFY_CA or VERIFY_IDENTITY"},
           Case{"mysql://app:secret@h/shop?ssl-mode=DISABLED&ssl-ca=/ca.pem",
                "not with ssl-mode=DISABLED"},
           Case{"mysql://app:secret@localhost/shop?socket=/s.sock&ssl-mode=VERIFY_CA",
                "a unix socket (?socket=) is local"},
           Case{"mysql://app:secret@h/shop?sslmode=require", "unknown parameter 'sslmode'"},
       }) {
    auto parsed = ParseMySqlUrl(c.url);
    ASSERT_FALSE(parsed.ok()) << c.url;
    EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument) << c.url;
    EXPECT_TRUE(Contains(parsed.error().message, c.says))
        << c.url << ": " << parsed.error().message;
    EXPECT_FALSE(Contains(parsed.error().message, "secret")) << parsed.error().message;
  }
}

}  // namespace
}  // namespace flashsale::store
