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

// 2026-01-01T00:00:00Z: the create bodies' times are checked against "now".
constexpr int64_t kNowMs = 1'767'225'600'000;

TEST(ActivityBodyTest, ADefaultSaleAndBadBodiesNameTheField) {
  const core::Activity sale = ParseActivityBody(R"({"id":"a","stock":3})", kNowMs).value();
  EXPECT_EQ(sale.id, "a");
  EXPECT_EQ(sale.start_ms, kNowMs);
  EXPECT_EQ(sale.end_ms, kNowMs + 3'600'000);
  EXPECT_EQ(sale.per_user_limit, 1);
  ExpectRefused(
      {
          {R"({"id":"a","stock":"two"})", "field 'stock' must be an integer"},
          {R"({"id":"a","stock":1.5})", "field 'stock' must be an integer"},
          {R"({"id":"a","stock":-1})", "stock -1 must be 0 to"},
          {R"({"id":"a","stock":[1]})", "field 'stock' must be an integer"},
          {R"([{"id":"a","stock":1}])", "body must be a JSON object"},
          {R"({"id":"a","stock":1,"colour":"red"})", "unknown field 'colour'"},
          {R"({"id":7,"stock":1})", "field 'id' must be a string"},
          {R"({"stock":1})", "field 'id' is required"},
          {R"({"id":"a","stock":1,"open":"yes"})", "field 'open' must be true or false"},
          {R"({"id":"a","kind":"raffle"})", "field 'kind' must be"},
          {R"({"id":"a","kind":"lottery"})", "field 'prizes' must be"},
          {R"({"id":"a","kind":"items","items":"C1"})",
           "field 'items' must be an array of strings"},
          {R"({"id":"a","kind":"items","items":["C1",2]})",
           "field 'items' must be an array of strings"},
          {R"({"id":"a","kind":"items","items":["C1","C1"]})", "appears twice"},
          {R"({"id":"a","stock":1,"per_user_limit":0})", "per-user limit 0 must be >= 1"},
          {R"({"id":"a","stock":1,"start_ms":1767225700000,"end_ms":1767225650000})",
           "end_ms must be after start_ms"},
          {R"({"id":"a","stock":1,"start_ms":"now"})", "field 'start_ms' must be an integer"},
          {R"({"id":"a","stock":1,"user_rate":[1,2]})", "field 'user_rate' must be an object"},
          {R"({"id":"a","stock":1,"user_rate":{"per_second":"fast","burst":1}})",
           "'user_rate.per_second' must be a number"},
          {R"({"id":"a","stock":1,"user_rate":{"per_second":1,"burst":1,"x":1}})",
           "unknown field 'user_rate.x'"},
          {R"({"id":"a","stock":1,"user_rate":{"per_second":-1,"burst":1}})", "user_rate"},
          {R"({"id":"bad id!","stock":1})", "activity id 'bad id!'"},
          {R"({"id":")" + std::string(65, 'a') + R"(","stock":1})", "activity id"},
          {R"({"id":"a","stock":)", "body is not JSON"},
          {"", "body is not JSON"},
          {R"({"id":"a","title":"\ud800"})", "body is not JSON"},
          {R"({"id":"a","user_rate":)" + Repeat(R"({"a":)", 20) + "1" + Repeat("}", 21),
           "body is not JSON"},
      },
      [](const std::string& body) { return ParseActivityBody(body, kNowMs); });
}

// Issue 35 point 1: an activity's own webhook receivers, checked as --webhook-url is.
TEST(ActivityBodyTest, WebhookUrlsAreTakenCheckedAndChanged) {
  const core::Activity sale =
      ParseActivityBody(
          R"({"id":"a","stock":3,"webhook_urls":["http://127.0.0.1:9000/hook","https://pay"]})",
          kNowMs)
          .value();
  EXPECT_EQ(sale.webhook_urls,
            (std::vector<std::string>{"http://127.0.0.1:9000/hook", "https://pay"}));
  EXPECT_TRUE(ParseActivityBody(R"({"id":"a","stock":3})", kNowMs).value().webhook_urls.empty());
  const std::string nine = R"(["http://a/1","http://a/2","http://a/3","http://a/4","http://a/5",)"
                           R"("http://a/6","http://a/7","http://a/8","http://a/9"])";
  ExpectRefused(
      {
          {R"({"id":"a","stock":1,"webhook_urls":"http://a"})",
           "field 'webhook_urls' must be an array of strings"},
          {R"({"id":"a","stock":1,"webhook_urls":["ftp://a/hook"]})",
           "field 'webhook_urls': webhook URL 'ftp://a/hook': must start with https:// or http://"},
          {R"({"id":"a","stock":1,"webhook_urls":["http://a:0/"]})", "the port must be"},
          {R"({"id":"a","stock":1,"webhook_urls":["http://a/x","http://a/x"]})",
           "webhook_urls[1] is there twice"},
          {R"({"id":"a","stock":1,"webhook_urls":)" + nine + "}", "at most 8 webhook_urls"},
      },
      [](const std::string& body) { return ParseActivityBody(body, kNowMs); });
  const store::ActivityUpdate update =
      ParseActivityUpdate(R"({"webhook_urls":["http://pay/hook"]})").value();
  ASSERT_TRUE(update.webhook_urls.has_value());
  EXPECT_EQ(*update.webhook_urls, (std::vector<std::string>{"http://pay/hook"}));
  EXPECT_TRUE(ParseActivityUpdate(R"({"webhook_urls":[]})").value().webhook_urls->empty());
  EXPECT_FALSE(ParseActivityUpdate(R"({"webhook_urls":["ftp://x"]})").ok());
}

TEST(ActivityUpdateTest, AChangeOfWhatMayChangeAndBadBodiesNameTheField) {
  const store::ActivityUpdate update = ParseActivityUpdate(R"({"per_user_limit":3})").value();
  ASSERT_TRUE(update.per_user_limit.has_value());
  EXPECT_EQ(*update.per_user_limit, 3);
  ExpectRefused(
      {
          {R"({"per_user_limit":"3"})", "field 'per_user_limit' must be an integer"},
          {R"({"stock":5})", "unknown field 'stock'"},
          {"{}", "nothing to update"},
          {"[]", "body must be a JSON object"},
      },
      [](const std::string& body) { return ParseActivityUpdate(body); });
}

TEST(StockBodyTest, UnitsOrItemsAndBadBodiesNameTheField) {
  EXPECT_EQ(ParseStockBody(R"({"units":4})").value().units, 4);
  EXPECT_EQ(ParseStockBody(R"({"items":["C7","C8"]})").value().items.size(), 2u);
  ExpectRefused(
      {
          {R"({"units":"1"})", "field 'units' must be an integer"},
          {R"({"units":0})", "give 'units'"},
          {R"({"units":1,"colour":1})", "unknown field 'colour'"},
          {R"({"items":[1]})", "field 'items' must be an array of strings"},
      },
      [](const std::string& body) { return ParseStockBody(body); });
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

TEST(OrdersQueryTest, CursorLimitStatesAndFormat) {
  auto query = ParseOrdersQuery("state=paid%2Ccancelled&limit=10000&after=MQo-_x&format=csv");
  ASSERT_TRUE(query.ok()) << query.error().ToString();
  EXPECT_EQ(query->after, "MQo-_x");
  EXPECT_EQ(query->limit, 10000);
  EXPECT_FALSE(query->states.reserved);
  EXPECT_TRUE(query->states.paid);
  EXPECT_TRUE(query->states.cancelled);
  EXPECT_EQ(query->format, OrdersFormat::kCsv);
  auto defaults = ParseOrdersQuery("");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->limit, 1000);
  EXPECT_TRUE(defaults->states.reserved && defaults->states.paid && defaults->states.cancelled);
  EXPECT_FALSE(defaults->format.has_value());
  for (const char* bad :
       {"limit=0", "limit=10001", "state=won", "state=paid,,cancelled", "format=xml", "after=a+b",
        "after=", "limit=1&limit=1", "other=1", "&", "state"}) {
    EXPECT_FALSE(ParseOrdersQuery(bad).ok()) << bad;
  }
}

TEST(OrdersQueryTest, TheFormatIsTheQuerysElseWhatAcceptRanksFirstElseJson) {
  const OrdersQuery none;
  const auto format = [&](std::string_view accept) { return OrdersFormatFor(none, accept); };
  EXPECT_EQ(format(""), OrdersFormat::kJson);
  EXPECT_EQ(format("*/*"), OrdersFormat::kJson);
  EXPECT_EQ(format("text/csv"), OrdersFormat::kCsv);
  EXPECT_EQ(format("Text/CSV; charset=utf-8"), OrdersFormat::kCsv);
  EXPECT_EQ(format("text/csv, */*;q=0.8"), OrdersFormat::kCsv);
  EXPECT_EQ(format("text/csv, */*"), OrdersFormat::kCsv) << "named beats the wildcard";
  EXPECT_EQ(format("application/json, text/csv"), OrdersFormat::kJson) << "a tie: JSON";
  EXPECT_EQ(format("text/csv;q=0.5, application/json"), OrdersFormat::kJson);
  EXPECT_EQ(format("application/json;q=0.1, text/*"), OrdersFormat::kCsv);
  EXPECT_EQ(format("text/csv;q=0"), OrdersFormat::kJson);
  EXPECT_EQ(format("text/html"), OrdersFormat::kJson);
  OrdersQuery json_asked;
  json_asked.format = OrdersFormat::kJson;
  EXPECT_EQ(OrdersFormatFor(json_asked, "text/csv"), OrdersFormat::kJson);
}

}  // namespace
}  // namespace flashsale::server
