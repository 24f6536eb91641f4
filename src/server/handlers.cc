#include "server/handlers.h"

#include <fmt/format.h>

#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cmath>
#include <optional>

#include "base/ids.h"
#include "base/json_writer.h"
#include "core/activity.h"
#include "server/bodies.h"
#include "server/ops_metrics.h"
#include "server/replies.h"
#include "server/router.h"
#include "server/web_assets.h"
#include "service/admin.h"
#include "service/draw.h"
#include "service/events.h"
#include "service/jobs.h"
#include "service/purchase.h"
#include "service/queries.h"
#include "service/redis_watch.h"
#include "service/waiting_room.h"

namespace flashsale::server {

namespace asio = boost::asio;
using base::ErrorCode;
using base::JsonWriter;

namespace {

std::string_view Header(const Request& request, std::string_view name) {
  auto it = request.find(name);
  if (it == request.end()) return {};
  return {it->value().data(), it->value().size()};
}

Reply Json(http::status status, Word word, JsonWriter& w) {
  return JsonReply(status, word, std::move(w).Take());
}

void WriteRate(JsonWriter& w, std::string_view key, const core::RateLimit& rate) {
  w.Key(key);
  if (!rate.enabled()) {
    w.Null();
    return;
  }
  w.BeginObject()
      .Key("per_second")
      .Double(rate.per_second)
      .Key("burst")
      .Int(rate.burst)
      .EndObject();
}

void WriteState(JsonWriter& w, const service::ActivityState& state) {
  const auto& record = state.record;
  w.BeginObject().Key("activity").BeginObject();
  w.Key("id").String(record.activity.id).Key("title").String(record.activity.title);
  w.Key("kind").String(core::KindName(record.activity));
  w.Key("start_ms").Int(record.activity.start_ms).Key("end_ms").Int(record.activity.end_ms);
  w.Key("per_user_limit").Int(record.activity.per_user_limit);
  w.Key("open").Bool(record.activity.open).Key("total_units").Int(record.total_units);
  WriteRate(w, "user_rate", record.activity.user_rate);
  WriteRate(w, "address_rate", record.activity.address_rate);
  w.Key("payment_window_ms").Int(record.activity.payment_window_ms);
  w.Key("webhook_urls").BeginArray();
  for (const std::string& url : record.activity.webhook_urls) w.String(url);
  w.EndArray();
  service::WriteWaitingRoomField(w, record.activity);
  w.Key("version").Int(record.version).Key("created_ms").Int(record.created_ms);
  w.Key("updated_ms").Int(record.updated_ms);
  service::WriteLotteryFields(w, record.activity);
  w.EndObject().Key("redis");
  if (!state.redis) {
    w.Null();
  } else {
    const auto& r = *state.redis;
    w.BeginObject().Key("loaded").Bool(r.found);
    if (r.found) {
      w.Key("state").String(r.state).Key("remaining").Int(r.remaining);
      w.Key("reserved").Int(r.reserved).Key("released").Int(r.released);
      w.Key("total").Int(r.total).Key("stream_length").Int(r.stream_length);
      w.Key("orders").Int(r.orders).Key("buyers").Int(r.buyers).Key("version").Int(r.version);
    }
    w.EndObject();
  }
  if (!state.redis_error.empty()) w.Key("redis_error").String(state.redis_error);
  w.Key("pipeline");
  if (state.pipeline) {
    const auto& p = *state.pipeline;
    w.BeginObject().Key("stream_length").Int(p.length).Key("pending").Int(p.pending);
    w.Key("lag").Int(p.lag).Key("dead_letters").Int(p.dead_letters).EndObject();
  } else {
    w.Null();
  }
  w.Key("persisted");
  if (state.persisted) {
    w.BeginObject().Key("orders").Int(state.persisted->orders);
    w.Key("units").Int(state.persisted->units);
    w.Key("cancelled_units").Int(state.persisted->cancelled_units).EndObject();
  } else {
    w.Null();
  }
  w.Key("reconciliation");
  if (!state.reconciliation.empty()) {
    w.Raw(state.reconciliation);
  } else {
    w.Null();
  }
  w.Key("frozen").Bool(state.frozen);
  if (state.frozen) w.Key("frozen_reason").String(service::ToString(state.frozen_reason));
  w.Key("oversold_units").Int(state.oversold_units);
  w.EndObject();
}

Reply StateReply(http::status status, const service::ActivityState& state) {
  JsonWriter w;
  WriteState(w, state);
  return Json(status, status == http::status::created ? Word::kCreated : Word::kOk, w);
}

bool ValidActivityParam(const Call& call) { return core::IsValidActivityId(call.params[0]); }

Reply BadActivityParam(const Call& call) {
  return ErrorReply(http::status::bad_request, Word::kBadRequest,
                    fmt::format("activity id '{}' must be 1-64 characters of [A-Za-z0-9_-]",
                                call.params[0].substr(0, 64)));
}

asio::awaitable<Reply> SetOpen(Call& call, bool open) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  store::ActivityUpdate update;
  update.open = open;
  auto state = co_await service::UpdateActivity(call.worker.service, call.params[0], update);
  if (!state) co_return ErrorToReply(state.error());
  co_return StateReply(http::status::ok, *state);
}

// One file of web/. Every load revalidates (no-cache) and an unchanged file costs a 304: the
// files have no hashed names, so a long max-age would keep an old page after an upgrade.
Reply WebFileReply(const Call& call, std::string_view name) {
  const EmbeddedWebFile* file = FindWebFile(name);
  if (file == nullptr) {
    return ErrorReply(http::status::not_found, Word::kNotFound, "no such file");
  }
  Reply reply;
  reply.content_type = WebContentType(file->name);
  reply.cache_control = "no-cache";
  reply.etag = file->md5;
  const std::string_view if_none_match = Header(call.request, "If-None-Match");
  const std::string quoted = fmt::format("\"{}\"", file->md5);
  if (if_none_match.find(quoted) != std::string_view::npos) {
    reply.status = http::status::not_modified;
    return reply;
  }
  reply.body = std::string(file->body);
  return reply;
}

// What a purchase or a draw asks, from the call.
service::AdmissionRequest AdmissionRequestOf(const Call& call, int64_t quantity) {
  return service::AdmissionRequest{
      .activity_id = call.params[0],
      .user_id = call.user_id,
      .quantity = quantity,
      .idempotency_key = Header(call.request, "Idempotency-Key"),
      .client_address = call.client_address,
  };
}

// The reply of a purchase or a draw that has no decided outcome: a use-case error, or the unknown
// outcome. Nothing for a decided one (a refusal answered without Redis is counted).
template <typename R>
std::optional<Reply> UndecidedReply(Call& call, const base::Result<R>& result, service::Use use) {
  if (!result) return ErrorToReply(result.error());
  if (result->unknown) {
    return UnknownOutcomeReply(call.params[0], result->order_id, result->unknown_reason, use);
  }
  if (result->local != service::LocalReason::kNone) call.worker.metrics.LocalRefusal(result->local);
  return std::nullopt;
}

}  // namespace

asio::awaitable<Reply> HandlePurchase(Call& call) {
  auto quantity = ParsePurchaseBody(call.request.body());
  if (!quantity) co_return ErrorToReply(quantity.error());
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  {
    // A sale with a waiting room sells only to the admitted (issue 37): the pass is checked here,
    // before anything reaches Redis.
    const service::SnapshotPtr snapshot = call.worker.service.snapshot();
    const store::ActivityRecord* record = snapshot->Find(call.params[0]);
    if (record != nullptr && record->activity.waiting_room) {
      auto pass = service::CheckRoomPass(call.worker.service, record->activity, call.user_id,
                                         Header(call.request, "X-Waiting-Room-Pass"));
      if (!pass) co_return PassRequiredReply(call.params[0], pass.error().message);
    }
  }
  auto result =
      co_await service::Purchase(call.worker.service, AdmissionRequestOf(call, *quantity));
  if (auto reply = UndecidedReply(call, result, service::Use::kPurchase)) co_return *reply;
  co_return PurchaseOutcomeReply(call.params[0], *result);
}

asio::awaitable<Reply> HandleDraw(Call& call) {
  // A draw takes no body; an empty object is accepted, anything else is a mistake worth saying.
  if (auto body = ParseDrawBody(call.request.body()); !body) co_return ErrorToReply(body.error());
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  auto result = co_await service::Draw(call.worker.service, AdmissionRequestOf(call, 1));
  if (auto reply = UndecidedReply(call, result, service::Use::kDraw)) co_return *reply;
  if (!result->ticket.empty()) co_return QueuedDrawReply(call.params[0], result->ticket);
  co_return DrawOutcomeReply(call.params[0], *result);
}

asio::awaitable<Reply> HandlePay(Call& call) {
  const std::string_view order_id = call.params[0];
  if (!base::IsValidId(order_id)) {
    co_return ErrorReply(http::status::bad_request, Word::kBadRequest,
                         "order ids are 1-64 characters of [A-Za-z0-9_.:@-]");
  }
  auto paid = co_await service::ConfirmPayment(call.worker.service, call.user_id, order_id);
  if (!paid) co_return PaymentErrorReply(paid.error());
  co_return PaymentReply(order_id, *paid);
}

asio::awaitable<Reply> HandleRoomJoin(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  if (!call.request.body().empty() && call.request.body() != "{}") {
    co_return ErrorReply(http::status::bad_request, Word::kBadRequest,
                         "a join takes no body (or {})");
  }
  auto view = co_await service::JoinRoom(call.worker.service, call.params[0], call.user_id,
                                         call.client_address);
  if (!view) co_return ErrorToReply(view.error());
  co_return RoomReply(call.params[0], *view);
}

asio::awaitable<Reply> HandleRoomWait(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  auto wait_ms = ParseTicketQuery(call.query);
  if (!wait_ms) co_return ErrorToReply(wait_ms.error());
  auto view = co_await service::WaitInRoom(call.worker.service, call.params[0], call.user_id,
                                           std::chrono::milliseconds(*wait_ms));
  if (!view) co_return ErrorToReply(view.error());
  co_return RoomReply(call.params[0], *view);
}

asio::awaitable<Reply> HandleTicket(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  auto wait_ms = ParseTicketQuery(call.query);
  if (!wait_ms) co_return ErrorToReply(wait_ms.error());
  const std::string_view ticket_id = call.params[1];
  if (!base::IsValidId(ticket_id)) {
    co_return ErrorReply(http::status::bad_request, Word::kBadRequest,
                         "ticket ids are 1-64 characters of [A-Za-z0-9_.:@-]");
  }
  auto ticket = co_await service::GetTicket(call.worker.service, call.params[0], ticket_id,
                                            call.user_id, std::chrono::milliseconds(*wait_ms));
  if (!ticket) co_return ErrorToReply(ticket.error());
  if (!ticket->has_value()) co_return PendingTicketReply(call.params[0], ticket_id);
  co_return DrawOutcomeReply(call.params[0], **ticket);
}

asio::awaitable<Reply> HandleActivityInfo(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  auto info = co_await service::GetActivityInfo(call.worker.service, call.params[0]);
  if (!info) co_return ErrorToReply(info.error());
  JsonWriter w;
  w.BeginObject().Key("activity").Raw(info->definition_json);
  w.Key("remaining");
  if (info->remaining >= 0) {
    w.Int(info->remaining);
  } else {
    w.Null();
  }
  w.Key("sold_out").Bool(info->sold_out).Key("server_time_ms").Int(info->server_time_ms);
  w.EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleActivityList(Call& call) {
  const service::SnapshotPtr snapshot = call.worker.service.snapshot();
  JsonWriter w;
  w.BeginObject().Key("activities").BeginArray();
  for (const auto& record : snapshot->all()) w.Raw(service::RenderActivityDefinition(record));
  w.EndArray().Key("server_time_ms").Int(call.worker.service.clock().NowMs()).EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleConfig(Call& call) {
  const IdentityMode mode = call.worker.identity.mode;
  JsonWriter w;
  w.BeginObject()
      .Key("identity")
      .String(mode == IdentityMode::kToken ? "token"
              : mode == IdentityMode::kJwt ? "jwt"
                                           : "gateway");
  w.EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleOrders(Call& call) {
  auto orders = co_await service::GetUserOrders(call.worker.service, call.user_id);
  if (!orders) co_return ErrorToReply(orders.error());
  JsonWriter w;
  w.BeginObject().Key("user_id").String(call.user_id).Key("orders").BeginArray();
  for (const auto& entry : *orders) {
    const auto& order = entry.order;
    w.BeginObject().Key("order_id").String(order.order_id);
    w.Key("activity_id").String(entry.activity_id);
    w.Key("quantity").Int(order.quantity).Key("items").Strings(order.items);
    w.Key("created_ms").Int(order.created_ms).Key("state").String(entry.state);
    w.Key("persisted").Bool(entry.persisted).EndObject();
  }
  w.EndArray().EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleAdminList(Call& call) {
  auto states = co_await service::ListActivityStates(call.worker.service);
  if (!states) co_return ErrorToReply(states.error());
  JsonWriter w;
  w.BeginObject().Key("activities").BeginArray();
  for (const auto& state : *states) WriteState(w, state);
  w.EndArray().EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleAdminCreate(Call& call) {
  auto activity = ParseActivityBody(call.request.body(), call.worker.service.clock().NowMs());
  if (!activity) co_return ErrorToReply(activity.error());
  auto state = co_await service::CreateActivity(call.worker.service, *activity);
  if (!state) co_return ErrorToReply(state.error());
  co_return StateReply(http::status::created, *state);
}

asio::awaitable<Reply> HandleAdminGet(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  auto state = co_await service::GetActivityState(call.worker.service, call.params[0]);
  if (!state) co_return ErrorToReply(state.error());
  co_return StateReply(http::status::ok, *state);
}

asio::awaitable<Reply> HandleAdminUpdate(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  const service::SnapshotPtr snapshot = call.worker.service.snapshot();
  auto update = ParseActivityUpdate(call.request.body(), snapshot->Find(call.params[0]));
  if (!update) co_return ErrorToReply(update.error());
  auto state = co_await service::UpdateActivity(call.worker.service, call.params[0], *update);
  if (!state) co_return ErrorToReply(state.error());
  co_return StateReply(http::status::ok, *state);
}

asio::awaitable<Reply> HandleAdminOpen(Call& call) { return SetOpen(call, true); }
asio::awaitable<Reply> HandleAdminClose(Call& call) { return SetOpen(call, false); }

asio::awaitable<Reply> HandleAdminStock(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  auto stock = ParseStockBody(call.request.body());
  if (!stock) co_return ErrorToReply(stock.error());
  auto state =
      co_await service::AddStock(call.worker.service, call.params[0], stock->units, stock->items);
  if (!state) co_return ErrorToReply(state.error());
  co_return StateReply(http::status::ok, *state);
}

asio::awaitable<Reply> HandleAdminDelete(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  auto deleted = co_await service::DeleteActivity(call.worker.service, call.params[0]);
  if (!deleted) co_return ErrorToReply(deleted.error());
  JsonWriter w;
  w.BeginObject().Key("status").String("deleted").Key("activity_id").String(call.params[0]);
  w.EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleAdminDeadLetters(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  auto dead = co_await service::ListDeadLetters(call.worker.service, call.params[0], 1000);
  if (!dead) co_return ErrorToReply(dead.error());
  JsonWriter w;
  w.BeginObject().Key("activity_id").String(call.params[0]).Key("dead_letters").BeginArray();
  for (const auto& entry : *dead) {
    w.BeginObject().Key("id").String(entry.id);
    for (const auto& [name, value] : entry.fields) w.Key(name).String(value);
    w.EndObject();
  }
  w.EndArray().EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleAdminRetryDeadLetter(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  const std::string_view dead_id = call.params[1];
  if (dead_id.size() > 41 || dead_id.find_first_not_of("0123456789-") != std::string_view::npos) {
    co_return ErrorReply(http::status::bad_request, Word::kBadRequest,
                         "a dead letter id is a stream entry id such as 1700000000000-0");
  }
  auto id = co_await service::RetryDeadLetter(call.worker.service, call.params[0], dead_id);
  if (!id) co_return ErrorToReply(id.error());
  JsonWriter w;
  w.BeginObject().Key("dead_id").String(dead_id).Key("stream_id").String(*id).EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleAdminRedis(Call& call) {
  const service::RedisWatch* watch = call.worker.service.settings().redis_watch;
  if (watch == nullptr) {
    co_return ErrorReply(http::status::not_found, Word::kNotFound,
                         "this server does not watch Redis for restarts");
  }
  Reply reply;
  reply.status = http::status::ok;
  reply.word = Word::kOk;
  reply.body = watch->Json();
  co_return reply;
}

asio::awaitable<Reply> HandleAdminEvents(Call& call) {
  auto query = ParseEventsQuery(call.query);
  if (!query) co_return ErrorToReply(query.error());
  auto page = co_await service::ReadEvents(call.worker.service, query->after, query->limit,
                                           std::chrono::milliseconds(query->wait_ms));
  if (!page) co_return ErrorToReply(page.error());
  JsonWriter w;
  w.BeginObject().Key("events").BeginArray();
  for (const store::OrderEvent& event : page->events) service::WriteEventJson(w, event);
  w.EndArray().Key("next").Int(page->next).EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleAdminOrders(Call& call) {
  auto query = ParseOrdersQuery(call.query);
  if (!query) co_return ErrorToReply(query.error());
  const bool csv = OrdersFormatFor(*query, call.request[http::field::accept]) == OrdersFormat::kCsv;
  auto page =
      co_await service::ReadOrdersPage(call.worker.service, std::string(call.params[0]),
                                       std::move(query->after), query->limit, query->states);
  if (!page) co_return ErrorToReply(page.error());
  co_return OrdersPageReply(*page, csv);
}

namespace {

// A status word a buyer got that is not a purchase's or a draw's success (nor a replay of one):
// the report's refusals.
bool IsRefusal(std::string_view word) {
  for (Word success : {Word::kReserved, Word::kWon, Word::kNoPrize, Word::kQueued, Word::kPaid,
                       Word::kCompensationDue, Word::kCancelled}) {
    if (word == WordName(success)) return false;
  }
  return true;
}

}  // namespace

asio::awaitable<Reply> HandleAdminReport(Call& call) {
  if (!ValidActivityParam(call)) co_return BadActivityParam(call);
  auto report =
      co_await service::ReadActivityReport(call.worker.service, std::string(call.params[0]));
  if (!report) co_return ErrorToReply(report.error());
  const core::Activity& activity = report->activity.activity;
  const store::OrderReport& orders = report->orders;
  int64_t units_sold = 0;
  for (const store::StateTotal& state : orders.states) {
    if (state.state != "cancelled") units_sold += state.units;
  }
  const int64_t stock = report->activity.total_units;
  JsonWriter w;
  w.BeginObject().Key("activity_id").String(activity.id).Key("title").String(activity.title);
  w.Key("lottery").Bool(activity.lottery.has_value());
  w.Key("start_ms").Int(activity.start_ms).Key("end_ms").Int(activity.end_ms);
  w.Key("stock").Int(stock).Key("units_sold").Int(units_sold).Key("orders").Int(orders.orders);
  w.Key("first_order_ms");
  if (orders.orders > 0) {
    w.Int(orders.first_ms).Key("last_order_ms").Int(orders.last_ms);
  } else {
    w.Null().Key("last_order_ms").Null();
  }
  // Sold out: every unit of the stock is held by a live order; the time is from the activity's
  // start to the last order.
  w.Key("sell_out_ms");
  if (stock > 0 && units_sold >= stock && orders.orders > 0) {
    w.Int(orders.last_ms - activity.start_ms);
  } else {
    w.Null();
  }
  w.Key("step_s").Int(orders.step_s).Key("buckets").BeginArray();
  for (const store::ReportBucket& bucket : orders.buckets) {
    w.BeginObject().Key("second").Int(bucket.second).Key("orders").Int(bucket.orders);
    w.Key("units").Int(bucket.units).EndObject();
  }
  w.EndArray().Key("states").BeginObject();
  for (const store::StateTotal& state : orders.states) {
    w.Key(state.state).BeginObject().Key("orders").Int(state.orders);
    w.Key("units").Int(state.units).EndObject();
  }
  w.EndObject().Key("refund_due").Int(orders.refund_due);
  w.Key("compensation_due").Int(orders.compensation_due);
  w.Key("refused").Int(orders.refused).Key("prizes").BeginArray();
  for (const auto& [prize_id, won] : orders.prizes) {
    const core::Prize* prize = activity.lottery ? activity.lottery->Find(prize_id) : nullptr;
    w.BeginObject().Key("prize_id").String(prize_id);
    w.Key("name").String(prize != nullptr ? std::string_view(prize->name) : std::string_view());
    w.Key("won").Int(won).EndObject();
  }
  // What the buyers were answered, by status word, most first: refusals answered before Redis
  // or by it leave no order, so they are counted as they are answered (Store::AddAnswers).
  w.EndArray().Key("answers").BeginArray();
  for (const auto& [word, count] : orders.answers) {
    w.BeginObject().Key("status").String(word).Key("count").Int(count);
    w.Key("refusal").Bool(IsRefusal(word)).EndObject();
  }
  w.EndArray().EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleAdminWebhooksParked(Call& call) {
  auto parked = co_await service::ListParked(call.worker.service, 1000);
  if (!parked) co_return ErrorToReply(parked.error());
  JsonWriter w;
  w.BeginObject().Key("parked").BeginArray();
  for (const store::ParkedEvent& held : *parked) {
    const store::OrderEvent& event = held.event;
    w.BeginObject()
        .Key("receiver")
        .String(held.receiver)
        .Key("attempts")
        .Int(held.attempts)
        .Key("last_error")
        .String(held.last_error)
        .Key("parked_ms")
        .Int(held.parked_ms)
        .Key("retry")
        .Bool(held.retry)
        .Key("event");
    service::WriteEventJson(w, event);
    w.EndObject();
  }
  w.EndArray().EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleAdminWebhooksRetry(Call& call) {
  auto receiver = ParseWebhookRetryBody(call.request.body());
  if (!receiver) co_return ErrorToReply(receiver.error());
  auto asked = co_await service::RetryParked(call.worker.service, *receiver);
  if (!asked) co_return ErrorToReply(asked.error());
  JsonWriter w;
  w.BeginObject().Key("retried").Int(*asked).EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandleAdminJob(Call& call) {
  const auto job = service::JobFrom(call.params[0]);
  if (!job) {
    co_return ErrorReply(
        http::status::not_found, Word::kNotFound,
        "no job '" + std::string(call.params[0]) + "' (prewarm, reconcile, expire)");
  }
  auto body = ParseJobBody(call.request.body());
  if (!body) co_return ErrorToReply(body.error());
  const service::JobRequest request{
      .job = *job, .activity_id = body->activity_id, .repair = body->repair};
  auto report = co_await service::RunJob(call.worker.service, request, nullptr);
  if (!report) {
    if (report.error().code == base::ErrorCode::kAlreadyExists) {
      co_return ErrorReply(http::status::conflict, Word::kConflict, report.error().message);
    }
    co_return ErrorToReply(report.error());
  }
  Reply reply;
  reply.word = Word::kOk;
  reply.body = std::move(*report);
  co_return reply;
}

asio::awaitable<Reply> HandleAdminToken(Call& call) {
  if (call.worker.identity.mode == IdentityMode::kJwt) {
    // Such a token would be refused by this very service: buyers bring the shop's JWTs.
    co_return ErrorReply(http::status::bad_request, Word::kBadRequest,
                         "identity is jwt: buyers' tokens come from the shop's identity provider, "
                         "not from flashsale");
  }
  auto body = ParseTokenBody(call.request.body());
  if (!body) co_return ErrorToReply(body.error());
  const int64_t expires_ms = call.worker.service.clock().NowMs() + body->ttl_s * 1000;
  JsonWriter w;
  w.BeginObject().Key("user_id").String(body->user_id);
  w.Key("token").String(call.worker.identity.signer.Issue(body->user_id, expires_ms));
  w.Key("expires_ms").Int(expires_ms).EndObject();
  co_return Json(http::status::ok, Word::kOk, w);
}

asio::awaitable<Reply> HandlePreflight(Call& call) {
  // The methods the path takes, OPTIONS among them (the route table says; no route has `unknown`).
  const RouteMatch path = MatchRoute(Routes(), http::verb::unknown, call.request.target());
  Reply reply;
  reply.status = http::status::no_content;
  reply.word = Word::kOk;
  reply.allow = path.allow;
  const auto origin = call.request.find(http::field::origin);
  if (call.worker.cors != nullptr && origin != call.request.end() &&
      !call.worker.cors
           ->AllowOrigin(std::string_view(origin->value().data(), origin->value().size()))
           .empty()) {
    reply.headers = PreflightHeaders(path.allow);
  }
  co_return reply;
}

asio::awaitable<Reply> HandleHealth(Call&) {
  co_return JsonReply(http::status::ok, Word::kOk, R"({"status":"ok"})");
}

asio::awaitable<Reply> HandleReady(Call& call) {
  if (call.worker.draining != nullptr && *call.worker.draining) {
    co_return ErrorReply(http::status::service_unavailable, Word::kShuttingDown, "shutting down");
  }
  const WorkerServices::Readiness ready = co_await call.worker.check_ready();
  if (!ready.redis.empty() || !ready.db.empty()) {
    // Words for the public; which endpoint failed, and how, for the admin token only.
    const bool admin = AuthenticateAdmin(call.worker.identity, call.request).ok();
    std::string problem;
    if (!ready.redis.empty()) problem = "redis: " + (admin ? ready.redis : "unavailable");
    if (!ready.db.empty()) {
      if (!problem.empty()) problem += "; ";
      problem += "db: " + (admin ? ready.db : "unavailable");
    }
    co_return ErrorReply(http::status::service_unavailable, Word::kUnavailable, problem);
  }
  co_return JsonReply(http::status::ok, Word::kOk, R"({"status":"ok","redis":"ok","db":"ok"})");
}

asio::awaitable<Reply> HandleMetrics(Call& call) {
  Reply reply;
  reply.body = call.worker.all_metrics.RenderPrometheus();
  co_await AppendOperatorMetrics(call.worker.service, reply.body);
  reply.content_type = "text/plain; version=0.0.4";
  co_return reply;
}

asio::awaitable<Reply> HandlePage(Call& call) { co_return WebFileReply(call, "index.html"); }

asio::awaitable<Reply> HandleDashboard(Call& call) {
  co_return WebFileReply(call, "dashboard.html");
}

asio::awaitable<Reply> HandleReportPage(Call& call) { co_return WebFileReply(call, "report.html"); }

asio::awaitable<Reply> HandleWebFile(Call& call) { co_return WebFileReply(call, call.params[0]); }

}  // namespace flashsale::server
