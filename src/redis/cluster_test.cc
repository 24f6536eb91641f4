#include "redis/cluster.h"

#include <gtest/gtest.h>

#include "redis/command.h"
#include "redis/url.h"

namespace flashsale::redis {
namespace {

TEST(KeySlotTest, MatchesClusterKeyslot) {
  // Values printed by CLUSTER KEYSLOT on Redis 7.0.
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("hello"), 866);
  EXPECT_EQ(KeySlot("somekey"), 11058);
  EXPECT_EQ(KeySlot(""), 0);
  EXPECT_EQ(KeySlot("{"), 4092);
  EXPECT_EQ(KeySlot("}"), 12090);
  EXPECT_EQ(KeySlot("fs:seckill:{demo}:meta"), 903);
}

TEST(KeySlotTest, HashTags) {
  EXPECT_EQ(KeySlot("user1000"), 3443);
  EXPECT_EQ(KeySlot("{user1000}.following"), 3443);
  EXPECT_EQ(KeySlot("a{user1000}b{x}"), 3443);  // the first tag only
  EXPECT_EQ(KeySlot("foo{}{bar}"), 8363);       // an empty first tag: the whole key
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), 4015);    // the tag is "{bar"
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
  EXPECT_EQ(KeySlot("x:seckill:{demo}:stock"), KeySlot("demo"));
}

TEST(RouteOfTest, FirstKeyOfEachCommandShape) {
  auto route = [](std::initializer_list<std::string_view> args) {
    auto r = RouteOf(Command(args).wire());
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : Route{};
  };
  EXPECT_EQ(route({"GET", "foo"}).slot, 12182);
  EXPECT_EQ(route({"GET", "foo"}).kind, Route::Kind::kSlot);
  EXPECT_EQ(route({"EVALSHA", "abc", "2", "{a}x", "{a}y", "arg"}).slot, KeySlot("a"));
  EXPECT_EQ(route({"EVALSHA", "abc", "0", "arg"}).kind, Route::Kind::kAnyPrimary);
  EXPECT_EQ(route({"XREADGROUP", "GROUP", "g", "c", "COUNT", "5", "STREAMS", "hello", ">"}).slot,
            866);
  EXPECT_EQ(route({"XGROUP", "CREATE", "hello", "g", "0", "MKSTREAM"}).slot, 866);
  EXPECT_EQ(route({"XINFO", "GROUPS", "hello"}).slot, 866);
  EXPECT_EQ(route({"PING"}).kind, Route::Kind::kAnyPrimary);
  EXPECT_EQ(route({"CLUSTER", "SHARDS"}).kind, Route::Kind::kAnyPrimary);
  EXPECT_EQ(route({"SCRIPT", "LOAD", "return 1"}).kind, Route::Kind::kAllPrimaries);
}

TEST(RouteOfTest, RefusesAScriptAcrossSlots) {
  auto r = RouteOf(Command({"EVALSHA", "abc", "2", "foo", "bar"}).wire());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, base::ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("more than one cluster slot"), std::string::npos);
  auto count = RouteOf(Command({"EVALSHA", "abc", "3", "foo"}).wire());
  ASSERT_FALSE(count.ok());
  EXPECT_FALSE(RouteOf("garbage").ok());
}

// SCAN and KEYS name no key and answer from one node's keys: routed anywhere they would see a
// part of the data and say nothing (SCAN used to go by its cursor, as if it were a key).
TEST(RouteOfTest, RefusesAScanThatIsNotSentToANode) {
  const Command scan({"SCAN", "0", "MATCH", "x:*", "COUNT", "10"});
  const Command lower({"scan", "12345"});
  const Command keys({"KEYS", "x:*"});
  for (const Command* command : {&scan, &lower, &keys}) {
    auto r = RouteOf(command->wire());
    ASSERT_FALSE(r.ok()) << command->wire();
    EXPECT_EQ(r.error().code, base::ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("send it to each primary"), std::string::npos)
        << r.error().message;
  }
}

TEST(ClusterUrlTest, Seeds) {
  auto e = ParseUrl("redis+cluster://app:pw@10.0.0.1:7000,10.0.0.2:7001");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_TRUE(e->cluster);
  ASSERT_EQ(e->seeds.size(), 2u);
  EXPECT_EQ(e->seeds[0].first, "10.0.0.1");
  EXPECT_EQ(e->seeds[0].second, 7000);
  EXPECT_EQ(e->seeds[1].second, 7001);
  EXPECT_EQ(e->username, "app");
  EXPECT_EQ(e->password, "pw");
  EXPECT_EQ(e->Describe().find("pw"), std::string::npos);
  EXPECT_EQ(e->Describe(), "redis+cluster://app@10.0.0.1:7000,10.0.0.2:7001");

  for (const char* bad : {"redis+cluster://", "redis+cluster://h:1,", "redis+cluster://h:1/0",
                          "redis+cluster://h:0", "redis+cluster://h:1?db=1"}) {
    auto b = ParseUrl(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.error().code, base::ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace flashsale::redis
