#include "server/outcome_reply.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "base/json_writer.h"

namespace flashsale::server {

using base::JsonWriter;
using core::Outcome;

namespace {

// What a purchase's and a draw's replies share: the head, the status and Retry-After of the
// outcomes both can have, and the tail.
class OutcomeBody {
 public:
  OutcomeBody(std::string_view activity_id, Outcome outcome, std::string_view status_word)
      : outcome_(outcome) {
    w_.BeginObject().Key("code").Int(static_cast<int>(outcome)).Key("status").String(status_word);
    w_.Key("activity_id").String(activity_id);
  }

  JsonWriter& writer() { return w_; }

  // The outcomes whose reply is the same for purchases and draws.
  void WriteShared(int64_t retry_after_ms) {
    switch (outcome_) {
      case Outcome::kUnknownActivity:
        status_ = http::status::not_found;
        break;
      case Outcome::kConflict:
        status_ = http::status::conflict;
        break;
      case Outcome::kRateLimited:
        status_ = http::status::too_many_requests;
        retry_after_s_ = RetryAfterSeconds(retry_after_ms);
        w_.Key("retry_after_ms").Int(retry_after_ms);
        break;
      case Outcome::kOverloaded:
        status_ = http::status::service_unavailable;
        retry_after_s_ = RetryAfterSeconds(retry_after_ms);
        break;
      case Outcome::kKeyReused:
        status_ = http::status::unprocessable_entity;
        w_.Key("error").String(
            "this Idempotency-Key was used before with another request (another activity, "
            "action or quantity); nothing was done: send a new request with a new key");
        break;
      default:
        break;
    }
  }

  // A replayed outcome that is not an order or a draw lost says so, with the order id.
  Reply Finish(Word word, bool replayed, std::string_view order_id) && {
    if (replayed && !core::IsOrderState(outcome_) && outcome_ != Outcome::kNoPrize) {
      w_.Key("replayed").Bool(true).Key("order_id").String(order_id);
    }
    w_.EndObject();
    Reply reply = JsonReply(status_, word, std::move(w_).Take());
    reply.retry_after_s = retry_after_s_;
    return reply;
  }

 private:
  static int64_t RetryAfterSeconds(int64_t ms) { return std::max<int64_t>(1, (ms + 999) / 1000); }

  JsonWriter w_;
  Outcome outcome_;
  http::status status_ = http::status::ok;
  int64_t retry_after_s_ = -1;
};

}  // namespace

Reply PurchaseOutcomeReply(std::string_view activity_id, const service::PurchaseResult& result) {
  OutcomeBody body(activity_id, result.outcome, core::StatusWord(result.outcome));
  JsonWriter& w = body.writer();
  if (core::IsOrderState(result.outcome)) {
    // A reservation, or a replayed order as it is now.
    w.Key("order_id").String(result.order_id);
    w.Key("quantity").Int(result.quantity).Key("items").Strings(result.items);
    if (result.pay_by_ms > 0) w.Key("pay_by_ms").Int(result.pay_by_ms);
    if (result.refund_due) w.Key("refund_due").Bool(true);
    w.Key("remaining").Int(result.remaining).Key("replayed").Bool(result.replayed);
  } else if (result.outcome == Outcome::kLimitReached ||
             result.outcome == Outcome::kLimitExceeded) {
    // Already holding the limit, or asking for more than it still allows.
    w.Key("bought").Int(result.bought);
    if (result.outcome == Outcome::kLimitExceeded) w.Key("may_buy").Int(result.may_buy);
  } else {
    body.WriteShared(result.retry_after_ms);
  }
  return std::move(body).Finish(WordFor(result.outcome), result.replayed, result.order_id);
}

Reply DrawOutcomeReply(std::string_view activity_id, const service::DrawResult& result) {
  OutcomeBody body(activity_id, result.outcome, core::DrawStatusWord(result.outcome));
  JsonWriter& w = body.writer();
  switch (result.outcome) {
    case Outcome::kReserved:  // a win; replayed, or a ticket's: as it is now
    case Outcome::kPaid:
    case Outcome::kCompensationDue:
    case Outcome::kCancelled:
    case Outcome::kRefused:
      w.Key("order_id").String(result.order_id);
      w.Key("prize").BeginObject().Key("id").String(result.prize.id);
      w.Key("name").String(result.prize.name).EndObject();
      w.Key("draws").Int(result.draws).Key("remaining").Int(result.remaining);
      w.Key("replayed").Bool(result.replayed);
      break;
    case Outcome::kNoPrize:
      w.Key("order_id").String(result.order_id).Key("draws").Int(result.draws);
      w.Key("replayed").Bool(result.replayed);
      break;
    case Outcome::kLimitReached:
      w.Key("draws").Int(result.draws);
      break;
    default:
      body.WriteShared(result.retry_after_ms);
      break;
  }
  return std::move(body).Finish(DrawWordFor(result.outcome), result.replayed, result.order_id);
}

Reply QueuedDrawReply(std::string_view activity_id, std::string_view ticket) {
  JsonWriter w;
  w.BeginObject().Key("status").String("queued").Key("activity_id").String(activity_id);
  const std::string url = fmt::format("/api/v1/activities/{}/tickets/{}", activity_id, ticket);
  w.Key("ticket").String(ticket).Key("ticket_url").String(url).EndObject();
  Reply reply = JsonReply(http::status::accepted, Word::kQueued, std::move(w).Take());
  // 202 Accepted: where the outcome will be (RFC 9110 15.3.3), the URL the body names too.
  reply.headers = fmt::format("Location: {}\r\n", url);
  return reply;
}

}  // namespace flashsale::server
