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

}  // namespace
}  // namespace flashsale::keyspace
