#include "redis/scripts.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace flashsale::redis {
namespace {

using Sources = std::vector<std::pair<std::string, std::string>>;

TEST(ScriptSetTest, KnownSha1) {
  // EVALSHA needs the SHA-1 of the exact source, in lower-case hex (as `sha1sum` prints it).
  Sources sources = {{"one", "#!lua\n-- KEYS:\n-- ARGV:\n-- RETURNS: one:int\nreturn 1"}};
  auto set = ScriptSet::Parse(sources);
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->Get("one").sha1, "89a5bf67e070ffc8271031cac9f2f918e9b14306");
}

TEST(ScriptSetTest, RejectsScriptsWithoutShebangOrInterface) {
  Sources no_shebang = {{"a", "-- KEYS: k\n-- ARGV: a\n-- RETURNS: n:int\nreturn 1"}};
  EXPECT_FALSE(ScriptSet::Parse(no_shebang).ok());
  Sources no_interface = {{"a", "#!lua\nreturn 1"}};
  EXPECT_FALSE(ScriptSet::Parse(no_interface).ok());
  Sources rest_not_last = {{"a", "#!lua\n-- KEYS: k\n-- ARGV: xs... y\n-- RETURNS: n:int\n"}};
  EXPECT_FALSE(ScriptSet::Parse(rest_not_last).ok());
}

TEST(ScriptSetTest, RejectsScriptsWithoutOrWithAMalformedReturns) {
  Sources no_returns = {{"a", "#!lua\n-- KEYS: k\n-- ARGV: a\nreturn 1"}};
  auto missing = ScriptSet::Parse(no_returns);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("RETURNS"), std::string::npos) << missing.error().message;
  Sources malformed = {{"a", "#!lua\n-- KEYS: k\n-- ARGV: a\n-- RETURNS: {code:int\n"}};
  auto bad = ScriptSet::Parse(malformed);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("script a: RETURNS"), std::string::npos)
      << bad.error().message;
}

TEST(ScriptSetTest, ReturnsMaySpanSeveralLines) {
  Sources sources = {
      {"a",
       "#!lua\n-- KEYS:\n-- ARGV:\n-- RETURNS: {code:int [state:str\n-- RETURNS:   n:int]}\n"}};
  auto set = ScriptSet::Parse(sources);
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->Get("a").returns.tail, 2u);
}

class ScriptCallTest : public ::testing::Test {
 protected:
  ScriptCallTest() {
    Sources sources = {
        {"s", "#!lua\n-- KEYS: first second\n-- ARGV: name count items...\n-- RETURNS: n:int\n"}};
    set_ = std::move(*ScriptSet::Parse(sources));
  }
  ScriptSet set_;
};

TEST_F(ScriptCallTest, BuildsEvalshaInDeclaredOrder) {
  std::vector<std::string> items = {"x", "y"};
  ScriptCall call(set_.Get("s"));
  call.Key("first", "k1").Key("second", "k2").Arg("name", "n").Arg("count", 3).Rest("items", items);
  auto command = call.Build();
  ASSERT_TRUE(command.ok()) << command.error().message;
  const std::string sha = set_.Get("s").sha1;
  const std::string expected = "*9\r\n$7\r\nEVALSHA\r\n$40\r\n" + sha +
                               "\r\n$1\r\n2\r\n$2\r\nk1\r\n$2\r\nk2\r\n$1\r\nn\r\n$1\r\n3\r\n"
                               "$1\r\nx\r\n$1\r\ny\r\n";
  EXPECT_EQ(command->wire(), expected);
}

TEST_F(ScriptCallTest, SwappedKeysAreRefused) {
  ScriptCall call(set_.Get("s"));
  call.Key("second", "k2").Key("first", "k1").Arg("name", "n").Arg("count", 3).Rest("items", {});
  auto command = call.Build();
  ASSERT_FALSE(command.ok());
  EXPECT_EQ(command.error().code, base::ErrorCode::kInternal);
  EXPECT_NE(command.error().message.find("KEYS[1] is declared 'first'"), std::string::npos)
      << command.error().message;
}

TEST_F(ScriptCallTest, SwappedOrMissingArgsAreRefused) {
  ScriptCall swapped(set_.Get("s"));
  swapped.Key("first", "a").Key("second", "b").Arg("count", 3).Arg("name", "n").Rest("items", {});
  EXPECT_FALSE(swapped.Build().ok());

  ScriptCall missing(set_.Get("s"));
  missing.Key("first", "a").Key("second", "b").Arg("name", "n").Rest("items", {});
  EXPECT_FALSE(missing.Build().ok());

  ScriptCall no_rest(set_.Get("s"));
  no_rest.Key("first", "a").Key("second", "b").Arg("name", "n").Arg("count", 1);
  EXPECT_FALSE(no_rest.Build().ok());
}

TEST(ScriptCallVariadicKeysTest, KeysMayEndInAVariadicName) {
  Sources sources = {
      {"v", "#!lua\n-- KEYS: limiters...\n-- ARGV: now limits...\n-- RETURNS: n:int\n"}};
  auto set = ScriptSet::Parse(sources);
  ASSERT_TRUE(set.ok());
  std::vector<std::string> keys = {"k1", "k2"}, limits = {"10", "5", "20", "1"};
  ScriptCall call(set->Get("v"));
  call.RestKeys("limiters", keys).Arg("now", 7).Rest("limits", limits);
  auto argv = call.BuildArgv();
  ASSERT_TRUE(argv.ok()) << argv.error().message;
  EXPECT_EQ(std::vector<std::string>(argv->begin() + 2, argv->end()),
            (std::vector<std::string>{"2", "k1", "k2", "7", "10", "5", "20", "1"}));
  ScriptCall wrong(set->Get("v"));
  wrong.RestKeys("keys", keys).Arg("now", 7).Rest("limits", limits);
  EXPECT_FALSE(wrong.BuildArgv().ok());
}

}  // namespace
}  // namespace flashsale::redis
