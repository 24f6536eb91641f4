#include "redis/scripts.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "redis/embedded_scripts.h"

namespace flashsale::redis {
namespace {

using Sources = std::vector<std::pair<std::string, std::string>>;

TEST(ScriptSetTest, EmbedsEveryLuaFileWithShebangAndInterface) {
  const auto& set = ScriptSet::Embedded();
  EXPECT_EQ(set.scripts().size(), EmbeddedScripts().size());
  for (const char* name :
       {"seckill_setup", "seckill_reserve", "seckill_release", "seckill_add_stock",
        "seckill_status", "seckill_user_orders", "rate_limit"}) {
    const Script* script = set.Find(name);
    ASSERT_NE(script, nullptr) << name;
    EXPECT_TRUE(script->source.starts_with("#!lua")) << name;
    EXPECT_EQ(script->sha1.size(), 40u);
    EXPECT_FALSE(script->key_names.empty()) << name;
  }
  const Script& reserve = set.Get("seckill_reserve");
  EXPECT_EQ(reserve.key_names, (std::vector<std::string>{"meta", "stock", "items", "buyers",
                                                         "orders", "stream", "idem..."}));
  EXPECT_EQ(reserve.arg_names,
            (std::vector<std::string>{"floor_epoch", "floor_seq", "request..."}));
}

// Every key a script touches comes in KEYS (docs/design.md, "Redis key layout"): Redis Cluster
// routes a script by its declared keys, and a key a script builds itself is one Redis never
// checked. A static check of the sources: the key argument of every redis.call / redis.pcall is
// KEYS[...] or a local named from KEYS[...] (`local meta, stock = KEYS[1], KEYS[2]`).
TEST(ScriptSetTest, EveryKeyAScriptTouchesIsDeclared) {
  const std::regex alias(R"(local\s+([\w\s,]+?)\s*=\s*(KEYS\[\d+\](?:\s*,\s*KEYS\[\d+\])*))");
  const std::regex name(R"(\w+)");
  // The key follows the command, or its subcommand (XGROUP CREATE key ...).
  const std::regex call(R"(redis\.p?call\(\s*'(\w+)'\s*,\s*(?:'([A-Z]+)'\s*,\s*)?([^,)]+))");
  for (const Script& script : ScriptSet::Embedded().scripts()) {
    std::set<std::string> aliases;
    for (auto it = std::sregex_iterator(script.source.begin(), script.source.end(), alias);
         it != std::sregex_iterator(); ++it) {
      const std::string names = (*it)[1];
      for (auto n = std::sregex_iterator(names.begin(), names.end(), name);
           n != std::sregex_iterator(); ++n) {
        aliases.insert(n->str());
      }
    }
    for (auto it = std::sregex_iterator(script.source.begin(), script.source.end(), call);
         it != std::sregex_iterator(); ++it) {
      const std::string command = (*it)[1];
      const bool subcommand = command == "XGROUP" || command == "XINFO";
      std::string key =
          subcommand || !(*it)[2].matched ? (*it)[3].str() : "'" + (*it)[2].str() + "'";
      while (!key.empty() && key.back() == ' ') key.pop_back();
      const bool declared =
          key.starts_with("KEYS[") && key.ends_with("]") && key.find(' ') == std::string::npos;
      EXPECT_TRUE(declared || aliases.contains(key))
          << script.name << ": redis.call('" << (*it)[1] << "', " << key
          << ", ...) touches a key that is not KEYS[...]";
    }
  }
}

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

TEST(ScriptSetTest, EveryEmbeddedScriptDeclaresWhatItReturns) {
  for (const auto& script : ScriptSet::Embedded().scripts()) {
    EXPECT_FALSE(script.returns.fields.empty() && !script.returns.array) << script.name;
    EXPECT_FALSE(script.returns.text.empty()) << script.name;
  }
  const ReplyDecl& reserve = ScriptSet::Embedded().Get("seckill_reserve").returns;
  EXPECT_TRUE(reserve.array);
  EXPECT_EQ(reserve.fixed, 2u);  // the write sequence
  EXPECT_EQ(reserve.rest, 6u);   // then one group per request
  EXPECT_EQ(reserve.Find("items")->part, ReplyDecl::Part::kRest);
  const ReplyDecl& status = ScriptSet::Embedded().Get("seckill_status").returns;
  EXPECT_EQ(status.fixed, 1u);
  EXPECT_EQ(status.tail, 16u);
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
