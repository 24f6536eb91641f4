#include "keyspace/order_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace flashsale::keyspace {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

Fields Add(std::string_view name, std::string_view value) {
  Fields fields;
  AddEntryField(name, value, fields);
  return fields;
}

TEST(PackedIntentTest, ASaleUnpacksIntoItsNamedFields) {
  EXPECT_EQ(Add("o", "o1|alice|2|1500|3||C1 C2"), (Fields{{"order_id", "o1"},
                                                          {"user_id", "alice"},
                                                          {"quantity", "2"},
                                                          {"ts", "1500"},
                                                          {"items", "C1 C2"},
                                                          {"limit", "3"}}));
}

TEST(PackedIntentTest, ALotteryWinCarriesItsDrawNumber) {
  StreamEntry entry;
  AddEntryField("o", "d7|bob|1|900|2|2|gold", entry.fields);
  EXPECT_EQ(entry.Field("draw"), "2");
  EXPECT_EQ(entry.Field("items"), "gold");
  EXPECT_EQ(entry.Field("limit"), "2");
}

TEST(PackedIntentTest, EmptyLimitAndDrawAreAbsentAndEmptyItemsKept) {
  // An intent appended again from its record: no limit known, no items (a counted sale).
  EXPECT_EQ(
      Add("o", "o2|eve|1|5|||"),
      (Fields{
          {"order_id", "o2"}, {"user_id", "eve"}, {"quantity", "1"}, {"ts", "5"}, {"items", ""}}));
}

TEST(PackedIntentTest, AnythingElseIsKeptAsItIs) {
  // Too few parts: not a packed intent, left for the consumer to refuse as unreadable.
  EXPECT_EQ(Add("o", "o3|eve|1|5|2"), (Fields{{"o", "o3|eve|1|5|2"}}));
  EXPECT_EQ(Add("order_id", "o4"), (Fields{{"order_id", "o4"}}));
  StreamEntry entry;
  AddEntryField("o", "o3|eve|1", entry.fields);
  EXPECT_EQ(entry.Field("order_id"), "");
}

TEST(PackedIntentTest, TheOrderIdOfAFieldInEitherShape) {
  EXPECT_EQ(OrderIdOfField("o", "o1|alice|2|1500|3||"), "o1");
  EXPECT_EQ(OrderIdOfField("order_id", "o9"), "o9");
  EXPECT_EQ(OrderIdOfField("user_id", "alice"), "");
  EXPECT_EQ(OrderIdOfField("o", "garbage"), "");
}

StreamEntry Entry(Fields fields, int part = 0) {
  return StreamEntry{.id = "1700-0", .fields = std::move(fields), .part = part};
}

StreamEntry GoodEntry() {
  return Entry({{"order_id", "o1"},
                {"user_id", "alice"},
                {"quantity", "2"},
                {"ts", "1800"},
                {"items", "i1 i2"},
                {"limit", "1"},
                {std::string(kWriteSeqField), "3.9"}});
}

// GoodEntry with the field `name` set to `value`.
StreamEntry With(const std::string& name, const std::string& value) {
  StreamEntry entry = GoodEntry();
  for (auto& [key, field] : entry.fields) {
    if (key == name) field = value;
  }
  return entry;
}

TEST(OrderIntentTest, AnEntryDecodesIntoItsIntent) {
  const OrderIntent intent = DecodeOrderIntent(GoodEntry());
  ASSERT_TRUE(intent.readable()) << intent.unreadable;
  EXPECT_EQ(intent.entry_id, "1700-0");
  EXPECT_EQ(intent.order_id, "o1");
  EXPECT_EQ(intent.user_id, "alice");
  EXPECT_EQ(intent.quantity, 2);
  EXPECT_EQ(intent.created_ms, 1800);
  EXPECT_EQ(intent.items, (std::vector<std::string>{"i1", "i2"}));
  EXPECT_EQ(intent.limit, 1);
  EXPECT_EQ(intent.draw, 0);
  EXPECT_EQ(intent.written.epoch, 3);
  EXPECT_EQ(intent.written.seq, 9);
  EXPECT_EQ(intent.IntentId(), "1700-0");
}

TEST(OrderIntentTest, APackedIntentDecodesAsItsNamedFieldsDo) {
  StreamEntry entry{.id = "1800-1", .part = 2};
  AddEntryField("o", "d7|bob|1|900||4|gold", entry.fields);
  const OrderIntent intent = DecodeOrderIntent(entry);
  ASSERT_TRUE(intent.readable()) << intent.unreadable;
  EXPECT_EQ(intent.order_id, "d7");
  EXPECT_EQ(intent.limit, 0) << "empty: not known";
  EXPECT_EQ(intent.draw, 4);
  EXPECT_EQ(intent.items, std::vector<std::string>{"gold"});
  EXPECT_TRUE(intent.written.zero()) << "no write sequence on the entry";
  EXPECT_EQ(intent.IntentId(), "1800-1/2") << "the third intent of its entry";
}

TEST(OrderIntentTest, AnUnreadableIntentIsAValueNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"order_id", ""},  {"order_id", "a b"}, {"user_id", ""}, {"quantity", "0"},
      {"quantity", "x"}, {"quantity", "101"}, {"ts", "soon"},
  };
  for (const auto& [field, value] : bad) {
    SCOPED_TRACE(field + "=" + value);
    const OrderIntent intent = DecodeOrderIntent(With(field, value));
    ASSERT_FALSE(intent.readable());
    EXPECT_NE(intent.unreadable.find(field), std::string::npos) << intent.unreadable;
    EXPECT_EQ(intent.entry_id, "1700-0") << "still names its entry, to be dead-lettered";
  }
  // Not a packed intent at all (too few parts): no order id.
  StreamEntry garbled{.id = "1900-0"};
  AddEntryField("o", "o3|eve|1", garbled.fields);
  EXPECT_FALSE(DecodeOrderIntent(garbled).readable());
}

TEST(OrderIntentTest, ALimitOrDrawThatIsNoNumberIsMarkedUnreadable) {
  EXPECT_EQ(DecodeOrderIntent(With("limit", "0")).limit, OrderIntent::kUnreadableNumber);
  EXPECT_EQ(DecodeOrderIntent(With("limit", "x")).limit, OrderIntent::kUnreadableNumber);
  StreamEntry win = GoodEntry();
  win.fields.emplace_back("draw", "-3");
  EXPECT_EQ(DecodeOrderIntent(win).draw, OrderIntent::kUnreadableNumber);
  // A write sequence that is not one is only not known (an older version's entry).
  EXPECT_TRUE(DecodeOrderIntent(With(std::string(kWriteSeqField), "3")).written.zero());
}

}  // namespace
}  // namespace flashsale::keyspace
