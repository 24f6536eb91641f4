#include "redis/script_reply.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include "redis/scripts.h"

namespace flashsale::redis {
namespace {

using base::ErrorCode;
using Sources = std::vector<std::pair<std::string, std::string>>;

// A reply as hiredis's reader builds it from RESP text, as the connection does.
Reply Resp(std::string_view wire) {
  redisReader* reader = redisReaderCreate();
  EXPECT_EQ(redisReaderFeed(reader, wire.data(), wire.size()), REDIS_OK);
  void* raw = nullptr;
  EXPECT_EQ(redisReaderGetReply(reader, &raw), REDIS_OK);
  redisReaderFree(reader);
  EXPECT_NE(raw, nullptr) << wire;
  return Reply(static_cast<redisReply*>(raw));
}

std::string Source(std::string_view returns) {
  return "#!lua\n-- KEYS:\n-- ARGV:\n-- RETURNS: " + std::string(returns) + "\nreturn 1\n";
}

// One script per declaration, named s0, s1, ...
ScriptSet Scripts(std::initializer_list<std::string_view> declarations) {
  Sources sources;
  for (auto declaration : declarations) {
    sources.emplace_back("s" + std::to_string(sources.size()), Source(declaration));
  }
  auto set = ScriptSet::Parse(sources);
  EXPECT_TRUE(set.ok()) << set.error().message;
  return std::move(*set);
}

TEST(ReplyDeclTest, ParsesEveryForm) {
  auto scalar = ParseReplyDecl("restored:int");
  ASSERT_TRUE(scalar.ok()) << scalar.error().message;
  EXPECT_FALSE(scalar->array);
  ASSERT_EQ(scalar->fields.size(), 1u);

  auto nullable = ParseReplyDecl(" entry_id:str|nil ");
  ASSERT_TRUE(nullable.ok());
  EXPECT_TRUE(nullable->fields[0].nullable);
  EXPECT_EQ(nullable->fields[0].type, ReplyDecl::Type::kStr);

  auto rest = ParseReplyDecl("{code:int order_id:str item:str...}");
  ASSERT_TRUE(rest.ok()) << rest.error().message;
  EXPECT_TRUE(rest->array);
  EXPECT_EQ(rest->fixed, 2u);
  EXPECT_EQ(rest->rest, 1u);
  EXPECT_EQ(rest->Find("item")->part, ReplyDecl::Part::kRest);

  auto tail = ParseReplyDecl("{code:int [remaining:int version:int]}");
  ASSERT_TRUE(tail.ok()) << tail.error().message;
  EXPECT_EQ(tail->fixed, 1u);
  EXPECT_EQ(tail->tail, 2u);
  EXPECT_EQ(tail->Find("version")->index, 2u);

  auto pairs = ParseReplyDecl("{(order_id:str record:str)...}");
  ASSERT_TRUE(pairs.ok()) << pairs.error().message;
  EXPECT_EQ(pairs->fixed, 0u);
  EXPECT_EQ(pairs->rest, 2u);
  EXPECT_EQ(pairs->Find("record")->index, 1u);

  EXPECT_TRUE(ParseReplyDecl("{}").ok());
}

TEST(ReplyDeclTest, RefusesMalformedDeclarations) {
  for (std::string_view bad :
       {"", "code", "code:float", "{code:int", "{code:int} x", "{code:int code:str}",
        "{item:str... code:int}", "{[a:int] b:int}", "{[a:int] (b:int)...}", "{(a:int b:int)}",
        "{[]}", "{Code:int}", "a:int b:int", "{a:int [b:int}", "x:int..."}) {
    EXPECT_FALSE(ParseReplyDecl(bad).ok()) << "'" << bad << "'";
  }
}

TEST(ReplyFieldTest, AnUnknownNameOrTypeIsABuildDefect) {
  const ScriptSet set = Scripts({"{code:int order_id:str}"});
  const Script& s = set.Get("s0");
  EXPECT_NO_THROW(IntField(s, "code"));
  EXPECT_THROW(IntField(s, "order_id"), std::logic_error);  // a str
  EXPECT_THROW(StrField(s, "orderid"), std::logic_error);
}

class ScriptReplyTest : public ::testing::Test {
 protected:
  ScriptReplyTest()
      : set_(Scripts({"{code:int replayed:int order_id:str item:str...}",
                      "{code:int [remaining:int version:int]}", "{(order_id:str record:str)...}",
                      "restored:int", "entry_id:str|nil"})),
        reserve_(set_.Get("s0")),
        stock_(set_.Get("s1")),
        orders_(set_.Get("s2")),
        restore_(set_.Get("s3")),
        retry_(set_.Get("s4")) {}

  ScriptSet set_;
  const Script& reserve_;
  const Script& stock_;
  const Script& orders_;
  const Script& restore_;
  const Script& retry_;
};

TEST_F(ScriptReplyTest, ReadsFieldsByName) {
  const Reply raw = Resp("*5\r\n:1\r\n:0\r\n$2\r\no1\r\n$2\r\nC1\r\n$2\r\nC2\r\n");
  auto reply = ScriptReply::Read(reserve_, raw);
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(reply->Int(IntField(reserve_, "code")), 1);
  EXPECT_EQ(reply->Int(IntField(reserve_, "replayed")), 0);
  EXPECT_EQ(reply->Str(StrField(reserve_, "order_id")), "o1");
  const StrField item(reserve_, "item");
  ASSERT_EQ(reply->Rows(), 2u);
  EXPECT_EQ(reply->Str(item, 0), "C1");
  EXPECT_EQ(reply->Str(item, 1), "C2");
  EXPECT_EQ(reply->Str(item, 2), "");  // past the end: empty, not undefined

  const Reply no_items = Resp("*3\r\n:-1\r\n:0\r\n$0\r\n\r\n");
  auto short_reply = ScriptReply::Read(reserve_, no_items);
  ASSERT_TRUE(short_reply.ok()) << short_reply.error().message;
  EXPECT_EQ(short_reply->Rows(), 0u);
  EXPECT_EQ(short_reply->Int(IntField(reserve_, "code")), -1);
}

TEST_F(ScriptReplyTest, RefusesTheWrongShapeOrType) {
  struct Case {
    const Script* script;
    std::string_view wire;
    std::string_view says;
  };
  const Case cases[] = {
      {&reserve_, ":1\r\n", "expected an array"},
      {&reserve_, "*2\r\n:1\r\n:0\r\n", "expected at least 3 elements"},
      {&reserve_, "*3\r\n:1\r\n:0\r\n:7\r\n", "element 3 (order_id) is (integer) 7, expected str"},
      {&reserve_, "*3\r\n$1\r\n1\r\n:0\r\n$0\r\n\r\n", "element 1 (code)"},
      {&reserve_, "*4\r\n:1\r\n:0\r\n$1\r\no\r\n$-1\r\n", "element 4 (item) is (nil)"},
      {&stock_, "*2\r\n:1\r\n:5\r\n", "expected 1 or 3 elements"},
      {&stock_, "*4\r\n:1\r\n:5\r\n:1\r\n:1\r\n", "expected 1 or 3 elements"},
      {&orders_, "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", "groups of 2"},
      {&restore_, "*1\r\n:1\r\n", "expected int"},
      {&restore_, "$1\r\n1\r\n", "expected int"},
      {&restore_, "$-1\r\n", "expected int"},
      {&retry_, ":1\r\n", "expected str|nil"},
  };
  for (const auto& c : cases) {
    const Reply raw = Resp(c.wire);
    auto reply = ScriptReply::Read(*c.script, raw);
    ASSERT_FALSE(reply.ok()) << c.wire;
    EXPECT_EQ(reply.error().code, ErrorCode::kProtocol);
    EXPECT_NE(reply.error().message.find(c.says), std::string::npos) << reply.error().message;
    EXPECT_NE(reply.error().message.find("script " + c.script->name), std::string::npos);
    EXPECT_NE(reply.error().message.find(c.script->returns.text), std::string::npos);
  }
}

TEST_F(ScriptReplyTest, ATailComesWholeOrNotAtAll) {
  const IntField code(stock_, "code"), remaining(stock_, "remaining"), version(stock_, "version");
  const Reply full = Resp("*3\r\n:1\r\n:9\r\n:4\r\n");
  auto with = ScriptReply::Read(stock_, full);
  ASSERT_TRUE(with.ok()) << with.error().message;
  EXPECT_TRUE(with->HasTail());
  EXPECT_TRUE(with->NeedTail().ok());
  EXPECT_EQ(with->Int(remaining), 9);
  EXPECT_EQ(with->Int(version), 4);

  const Reply bare = Resp("*1\r\n:-4\r\n");
  auto without = ScriptReply::Read(stock_, bare);
  ASSERT_TRUE(without.ok()) << without.error().message;
  EXPECT_FALSE(without->HasTail());
  EXPECT_EQ(without->Int(code), -4);
  EXPECT_EQ(without->Int(remaining), 0);  // absent: 0, not undefined
  auto need = without->NeedTail();
  ASSERT_FALSE(need.ok());
  EXPECT_EQ(need.error().code, ErrorCode::kProtocol);
}

TEST_F(ScriptReplyTest, FlatPairsAndScalars) {
  const Reply pairs = Resp("*4\r\n$2\r\no1\r\n$3\r\nR|a\r\n$2\r\no2\r\n$3\r\nX|a\r\n");
  auto orders = ScriptReply::Read(orders_, pairs);
  ASSERT_TRUE(orders.ok()) << orders.error().message;
  const StrField id(orders_, "order_id"), record(orders_, "record");
  ASSERT_EQ(orders->Rows(), 2u);
  EXPECT_EQ(orders->Str(id, 1), "o2");
  EXPECT_EQ(orders->Str(record, 1), "X|a");
  EXPECT_EQ(orders->Str(id), "");  // a group field read without a row

  const Reply empty = Resp("*0\r\n");
  auto none = ScriptReply::Read(orders_, empty);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->Rows(), 0u);

  const Reply five = Resp(":5\r\n");
  auto restored = ScriptReply::Read(restore_, five);
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_EQ(restored->Int(IntField(restore_, "restored")), 5);

  const StrField entry(retry_, "entry_id");
  const Reply id_reply = Resp("$3\r\n1-0\r\n");
  auto some = ScriptReply::Read(retry_, id_reply);
  ASSERT_TRUE(some.ok());
  EXPECT_FALSE(some->IsNil(entry));
  EXPECT_EQ(some->Str(entry), "1-0");
  const Reply nil = Resp("$-1\r\n");
  auto missing = ScriptReply::Read(retry_, nil);
  ASSERT_TRUE(missing.ok()) << missing.error().message;
  EXPECT_TRUE(missing->IsNil(entry));
}

TEST_F(ScriptReplyTest, AFieldOfAnotherScriptReadsAsNothing) {
  const Reply raw = Resp("*3\r\n:1\r\n:9\r\n:4\r\n");
  auto reply = ScriptReply::Read(stock_, raw);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->Int(IntField(reserve_, "code")), 0);
}

TEST(ScriptReplyIntOrStrTest, ARowOfEitherTypeIsReadByBothFields) {
  const ScriptSet set = Scripts({"{left:int row:int|str...}"});
  const Script& script = set.Get("s0");
  EXPECT_EQ(script.returns.Find("row")->type, ReplyDecl::Type::kIntOrStr);
  const IntField row(script, "row");
  const StrField row_text(script, "row");
  const Reply raw = Resp("*3\r\n:5\r\n:97\r\n$6\r\n1|1|1|\r\n");
  auto reply = ScriptReply::Read(script, raw);
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  ASSERT_EQ(reply->Rows(), 2u);
  EXPECT_EQ(reply->Int(row, 0), 97);
  EXPECT_EQ(reply->Str(row_text, 0), "");  // an integer: no text
  EXPECT_EQ(reply->Int(row, 1), 0);        // a string: no integer
  EXPECT_EQ(reply->Str(row_text, 1), "1|1|1|");
  // Neither an integer nor a string: refused.
  auto nil = ScriptReply::Read(script, Resp("*2\r\n:5\r\n$-1\r\n"));
  ASSERT_FALSE(nil.ok());
  EXPECT_NE(nil.error().message.find("expected int|str"), std::string::npos) << nil.error().message;
}

TEST_F(ScriptReplyTest, PassesTheCallsErrorOn) {
  const base::Result<Reply> failed = base::MakeError(ErrorCode::kUnavailable, "connection refused");
  auto reply = ScriptReply::Read(reserve_, failed);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().code, ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace flashsale::redis
