#include "keyspace/embedded_scripts.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

namespace flashsale::keyspace {
namespace {

TEST(ScriptSetTest, EmbedsEveryLuaFileWithShebangAndInterface) {
  const auto& set = Scripts();
  EXPECT_EQ(set.scripts().size(), EmbeddedScripts().size());
  for (const char* name : {"sale_setup", "sale_reserve", "sale_release", "sale_add_stock",
                           "activity_status", "activity_user_orders", "rate_limit"}) {
    const redis::Script* script = set.Find(name);
    ASSERT_NE(script, nullptr) << name;
    EXPECT_TRUE(script->source.starts_with("#!lua")) << name;
    EXPECT_EQ(script->sha1.size(), 40u);
    EXPECT_FALSE(script->key_names.empty()) << name;
  }
  const redis::Script& reserve = set.Get("sale_reserve");
  EXPECT_EQ(reserve.key_names, (std::vector<std::string>{"meta", "stock", "items", "buyers",
                                                         "orders", "stream", "idem..."}));
  EXPECT_EQ(reserve.arg_names,
            (std::vector<std::string>{"floor_epoch", "floor_seq", "now_ms", "request..."}));
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
  for (const redis::Script& script : Scripts().scripts()) {
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

TEST(ScriptSetTest, EveryEmbeddedScriptDeclaresWhatItReturns) {
  for (const auto& script : Scripts().scripts()) {
    EXPECT_FALSE(script.returns.fields.empty() && !script.returns.array) << script.name;
    EXPECT_FALSE(script.returns.text.empty()) << script.name;
  }
  const redis::ReplyDecl& reserve = Scripts().Get("sale_reserve").returns;
  EXPECT_TRUE(reserve.array);
  EXPECT_EQ(reserve.fixed, 3u);  // the write sequence, the units left
  EXPECT_EQ(reserve.rest, 1u);   // then one row per request
  EXPECT_EQ(reserve.Find("row")->part, redis::ReplyDecl::Part::kRest);
  EXPECT_EQ(reserve.Find("row")->type, redis::ReplyDecl::Type::kIntOrStr);
  const redis::ReplyDecl& status = Scripts().Get("activity_status").returns;
  EXPECT_EQ(status.fixed, 1u);
  EXPECT_EQ(status.tail, 16u);
}

}  // namespace
}  // namespace flashsale::keyspace
