#include "core/cache_key.h"

#include <gtest/gtest.h>

#include "base/crypto.h"

namespace flashsale::core {
namespace {

TEST(CacheKeyTest, FollowsTheS06Layout) {
  CacheKeys keys("prod", "secret");
  const std::string key = keys.Key("seckill:activity", {{"activity_id", "demo"}}, 3);
  // <namespace>:cache:<domain>:<md5 of canonical JSON>:v<version>
  EXPECT_TRUE(key.starts_with("prod:cache:seckill:activity:")) << key;
  EXPECT_TRUE(key.ends_with(":v3")) << key;
  EXPECT_NE(key.find(base::Md5Hex(R"({"activity_id":"demo"})")), std::string::npos) << key;
}

TEST(CacheKeyTest, CanonicalJsonIsOrderIndependentAndEscaped) {
  EXPECT_EQ(CacheKeys::CanonicalJson({{"b", "2"}, {"a", "1"}}), R"({"a":"1","b":"2"})");
  EXPECT_EQ(CacheKeys::CanonicalJson({{"q", "say \"hi\"\n"}}), R"({"q":"say \"hi\"\n"})");
}

TEST(CacheKeyTest, UserIdsNeverAppearInClearOrAsAPlainHash) {
  CacheKeys keys("prod", "secret");
  const std::string key =
      keys.Key("seckill:orders", {{"user_id", CacheKeys::Sensitive("alice")}}, 1);
  EXPECT_EQ(key.find("alice"), std::string::npos);
  // Someone guessing user ids cannot rebuild the key without the secret.
  EXPECT_EQ(key.find(base::Md5Hex(R"({"user_id":"alice"})")), std::string::npos);
  EXPECT_NE(key, CacheKeys("prod", "other")
                     .Key("seckill:orders", {{"user_id", CacheKeys::Sensitive("alice")}}, 1));
  // Test and production never collide.
  EXPECT_NE(keys.Key("d", {{"a", "1"}}, 1), CacheKeys("test", "secret").Key("d", {{"a", "1"}}, 1));
}

}  // namespace
}  // namespace flashsale::core
