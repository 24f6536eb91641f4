#include "server/replies.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/beast/http/error.hpp>
#include <chrono>
#include <cstdint>

#include "base/csv.h"
#include "base/json_writer.h"
#include "base/strings.h"
#include "service/redis_watch.h"

namespace flashsale::server {

using base::ErrorCode;
using base::JsonWriter;
using core::Outcome;

Word DrawWordFor(core::Outcome outcome) {
  switch (outcome) {
    case core::Outcome::kReserved:
      return Word::kWon;
    case core::Outcome::kLimitReached:
      return Word::kLimitReached;
    default:
      return WordFor(outcome);
  }
}

Word WordFor(core::Outcome outcome) {
  switch (outcome) {
    case core::Outcome::kNoPrize:
      return Word::kNoPrize;
    case core::Outcome::kReserved:
      return Word::kReserved;
    case core::Outcome::kLimitReached:
      return Word::kAlreadyPurchased;
    case core::Outcome::kSoldOut:
      return Word::kSoldOut;
    case core::Outcome::kNotStarted:
      return Word::kNotStarted;
    case core::Outcome::kEnded:
      return Word::kEnded;
    case core::Outcome::kUnknownActivity:
      return Word::kUnknownActivity;
    case core::Outcome::kClosed:
      return Word::kClosed;
    case core::Outcome::kConflict:
      return Word::kConflict;
    case core::Outcome::kRateLimited:
      return Word::kRateLimited;
    case core::Outcome::kOverloaded:
      return Word::kOverloaded;
    case core::Outcome::kLimitExceeded:
      return Word::kLimitExceeded;
    case core::Outcome::kPaid:
      return Word::kPaid;
    case core::Outcome::kCompensationDue:
      return Word::kCompensationDue;
    case core::Outcome::kCancelled:
      return Word::kCancelled;
    case core::Outcome::kRefused:
      return Word::kRefused;
    case core::Outcome::kKeyReused:
      return Word::kKeyReused;
    case core::Outcome::kBehind:
      return Word::kUnavailable;  // turned into the frozen answer before it gets here
  }
  return Word::kError;
}

namespace {

// Writes "order_id":"<id>" and returns where the id's text starts in the writer's text (after the
// opening quote: ids are base::IsValidId, nothing in them is escaped).
size_t WriteOrderId(JsonWriter& w, std::string_view order_id) {
  w.Key("order_id");
  const size_t at = w.str().size() + 1;
  w.String(order_id);
  return at;
}

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

  // The order the reply names: in the body, and for the access log.
  void OrderId(std::string_view order_id) {
    order_id_at_ = WriteOrderId(w_, order_id);
    order_id_size_ = order_id.size();
  }

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
      w_.Key("replayed").Bool(true);
      OrderId(order_id);
    }
    w_.EndObject();
    Reply reply = JsonReply(status_, word, std::move(w_).Take());
    reply.retry_after_s = retry_after_s_;
    reply.NameOrder(order_id_at_, order_id_size_);
    return reply;
  }

 private:
  static int64_t RetryAfterSeconds(int64_t ms) { return std::max<int64_t>(1, (ms + 999) / 1000); }

  JsonWriter w_;
  Outcome outcome_;
  http::status status_ = http::status::ok;
  int64_t retry_after_s_ = -1;
  size_t order_id_at_ = 0;
  size_t order_id_size_ = 0;
};

}  // namespace

Reply PurchaseOutcomeReply(std::string_view activity_id, const service::PurchaseResult& result) {
  OutcomeBody body(activity_id, result.outcome, core::StatusWord(result.outcome));
  JsonWriter& w = body.writer();
  if (core::IsOrderState(result.outcome)) {
    // A reservation, or a replayed order as it is now.
    body.OrderId(result.order_id);
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
      body.OrderId(result.order_id);
      w.Key("prize").BeginObject().Key("id").String(result.prize.id);
      w.Key("name").String(result.prize.name).EndObject();
      w.Key("draws").Int(result.draws).Key("remaining").Int(result.remaining);
      w.Key("replayed").Bool(result.replayed);
      break;
    case Outcome::kNoPrize:
      body.OrderId(result.order_id);
      w.Key("draws").Int(result.draws);
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

Reply PendingTicketReply(std::string_view activity_id, std::string_view ticket) {
  JsonWriter w;
  w.BeginObject().Key("status").String("pending").Key("activity_id").String(activity_id);
  w.Key("ticket").String(ticket).EndObject();
  return JsonReply(http::status::accepted, Word::kPending, std::move(w).Take());
}

Reply RoomReply(std::string_view activity_id, const service::RoomView& view) {
  using service::RoomState;
  JsonWriter w;
  if (view.state == RoomState::kRateLimited) {
    w.BeginObject().Key("code").Int(static_cast<int>(core::Outcome::kRateLimited));
    w.Key("status").String("rate_limited").Key("activity_id").String(activity_id);
    w.Key("retry_after_ms").Int(view.retry_after_ms).EndObject();
    Reply reply =
        JsonReply(http::status::too_many_requests, Word::kRateLimited, std::move(w).Take());
    reply.retry_after_s = std::max<int64_t>(1, (view.retry_after_ms + 999) / 1000);
    return reply;
  }
  w.BeginObject().Key("status").String(service::ToString(view.state));
  w.Key("activity_id").String(activity_id).Key("place");
  if (view.place > 0) {
    w.Int(view.place);
  } else {
    w.Null();
  }
  w.Key("ahead").Int(view.ahead).Key("waiting").Int(view.size).Key("admit_at_ms");
  if (view.admit_at_ms > 0) {
    w.Int(view.admit_at_ms);
  } else {
    w.Null();
  }
  w.Key("estimate_ms").Int(view.estimate_ms).Key("start_ms").Int(view.start_ms);
  w.Key("server_time_ms").Int(view.server_time_ms).Key("joined").Bool(view.joined_now);
  if (view.state == RoomState::kAdmitted) {
    w.Key("pass").String(view.pass).Key("pass_expires_ms").Int(view.pass_expires_ms);
  }
  w.EndObject();
  Word word = Word::kNotJoined;
  switch (view.state) {
    case RoomState::kDrawing:
      word = Word::kDrawing;
      break;
    case RoomState::kWaiting:
      word = Word::kWaiting;
      break;
    case RoomState::kAdmitted:
      word = Word::kAdmitted;
      break;
    case RoomState::kSoldOut:
      word = Word::kSoldOut;
      break;
    case RoomState::kNotJoined:
    case RoomState::kRateLimited:
      break;
  }
  return JsonReply(http::status::ok, word, std::move(w).Take());
}

Reply PassRequiredReply(std::string_view activity_id, std::string_view why) {
  JsonWriter w;
  w.BeginObject().Key("code").Int(kPassRequiredCode).Key("status").String("pass_required");
  w.Key("activity_id").String(activity_id).Key("error").String(why).EndObject();
  return JsonReply(http::status::forbidden, Word::kPassRequired, std::move(w).Take());
}

namespace {

// A public 5xx reply says what happened in words; the error's text (which may name a Redis
// socket, a host and port or a database URL) goes to the log, at most once a second per thread,
// and to the admin (Reply::detail).
Reply WordsReply(http::status status, Word word, std::string_view words, const base::Error& error) {
  thread_local std::chrono::steady_clock::time_point last_log;
  thread_local uint64_t unlogged = 0;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_log >= std::chrono::seconds(1)) {
    spdlog::warn("replied {} ({}): {}{}", static_cast<int>(status), words, error.ToString(),
                 unlogged > 0 ? fmt::format(" (and {} more since the last line)", unlogged) : "");
    last_log = now;
    unlogged = 0;
  } else {
    ++unlogged;
  }
  Reply reply = ErrorReply(status, word, words);
  reply.detail = error.message;
  return reply;
}

}  // namespace

Reply UnknownOutcomeReply(std::string_view activity_id, std::string_view order_id,
                          std::string_view reason, service::Use use) {
  const bool draw = use == service::Use::kDraw;
  const std::string_view words =
      draw ? "no answer in time: the draw may have been made; GET /api/v1/orders shows a win"
           : "no answer in time: the order may have been reserved; GET /api/v1/orders shows it";
  Reply reply =
      WordsReply(http::status::service_unavailable, Word::kUnknownOutcome, words,
                 base::Error{ErrorCode::kUnknownOutcome,
                             fmt::format("{} {}: {}", draw ? "draw" : "order", order_id, reason)});
  JsonWriter w;
  w.BeginObject().Key("status").String("unknown_outcome");
  w.Key("activity_id").String(activity_id);
  const size_t order_id_at = WriteOrderId(w, order_id);
  w.Key("error").String(words).EndObject();
  reply.body = std::move(w).Take();
  reply.retry_after_s = 1;
  reply.NameOrder(order_id_at, order_id.size());
  return reply;
}

Reply PaymentReply(std::string_view order_id, store::PayOutcome outcome) {
  JsonWriter w;
  w.BeginObject();
  const size_t order_id_at = WriteOrderId(w, order_id);
  Reply reply;
  if (outcome == store::PayOutcome::kRefused) {
    w.Key("status").String("refund_due");
    w.Key("error").String(
        "the order expired before the payment came; the payment is flagged "
        "for a refund");
    w.EndObject();
    reply = JsonReply(http::status::conflict, Word::kConflict, std::move(w).Take());
  } else {
    w.Key("status").String("paid").Key("replayed").Bool(outcome == store::PayOutcome::kAlreadyPaid);
    w.EndObject();
    reply = JsonReply(http::status::ok, Word::kOk, std::move(w).Take());
  }
  reply.NameOrder(order_id_at, order_id.size());
  return reply;
}

Reply PaymentErrorReply(const base::Error& error) {
  if (error.code == ErrorCode::kNotFound) {
    return ErrorReply(http::status::not_found, Word::kNotFound,
                      "no such order of yours in the record (an order reserved a moment ago "
                      "may not be recorded yet: retry)");
  }
  return ErrorToReply(error);
}

namespace {

constexpr std::string_view kOrdersCsvHeader =
    "order_id,activity_id,user_id,quantity,items,prize,draw_no,state,refund_due,compensation_due,"
    "created_ms,persisted_ms,paid_ms,cancelled_ms\r\n";

// A lottery win holds its prize as its one item, under a draw number.
bool IsWin(const store::OrderRecord& order) { return order.draw_no > 0; }

std::string_view PrizeOf(const store::OrderRecord& order) {
  return IsWin(order) && !order.items.empty() ? std::string_view(order.items.front()) : "";
}

int64_t TimeIn(const store::OrderRecord& order, store::OrderState state) {
  return order.state == state ? order.state_ms : 0;
}

void WriteOrderJson(JsonWriter& w, const store::OrderRecord& order) {
  w.BeginObject()
      .Key("order_id")
      .String(order.order_id)
      .Key("activity_id")
      .String(order.activity_id)
      .Key("user_id")
      .String(order.user_id)
      .Key("quantity")
      .Int(order.quantity)
      .Key("items");
  if (IsWin(order)) {
    w.BeginArray().EndArray().Key("prize").String(PrizeOf(order)).Key("draw_no").Int(order.draw_no);
  } else {
    w.Strings(order.items).Key("prize").Null().Key("draw_no").Null();
  }
  w.Key("state")
      .String(store::ToString(order.state))
      .Key("refund_due")
      .Bool(order.refund_due)
      .Key("compensation_due")
      .Bool(order.compensation_due)
      .Key("created_ms")
      .Int(order.created_ms)
      .Key("persisted_ms")
      .Int(order.persisted_ms);
  for (const auto& [key, state] : {std::pair{"paid_ms", store::OrderState::kPaid},
                                   std::pair{"cancelled_ms", store::OrderState::kCancelled}}) {
    w.Key(key);
    if (order.state == state) {
      w.Int(order.state_ms);
    } else {
      w.Null();
    }
  }
  w.EndObject();
}

void AppendCsvRow(std::string& out, const store::OrderRecord& order) {
  const auto text = [&out](std::string_view field) {
    base::AppendCsvField(out, field, true);
    out.push_back(',');
  };
  const auto number = [&out](int64_t value, bool present) {
    if (present) fmt::format_to(std::back_inserter(out), "{}", value);
    out.push_back(',');
  };
  text(order.order_id);
  text(order.activity_id);
  text(order.user_id);
  number(order.quantity, true);
  text(IsWin(order) ? std::string() : base::JoinWords(order.items));
  text(PrizeOf(order));
  number(order.draw_no, IsWin(order));
  text(store::ToString(order.state));
  text(order.refund_due ? "true" : "false");
  text(order.compensation_due ? "true" : "false");
  number(order.created_ms, true);
  number(order.persisted_ms, true);
  number(TimeIn(order, store::OrderState::kPaid), order.state == store::OrderState::kPaid);
  const bool cancelled = order.state == store::OrderState::kCancelled;
  if (cancelled) fmt::format_to(std::back_inserter(out), "{}", order.state_ms);
  out.append("\r\n");
}

}  // namespace

std::string_view OrdersCsvHeader() { return kOrdersCsvHeader; }

Reply OrdersPageReply(const store::OrderPage& page, bool csv) {
  Reply reply;
  if (csv) {
    reply.content_type = "text/csv; charset=utf-8; header=present";
    reply.body.reserve(kOrdersCsvHeader.size() + page.orders.size() * 128);
    reply.body.append(kOrdersCsvHeader);
    for (const store::OrderRecord& order : page.orders) AppendCsvRow(reply.body, order);
  } else {
    JsonWriter w;
    w.BeginObject().Key("orders").BeginArray();
    for (const store::OrderRecord& order : page.orders) WriteOrderJson(w, order);
    w.EndArray().Key("next");
    if (page.next.empty()) {
      w.Null();
    } else {
      w.String(page.next);
    }
    w.EndObject();
    reply.body = std::move(w).Take();
  }
  if (!page.next.empty()) reply.headers = "X-Next-Cursor: " + page.next + "\r\n";
  return reply;
}

Reply ErrorToReply(const base::Error& error) {
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
      return ErrorReply(http::status::bad_request, Word::kBadRequest, error.message);
    case ErrorCode::kNotFound:
      return ErrorReply(http::status::not_found, Word::kNotFound, error.message);
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kFailedPrecondition:  // RFC 9110 15.5.10: the resource's state conflicts
      return ErrorReply(http::status::conflict, Word::kConflict, error.message);
    case ErrorCode::kResourceExhausted: {
      JsonWriter w;
      w.BeginObject().Key("code").Int(static_cast<int>(core::Outcome::kOverloaded));
      w.Key("status").String("overloaded").Key("error").String(error.message).EndObject();
      Reply reply =
          JsonReply(http::status::service_unavailable, Word::kOverloaded, std::move(w).Take());
      reply.retry_after_s = 1;
      return reply;
    }
    case ErrorCode::kUnknownOutcome: {
      Reply reply = WordsReply(http::status::service_unavailable, Word::kUnknownOutcome,
                               "no answer in time: the outcome is unknown", error);
      reply.retry_after_s = 1;
      return reply;
    }
    case ErrorCode::kCancelled:
      return WordsReply(http::status::service_unavailable, Word::kShuttingDown, "shutting down",
                        error);
    case ErrorCode::kUnavailable: {
      // The freeze after a Redis restart says what it is (its message names nothing internal);
      // any other unavailability is told in general words, its detail logged.
      const std::string_view words =
          error.detail == base::ErrorDetail::kFrozen
              ? service::kFrozenMessage
              : std::string_view("a service behind this one is unavailable; nothing was done");
      Reply reply = WordsReply(http::status::service_unavailable, Word::kUnavailable, words, error);
      reply.retry_after_s = 1;
      return reply;
    }
    case ErrorCode::kRemote:
    case ErrorCode::kProtocol: {
      Reply reply = WordsReply(http::status::service_unavailable, Word::kUnavailable,
                               "a service behind this one failed the request", error);
      reply.retry_after_s = 1;
      return reply;
    }
    case ErrorCode::kInternal:
      break;
  }
  return WordsReply(http::status::internal_server_error, Word::kError, "internal error", error);
}

Reply ParseErrorReply(const boost::system::error_code& error) {
  Reply reply;
  if (error == boost::beast::http::error::header_limit) {
    reply = ErrorReply(http::status::request_header_fields_too_large, Word::kHeadersTooLarge,
                       "request headers are too large");
  } else if (error == boost::beast::http::error::body_limit) {
    reply = ErrorReply(http::status::payload_too_large, Word::kPayloadTooLarge,
                       "request body is too large");
  } else {
    reply = ErrorReply(http::status::bad_request, Word::kBadRequest,
                       "malformed HTTP request: " + error.message());
  }
  reply.close = true;
  return reply;
}

Reply AdminDetail(Reply reply) {
  if (reply.detail.empty()) return reply;
  Reply detailed = ErrorReply(reply.status, reply.word, reply.detail);
  detailed.retry_after_s = reply.retry_after_s;
  return detailed;
}

}  // namespace flashsale::server
