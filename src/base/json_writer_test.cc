#include "base/json_writer.h"

#include <gtest/gtest.h>

namespace flashsale::base {
namespace {

TEST(JsonWriterTest, NestedValues) {
  JsonWriter w;
  std::vector<std::string> items = {"A", "B"};
  w.BeginObject()
      .Key("code")
      .Int(-1)
      .Key("ok")
      .Bool(false)
      .Key("items")
      .Strings(items)
      .Key("nested")
      .BeginObject()
      .Key("x")
      .Null()
      .Key("y")
      .Double(1.5)
      .EndObject()
      .Key("raw")
      .Raw("[1,2]")
      .Key("empty")
      .BeginArray()
      .EndArray()
      .EndObject();
  EXPECT_EQ(w.str(), R"({"code":-1,"ok":false,"items":["A","B"],"nested":{"x":null,"y":1.5},)"
                     R"("raw":[1,2],"empty":[]})");
}

TEST(JsonWriterTest, EscapesStrings) {
  JsonWriter w;
  w.String("q\"b\\n\n\x01é");
  EXPECT_EQ(w.str(), "\"q\\\"b\\\\n\\n\\u0001é\"");
}

}  // namespace
}  // namespace flashsale::base

#include "base/strings.h"

namespace flashsale::base {
namespace {

TEST(StringsTest, WordsRoundTrip) {
  const std::vector<std::string> words = {"C1", "C2", "C3"};
  EXPECT_EQ(JoinWords(words), "C1 C2 C3");
  EXPECT_EQ(SplitWords("C1 C2 C3"), words);
  EXPECT_EQ(SplitWords(" C1  C2 C3 "), words);
  EXPECT_TRUE(SplitWords("").empty());
  EXPECT_EQ(JoinWords({}), "");
}

}  // namespace
}  // namespace flashsale::base
