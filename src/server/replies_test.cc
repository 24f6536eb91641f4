// Results mapped to replies, with no server: purchase and draw outcomes as the body the hot-path
// contract gives (api/openapi.json), the status, Retry-After, the status word the metrics count
// and the order id the access log names; use-case errors, parse errors and payments likewise.

#include "server/replies.h"

#include <gtest/gtest.h>

#include <boost/beast/http/error.hpp>

#include "service/redis_watch.h"

namespace flashsale::server {
namespace {

using core::Outcome;

service::DrawResult Won() {
  service::DrawResult result;
  result.outcome = Outcome::kReserved;
  result.order_id = "o1";
  result.prize = {.id = "cup", .name = "A tea cup"};
  result.draws = 1;
  result.remaining = 4;
  return result;
}

TEST(DrawOutcomeReplyTest, AWinNamesThePrizeTheResultCarries) {
  const Reply reply = DrawOutcomeReply("spring", Won());
  EXPECT_EQ(reply.status, http::status::ok);
  EXPECT_EQ(reply.word, Word::kWon);
  EXPECT_EQ(reply.retry_after_s, -1);
  EXPECT_EQ(reply.body,
            R"({"code":1,"status":"won","activity_id":"spring","order_id":"o1",)"
            R"("prize":{"id":"cup","name":"A tea cup"},"draws":1,"remaining":4,"replayed":false})");
  EXPECT_EQ(reply.order_id(), "o1");
}

TEST(DrawOutcomeReplyTest, NoPrizeAndTheDrawLimit) {
  service::DrawResult lost;
  lost.outcome = Outcome::kNoPrize;
  lost.order_id = "o2";
  lost.draws = 2;
  lost.replayed = true;
  const Reply no_prize = DrawOutcomeReply("spring", lost);
  EXPECT_EQ(no_prize.status, http::status::ok);
  EXPECT_EQ(no_prize.word, Word::kNoPrize);
  EXPECT_EQ(no_prize.body,
            R"({"code":2,"status":"no_prize","activity_id":"spring","order_id":"o2","draws":2,)"
            R"("replayed":true})");

  service::DrawResult limit;
  limit.outcome = Outcome::kLimitReached;
  limit.draws = 3;
  const Reply reached = DrawOutcomeReply("spring", limit);
  EXPECT_EQ(reached.word, Word::kLimitReached);
  EXPECT_EQ(reached.body,
            R"({"code":0,"status":"limit_reached","activity_id":"spring","draws":3})");
  EXPECT_EQ(no_prize.order_id(), "o2");
  EXPECT_TRUE(reached.order_id().empty());
}

TEST(DrawOutcomeReplyTest, AReplayedRefusalSaysSoWithTheOrderId) {
  service::DrawResult sold_out;
  sold_out.outcome = Outcome::kSoldOut;
  sold_out.replayed = true;
  sold_out.order_id = "o3";
  const Reply reply = DrawOutcomeReply("spring", sold_out);
  EXPECT_EQ(reply.status, http::status::ok);
  EXPECT_EQ(reply.body, R"({"code":-1,"status":"sold_out","activity_id":"spring","replayed":true,)"
                        R"("order_id":"o3"})");
  EXPECT_EQ(reply.order_id(), "o3");
}

TEST(DrawOutcomeReplyTest, StatusAndRetryAfterOfRefusals) {
  service::DrawResult result;
  result.outcome = Outcome::kRateLimited;
  result.retry_after_ms = 1001;
  Reply limited = DrawOutcomeReply("spring", result);
  EXPECT_EQ(limited.status, http::status::too_many_requests);
  EXPECT_EQ(limited.retry_after_s, 2);      // rounded up
  EXPECT_TRUE(limited.order_id().empty());  // a refusal not replayed names no order
  EXPECT_NE(limited.body.find(R"("retry_after_ms":1001)"), std::string::npos);

  result.outcome = Outcome::kOverloaded;
  result.retry_after_ms = 0;
  Reply full = DrawOutcomeReply("spring", result);
  EXPECT_EQ(full.status, http::status::service_unavailable);
  EXPECT_EQ(full.retry_after_s, 1);  // never below a second

  result.outcome = Outcome::kUnknownActivity;
  EXPECT_EQ(DrawOutcomeReply("spring", result).status, http::status::not_found);
  result.outcome = Outcome::kConflict;
  EXPECT_EQ(DrawOutcomeReply("spring", result).status, http::status::conflict);
}

TEST(QueuedDrawReplyTest, GivesTheTicketAndWhereToPollIt) {
  const Reply reply = QueuedDrawReply("spring", "t1");
  EXPECT_EQ(reply.status, http::status::accepted);
  EXPECT_EQ(reply.word, Word::kQueued);
  EXPECT_EQ(reply.body, R"({"status":"queued","activity_id":"spring","ticket":"t1",)"
                        R"("ticket_url":"/api/v1/activities/spring/tickets/t1"})");
}

TEST(PurchaseOutcomeReplyTest, AReservationWithItsItemsAndPaymentWindow) {
  service::PurchaseResult result;
  result.outcome = Outcome::kReserved;
  result.order_id = "o1";
  result.quantity = 2;
  result.items = {"i1", "i2"};
  result.pay_by_ms = 99;
  result.remaining = 8;
  const Reply reply = PurchaseOutcomeReply("phone", result);
  EXPECT_EQ(reply.status, http::status::ok);
  EXPECT_EQ(reply.word, Word::kReserved);
  EXPECT_EQ(reply.body,
            R"({"code":1,"status":"reserved","activity_id":"phone","order_id":"o1","quantity":2,)"
            R"("items":["i1","i2"],"pay_by_ms":99,"remaining":8,"replayed":false})");
  EXPECT_EQ(reply.order_id(), "o1");
}

TEST(PurchaseOutcomeReplyTest, AReplayedOrderIsReportedAsItIsNowWithItsOwnQuantity) {
  service::PurchaseResult result;
  result.order_id = "o1";
  result.quantity = 1;
  result.remaining = 5;
  result.replayed = true;
  const struct {
    Outcome outcome;
    Word word;
    std::string_view head;
  } states[] = {
      {Outcome::kReserved, Word::kReserved, R"({"code":1,"status":"reserved",)"},
      {Outcome::kPaid, Word::kPaid, R"({"code":3,"status":"paid",)"},
      {Outcome::kCompensationDue, Word::kCompensationDue,
       R"({"code":4,"status":"compensation_due",)"},
      {Outcome::kCancelled, Word::kCancelled, R"({"code":-10,"status":"cancelled",)"},
      {Outcome::kRefused, Word::kRefused, R"({"code":-11,"status":"refused",)"},
  };
  for (const auto& state : states) {
    result.outcome = state.outcome;
    const Reply reply = PurchaseOutcomeReply("phone", result);
    EXPECT_EQ(reply.status, http::status::ok);
    EXPECT_EQ(reply.word, state.word);
    EXPECT_EQ(reply.body, std::string(state.head) +
                              R"("activity_id":"phone","order_id":"o1","quantity":1,"items":[],)"
                              R"("remaining":5,"replayed":true})");
  }
  result.outcome = Outcome::kCancelled;
  result.refund_due = true;
  EXPECT_NE(PurchaseOutcomeReply("phone", result).body.find(R"("refund_due":true)"),
            std::string::npos);
}

TEST(DrawOutcomeReplyTest, ARefusedWinKeepsItsPrizeAndSaysRefused) {
  service::DrawResult refused = Won();
  refused.outcome = Outcome::kRefused;
  refused.replayed = true;
  const Reply reply = DrawOutcomeReply("spring", refused);
  EXPECT_EQ(reply.status, http::status::ok);
  EXPECT_EQ(reply.word, Word::kRefused);
  EXPECT_EQ(reply.body,
            R"({"code":-11,"status":"refused","activity_id":"spring","order_id":"o1",)"
            R"("prize":{"id":"cup","name":"A tea cup"},"draws":1,"remaining":4,"replayed":true})");
}

TEST(PurchaseOutcomeReplyTest, LimitsSayWhatTheUserHoldsAndMayBuy) {
  service::PurchaseResult result;
  result.outcome = Outcome::kLimitExceeded;
  result.bought = 1;
  result.may_buy = 2;
  const Reply exceeded = PurchaseOutcomeReply("phone", result);
  EXPECT_EQ(exceeded.word, Word::kLimitExceeded);
  EXPECT_EQ(exceeded.body,
            R"({"code":-9,"status":"limit_exceeded","activity_id":"phone","bought":1,)"
            R"("may_buy":2})");
  result.outcome = Outcome::kLimitReached;
  EXPECT_EQ(PurchaseOutcomeReply("phone", result).word, Word::kAlreadyPurchased);
  EXPECT_TRUE(exceeded.order_id().empty());
}

TEST(UnknownOutcomeReplyTest, NamesTheOrderItMayExistUnderNotTheReason) {
  const Reply reply = UnknownOutcomeReply("phone", "o9", "redis at 10.0.0.7:6379 timed out",
                                          service::Use::kPurchase);
  EXPECT_EQ(reply.status, http::status::service_unavailable);
  EXPECT_EQ(reply.word, Word::kUnknownOutcome);
  EXPECT_EQ(reply.retry_after_s, 1);
  EXPECT_EQ(reply.order_id(), "o9");
  EXPECT_NE(reply.body.find(R"("activity_id":"phone","order_id":"o9")"), std::string::npos);
  EXPECT_EQ(reply.body.find("10.0.0.7"), std::string::npos) << reply.body;
  EXPECT_NE(reply.detail.find("10.0.0.7"), std::string::npos);  // for the admin and the log
  EXPECT_NE(UnknownOutcomeReply("spring", "o9", "", service::Use::kDraw).body.find("draw"),
            std::string::npos);
}

TEST(PaymentReplyTest, PaidPaidBeforeAndRefused) {
  const Reply paid = PaymentReply("o1", store::PayOutcome::kPaid);
  EXPECT_EQ(paid.status, http::status::ok);
  EXPECT_EQ(paid.body, R"({"order_id":"o1","status":"paid","replayed":false})");
  EXPECT_EQ(paid.order_id(), "o1");
  EXPECT_EQ(PaymentReply("o1", store::PayOutcome::kAlreadyPaid).body,
            R"({"order_id":"o1","status":"paid","replayed":true})");
  const Reply refused = PaymentReply("o2", store::PayOutcome::kRefused);
  EXPECT_EQ(refused.status, http::status::conflict);
  EXPECT_EQ(refused.word, Word::kConflict);
  EXPECT_NE(refused.body.find(R"("status":"refund_due")"), std::string::npos);
  EXPECT_EQ(refused.order_id(), "o2");
  const Reply unknown = PaymentErrorReply(base::Error{base::ErrorCode::kNotFound, "no row"});
  EXPECT_EQ(unknown.status, http::status::not_found);
  EXPECT_NE(unknown.body.find("retry"), std::string::npos);
}

TEST(ErrorToReplyTest, EachCodeHasItsStatusAndWord) {
  using base::ErrorCode;
  const struct {
    ErrorCode code;
    http::status status;
    Word word;
    int64_t retry_after_s;
  } cases[] = {
      {ErrorCode::kInvalidArgument, http::status::bad_request, Word::kBadRequest, -1},
      {ErrorCode::kNotFound, http::status::not_found, Word::kNotFound, -1},
      {ErrorCode::kAlreadyExists, http::status::conflict, Word::kConflict, -1},
      {ErrorCode::kFailedPrecondition, http::status::conflict, Word::kConflict, -1},
      {ErrorCode::kResourceExhausted, http::status::service_unavailable, Word::kOverloaded, 1},
      {ErrorCode::kUnknownOutcome, http::status::service_unavailable, Word::kUnknownOutcome, 1},
      {ErrorCode::kCancelled, http::status::service_unavailable, Word::kShuttingDown, -1},
      {ErrorCode::kUnavailable, http::status::service_unavailable, Word::kUnavailable, 1},
      {ErrorCode::kRemote, http::status::service_unavailable, Word::kUnavailable, 1},
      {ErrorCode::kProtocol, http::status::service_unavailable, Word::kUnavailable, 1},
      {ErrorCode::kInternal, http::status::internal_server_error, Word::kError, -1},
  };
  for (const auto& c : cases) {
    const Reply reply = ErrorToReply(base::Error{c.code, "at redis://10.0.0.7:6379"});
    EXPECT_EQ(reply.status, c.status) << static_cast<int>(c.code);
    EXPECT_EQ(reply.word, c.word) << static_cast<int>(c.code);
    EXPECT_EQ(reply.retry_after_s, c.retry_after_s) << static_cast<int>(c.code);
    // A 5xx's words name nothing internal; the detail keeps the text for the admin.
    if (static_cast<int>(c.status) >= 500 && c.code != ErrorCode::kResourceExhausted) {
      EXPECT_EQ(reply.body.find("10.0.0.7"), std::string::npos) << reply.body;
      EXPECT_NE(AdminDetail(reply).body.find("10.0.0.7"), std::string::npos) << reply.detail;
    }
  }
}

// Issue 33 point 4: the freeze is told by its detail, not by comparing the message.
TEST(ErrorToReplyTest, AFrozenSaleSaysSoAndOtherUnavailabilityInGeneralWords) {
  const Reply frozen = ErrorToReply(service::FrozenError());
  EXPECT_EQ(frozen.status, http::status::service_unavailable);
  EXPECT_EQ(frozen.retry_after_s, 1);
  EXPECT_NE(frozen.body.find(service::kFrozenMessage), std::string::npos) << frozen.body;

  // The same words without the detail are not a freeze: an error's text is never searched.
  const Reply other = ErrorToReply(
      base::Error{base::ErrorCode::kUnavailable, std::string(service::kFrozenMessage)});
  EXPECT_EQ(other.status, http::status::service_unavailable);
  EXPECT_EQ(other.body.find(service::kFrozenMessage), std::string::npos) << other.body;
  EXPECT_NE(other.body.find("a service behind this one is unavailable"), std::string::npos)
      << other.body;
}

TEST(ParseErrorReplyTest, LimitsAndMalformedRequestsCloseTheConnection) {
  const Reply headers = ParseErrorReply(boost::beast::http::error::header_limit);
  EXPECT_EQ(headers.status, http::status::request_header_fields_too_large);
  EXPECT_TRUE(headers.close);
  const Reply body = ParseErrorReply(boost::beast::http::error::body_limit);
  EXPECT_EQ(body.status, http::status::payload_too_large);
  EXPECT_TRUE(body.close);
  const Reply bad = ParseErrorReply(boost::beast::http::error::bad_transfer_encoding);
  EXPECT_EQ(bad.status, http::status::bad_request);
  EXPECT_EQ(bad.word, Word::kBadRequest);
  EXPECT_TRUE(bad.close);
}

TEST(OrdersPageReplyTest, JsonOrCsvWithTheNextCursorInAHeader) {
  store::OrderPage page;
  store::OrderRecord sale{.order_id = "o1",
                          .activity_id = "shop",
                          .user_id = "-1",
                          .quantity = 2,
                          .items = {"C1", "C2"},
                          .state = store::OrderState::kPaid,
                          .created_ms = 10,
                          .persisted_ms = 11,
                          .state_ms = 12};
  store::OrderRecord win{.order_id = "w1",
                         .activity_id = "shop",
                         .user_id = "a,b",
                         .items = {"gold"},
                         .state = store::OrderState::kCancelled,
                         .draw_no = 3,
                         .created_ms = 20,
                         .persisted_ms = 21,
                         .state_ms = 22,
                         .refund_due = true};
  page.orders = {sale, win};
  page.next = "MQo";
  const Reply csv = OrdersPageReply(page, true);
  EXPECT_EQ(csv.content_type, "text/csv; charset=utf-8; header=present");
  EXPECT_EQ(csv.headers, "X-Next-Cursor: MQo\r\n");
  EXPECT_EQ(csv.body, std::string(OrdersCsvHeader()) +
                          "o1,shop,'-1,2,C1 C2,,,paid,false,false,10,11,12,\r\n"
                          "w1,shop,\"a,b\",1,,gold,3,cancelled,true,false,20,21,,22\r\n");
  const Reply json = OrdersPageReply(page, false);
  EXPECT_EQ(json.content_type, "application/json");
  EXPECT_NE(json.body.find(R"("user_id":"-1","quantity":2,"items":["C1","C2"],"prize":null,)"
                           R"("draw_no":null,"state":"paid")"),
            std::string::npos)
      << json.body;
  EXPECT_NE(json.body.find(R"("items":[],"prize":"gold","draw_no":3,"state":"cancelled",)"
                           R"("refund_due":true)"),
            std::string::npos)
      << json.body;
  EXPECT_NE(json.body.find(R"("paid_ms":null,"cancelled_ms":22})"), std::string::npos);
  EXPECT_TRUE(json.body.ends_with(R"(],"next":"MQo"})")) << json.body;
  page.next.clear();
  EXPECT_TRUE(OrdersPageReply(page, false).body.ends_with(R"(],"next":null})"));
  EXPECT_TRUE(OrdersPageReply(page, true).headers.empty()) << "the last page: no cursor";
}

}  // namespace
}  // namespace flashsale::server
