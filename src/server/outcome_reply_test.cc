// Purchase and draw outcomes formatted as replies, with no server: the body the hot-path contract
// gives (api/openapi.json), the status, Retry-After and the status word the metrics count.

#include "server/outcome_reply.h"

#include <gtest/gtest.h>

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
}

TEST(DrawOutcomeReplyTest, StatusAndRetryAfterOfRefusals) {
  service::DrawResult result;
  result.outcome = Outcome::kRateLimited;
  result.retry_after_ms = 1001;
  Reply limited = DrawOutcomeReply("spring", result);
  EXPECT_EQ(limited.status, http::status::too_many_requests);
  EXPECT_EQ(limited.retry_after_s, 2);  // rounded up
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
}

}  // namespace
}  // namespace flashsale::server
