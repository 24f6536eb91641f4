#include "service/queries.h"

#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <set>

#include "base/json_writer.h"
#include "keyspace/service_state.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

std::string RenderActivityDefinition(const store::ActivityRecord& record) {
  const core::Activity& a = record.activity;
  base::JsonWriter w;
  w.BeginObject()
      .Key("id")
      .String(a.id)
      .Key("title")
      .String(a.title)
      .Key("kind")
      .String(core::KindName(a))
      .Key("start_ms")
      .Int(a.start_ms)
      .Key("end_ms")
      .Int(a.end_ms)
      .Key("per_user_limit")
      .Int(a.per_user_limit)
      .Key("open")
      .Bool(a.open)
      .Key("total_units")
      .Int(record.total_units)
      .Key("version")
      .Int(record.version)
      .Key("payment_window_ms")
      .Int(a.payment_window_ms);
  WriteWaitingRoomField(w, a);
  WriteLotteryFields(w, a);
  w.EndObject();
  return std::move(w).Take();
}

void WriteWaitingRoomField(base::JsonWriter& w, const core::Activity& activity) {
  w.Key("waiting_room");
  if (!activity.waiting_room) {
    w.Null();
    return;
  }
  const core::WaitingRoom& room = *activity.waiting_room;
  w.BeginObject().Key("opens_before_ms").Int(room.opens_before_ms);
  w.Key("admit_per_s").Int(room.admit_per_s).Key("pass_ttl_ms").Int(room.pass_ttl_ms);
  w.Key("max_waiting").Int(room.max_waiting).EndObject();
}

void WriteLotteryFields(base::JsonWriter& w, const core::Activity& activity) {
  if (!activity.is_lottery()) return;
  const core::Lottery& lottery = *activity.lottery;
  w.Key("prizes").BeginArray();
  for (const auto& prize : lottery.prizes) {
    w.BeginObject().Key("id").String(prize.id).Key("name").String(prize.name);
    w.Key("weight").Int(prize.weight).Key("stock").Int(prize.stock).EndObject();
  }
  w.EndArray().Key("no_prize_weight").Int(lottery.no_prize_weight);
  w.Key("admission").String(core::ToString(lottery.admission));
  w.Key("queue_capacity").Int(lottery.queue_capacity);
}

asio::awaitable<Result<store::PayOutcome>> ConfirmPayment(ServiceContext& context,
                                                          std::string_view user_id,
                                                          std::string_view order_id) {
  const auto pay = [user = std::string(user_id), id = std::string(order_id),
                    now_ms =
                        context.clock().NowMs()](store::Store& store) -> Result<store::PayOutcome> {
    auto order = store.GetOrder(id);
    if (!order.ok()) return std::move(order).error();
    if (order->user_id != user) return MakeError(ErrorCode::kNotFound, "no order '{}'", id);
    return store.PayOrder(id, now_ms);
  };
  co_return co_await context.OnDb(pay);
}

asio::awaitable<Result<ActivityInfo>> GetActivityInfo(ServiceContext& context,
                                                      std::string_view activity_id) {
  const SnapshotPtr snapshot = context.snapshot();
  const store::ActivityRecord* known = snapshot->Find(activity_id);
  if (known == nullptr) co_return MakeError(ErrorCode::kNotFound, "no activity '{}'", activity_id);
  const std::string id = known->activity.id;
  const std::string key =
      context.cache_keys().Key("seckill:activity", {{"activity_id", id}}, known->version);

  ActivityInfo info;
  keyspace::ServiceState cache(context.redis(), context.settings().key_namespace);
  auto cached = co_await cache.CacheGet(key);
  if (cached.ok() && cached->has_value()) {
    info.definition_json = std::move(**cached);
    info.cache_hit = true;
  } else {
    // A miss (or Redis down): the record is the source.
    const auto get = [id](store::Store& store) { return store.GetActivity(id, false); };
    auto record = co_await context.OnDb(get);
    if (!record.ok()) co_return std::move(record).error();
    info.definition_json = RenderActivityDefinition(*record);
    if (cached.ok()) {
      // Versioned key: a change of the activity moves readers to a new key; old ones expire.
      // Best effort: a write that fails costs the next reader a miss.
      (void)co_await cache.CachePut(key, info.definition_json, context.settings().cache_ttl_s);
    }
  }
  auto status = co_await context.activity_scripts().AsyncStatus(id, asio::use_awaitable);
  if (status.ok() && status->found) {
    info.remaining = status->remaining;
    info.sold_out = status->remaining == 0;
  }
  info.server_time_ms = context.clock().NowMs();
  co_return info;
}

asio::awaitable<Result<std::vector<UserOrder>>> GetUserOrders(ServiceContext& context,
                                                              std::string_view user_id) {
  const SnapshotPtr snapshot = context.snapshot();  // alive across the awaits below
  const auto of_user = [user = std::string(user_id)](store::Store& store) {
    return store.OrdersOfUser(user, 1000);
  };
  auto persisted = co_await context.OnDb(of_user);
  std::vector<UserOrder> orders;
  std::set<std::string, std::less<>> in_db;
  // Per activity, what the record has: Redis is asked only for the rest (the stream it reads is
  // the pipeline's backlog, activity_user_orders.lua).
  std::map<std::string, keyspace::PersistedOrders, std::less<>> of_activity;
  if (persisted.ok()) {
    for (auto& row : *persisted) {
      in_db.insert(row.order_id);
      keyspace::PersistedOrders& known = of_activity[row.activity_id];
      known.order_ids.push_back(row.order_id);
      if (row.state != store::OrderState::kCancelled) known.live_units += row.quantity;
      UserOrder order{
          row.activity_id,
          {row.order_id, row.quantity, row.created_ms, false, false, std::move(row.items)},
          true,
          std::string(store::ToString(row.state))};
      orders.push_back(std::move(order));
    }
  }
  const keyspace::PersistedOrders none;
  for (const auto& record : snapshot->all()) {
    const auto known = of_activity.find(record.activity.id);
    auto recorded = co_await context.activity_scripts().AsyncUserOrders(
        record.activity.id, user_id, known == of_activity.end() ? none : known->second,
        asio::use_awaitable);
    if (!recorded.ok()) {
      if (!persisted.ok()) co_return std::move(recorded).error();  // neither source answered
      continue;
    }
    for (auto& order : *recorded) {
      if (in_db.contains(order.order_id)) continue;
      const std::string state = order.refused    ? "refused"
                                : order.released ? "released"
                                                 : "reserved";
      orders.push_back({record.activity.id, std::move(order), false, state});
    }
  }
  std::sort(orders.begin(), orders.end(), [](const UserOrder& a, const UserOrder& b) {
    return a.order.created_ms != b.order.created_ms ? a.order.created_ms > b.order.created_ms
                                                    : a.order.order_id > b.order.order_id;
  });
  co_return orders;
}

asio::awaitable<Result<store::OrderPage>> ReadOrdersPage(ServiceContext& context,
                                                         std::string activity_id,
                                                         std::string cursor, int64_t limit,
                                                         store::OrderStates states) {
  const auto read = [activity_id = std::move(activity_id), cursor = std::move(cursor), limit,
                     states](store::Store& store) -> Result<store::OrderPage> {
    if (auto activity = store.GetActivity(activity_id, false); !activity) {
      return std::move(activity).error();
    }
    return store.OrdersPage(activity_id, cursor, limit, states);
  };
  co_return co_await context.OnDb(read);
}

asio::awaitable<Result<ActivityReport>> ReadActivityReport(ServiceContext& context,
                                                           std::string activity_id) {
  const auto read = [activity_id =
                         std::move(activity_id)](store::Store& store) -> Result<ActivityReport> {
    auto activity = store.GetActivity(activity_id, false);
    if (!activity) return std::move(activity).error();
    auto orders = store.ReportOrders(activity_id);
    if (!orders) return std::move(orders).error();
    return ActivityReport{std::move(*activity), std::move(*orders)};
  };
  co_return co_await context.OnDb(read);
}

}  // namespace flashsale::service
