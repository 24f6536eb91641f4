#include "base/redact.h"

#include <gtest/gtest.h>

namespace flashsale::base {
namespace {

TEST(RedactUrlTest, APasswordInTheUserinfoIsReplaced) {
  EXPECT_EQ(RedactUrl("redis://:s3cret@127.0.0.1:6379/0"), "redis://:***@127.0.0.1:6379/0");
  EXPECT_EQ(RedactUrl("rediss://app:s3cret@cache.example:6380/1?cacert=/ca.pem"),
            "rediss://app:***@cache.example:6380/1?cacert=/ca.pem");
  EXPECT_EQ(RedactUrl("mysql://flashsale:p%40ss@db.example:3306/shop?ssl-mode=REQUIRED"),
            "mysql://flashsale:***@db.example:3306/shop?ssl-mode=REQUIRED");
  EXPECT_EQ(RedactUrl("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7000"),
            "redis+cluster://:***@10.0.0.1:7000,10.0.0.2:7000");
  // A '@' or '/' the user did not percent-encode in the password still ends up hidden.
  EXPECT_EQ(RedactUrl("mysql://app:a/b@c@db/shop"), "mysql://app:***@db/shop");
}

TEST(RedactUrlTest, APasswordParameterIsReplaced) {
  EXPECT_EQ(RedactUrl("redis://127.0.0.1:6379/0?password=s3cret"),
            "redis://127.0.0.1:6379/0?password=***");
  EXPECT_EQ(RedactUrl("unix:///run/redis.sock?db=2&password=s3cret&x=1"),
            "unix:///run/redis.sock?db=2&password=***&x=1");
}

TEST(RedactUrlTest, UrlsWithoutAPasswordAreUnchanged) {
  for (const char* url : {"redis://127.0.0.1:6379/0", "redis://app@cache.example:6379/0",
                          "unix:///tmp/x/redis.sock?db=0", "sqlite:/var/lib/flashsale/x.db",
                          "http://127.0.0.1:8080", "not a url", ""}) {
    EXPECT_EQ(RedactUrl(url), url);
  }
}

}  // namespace
}  // namespace flashsale::base
