// The request-body parsers alone: every malformed body a kInvalidArgument whose message names
// the field, with no server, socket or Redis involved. A smaller set goes over HTTP in
// tests/server/bad_input_test.cc, to show that a refusal there is a 400 that takes nothing.

#include "server/bodies.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace flashsale::server {
namespace {

std::string Repeat(std::string_view part, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += part;
  return out;
}

struct Case {
  std::string body;
  std::string fragment;  // a part of the error message
};

template <typename Parse>
void ExpectRefused(const std::vector<Case>& cases, Parse parse) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 80));
    auto result = parse(c.body);
    ASSERT_FALSE(result.ok()) << "accepted";
    EXPECT_EQ(result.error().code, base::ErrorCode::kInvalidArgument);
    EXPECT_NE(result.error().message.find(c.fragment), std::string::npos) << result.error().message;
  }
}

TEST(PurchaseBodyTest, EmptyIsOneUnitAndAQuantityIsTaken) {
  EXPECT_EQ(ParsePurchaseBody("").value(), 1);
  EXPECT_EQ(ParsePurchaseBody(" \r\n\t").value(), 1);
  EXPECT_EQ(ParsePurchaseBody(R"({"quantity":3})").value(), 3);
  EXPECT_EQ(ParsePurchaseBody(R"({})").value(), 1);
  EXPECT_EQ(ParsePurchaseBody(R"( {"quantity": 100} )").value(), 100);
}

TEST(PurchaseBodyTest, BadBodiesNameTheField) {
  ExpectRefused(
      {
          {R"({"quantity":"two"})", "field 'quantity' must be an integer"},
          {R"({"quantity":1.5})", "field 'quantity' must be an integer"},
          {R"({"quantity":[1]})", "field 'quantity' must be an integer"},
          {R"({"quantity":{"n":1}})", "field 'quantity' must be an integer"},
          {R"({"quantity":true})", "field 'quantity' must be an integer"},
          {R"({"quantity":null})", "field 'quantity' must be an integer"},
          {R"({"quantity":99999999999999999999999})", "field 'quantity' must be an integer"},
          {R"({"quantity":0})", "quantity must be between 1 and 100"},
          {R"({"quantity":-1})", "quantity must be between 1 and 100"},
          {R"({"quantity":101})", "quantity must be between 1 and 100"},
          {R"([{"quantity":1}])", "body must be a JSON object"},
          {"null", "body must be a JSON object"},
          {R"("one")", "body must be a JSON object"},
          {"42", "body must be a JSON object"},
          {R"({"qty":1})", "unknown field 'qty'"},
          {R"({"quantity":1,"colour":"red"})", "unknown field 'colour'"},
          {R"({"quantity":)", "body is not JSON"},
          {R"({"quantity":1)", "body is not JSON"},
          {R"({"quantity":1}garbage)", "body is not JSON"},
          {R"({quantity:1})", "body is not JSON"},
          {"\xff\xfe{}", "body is not JSON"},
          {Repeat("[", 100) + Repeat("]", 100), "body is not JSON"},
          {Repeat("[", 4000) + Repeat("]", 4000), "body is not JSON"},
          {R"({"quantity":)" + Repeat(R"({"a":)", 30) + "1" + Repeat("}", 31), "body is not JSON"},
      },
      [](const std::string& body) { return ParsePurchaseBody(body); });
}

TEST(DrawBodyTest, EmptyOrAnEmptyObjectOnly) {
  EXPECT_TRUE(ParseDrawBody("").ok());
  EXPECT_TRUE(ParseDrawBody("{}").ok());
  ExpectRefused(
      {
          {R"({"quantity":1})", "unknown field 'quantity'"},
          {"[]", "body must be a JSON object"},
          {"{", "body is not JSON"},
      },
      [](const std::string& body) { return ParseDrawBody(body); });
}

TEST(TicketQueryTest, WaitIsBoundedAndNothingElseIsAccepted) {
  EXPECT_EQ(ParseTicketQuery("").value(), 0);
  EXPECT_EQ(ParseTicketQuery("wait_ms=0").value(), 0);
  EXPECT_EQ(ParseTicketQuery("wait_ms=25000").value(), 25000);
  ExpectRefused(
      {
          {"wait_ms=25001", "wait_ms=N with N from 0 to 25000"},
          {"wait_ms=-1", "wait_ms=N"},
          {"wait_ms=", "wait_ms=N"},
          {"wait_ms=10ms", "wait_ms=N"},
          {"wait_ms=99999999999999999999999", "wait_ms=N"},
          {"wait=10", "wait_ms=N"},
          {"wait_ms=10&x=1", "wait_ms=N"},
      },
      [](const std::string& query) { return ParseTicketQuery(query); });
}

TEST(JobBodyTest, EveryActivityByDefaultOrOneByIdWithOrWithoutRepair) {
  const JobBody all = ParseJobBody("").value();
  EXPECT_TRUE(all.activity_id.empty());
  EXPECT_TRUE(all.repair);
  const JobBody one = ParseJobBody(R"({"activity_id":"phone","repair":false})").value();
  EXPECT_EQ(one.activity_id, "phone");
  EXPECT_FALSE(one.repair);
  ExpectRefused(
      {
          {R"({"activity_id":"bad id!"})", "field 'activity_id' is not an activity id"},
          {R"({"repair":"no"})", "field 'repair' must be true or false"},
          {R"({"activity":"phone"})", "unknown field 'activity'"},
      },
      [](const std::string& body) { return ParseJobBody(body); });
}

TEST(TokenBodyTest, AUserAndALifetimeWithinAYear) {
  const TokenBody token = ParseTokenBody(R"({"user_id":"alice"})").value();
  EXPECT_EQ(token.user_id, "alice");
  EXPECT_EQ(token.ttl_s, 3600);
  EXPECT_EQ(ParseTokenBody(R"({"user_id":"a","ttl_s":31622400})").value().ttl_s, 31622400);
  ExpectRefused(
      {
          {R"({"user_id":"bad user"})", "field 'user_id' must be"},
          {R"({"ttl_s":60})", "field 'user_id' must be"},
          {R"({"user_id":"a","ttl_s":-1})", "field 'ttl_s' must be"},
          {R"({"user_id":"a","ttl_s":0})", "field 'ttl_s' must be"},
          {R"({"user_id":"a","ttl_s":31622401})", "field 'ttl_s' must be"},
          {R"({"user_id":"a","ttl_s":1.5})", "field 'ttl_s' must be an integer"},
          {"", "body is not JSON"},
      },
      [](const std::string& body) { return ParseTokenBody(body); });
}

}  // namespace
}  // namespace flashsale::server
