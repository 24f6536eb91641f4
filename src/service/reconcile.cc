#include "service/reconcile.h"

#include <spdlog/spdlog.h>

#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <map>
#include <set>

#include "base/json_writer.h"
#include "redis/inspect.h"
#include "service/admin.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

bool Live(const store::OrderRecord& order) { return order.state != store::OrderState::kCancelled; }

// The activity as it must be set up again after Redis lost it: the record's definition with the
// stock the record says is left.
core::SeckillActivity WhatIsLeft(const store::ActivityRecord& record,
                                 const std::vector<store::OrderRecord>& orders, int64_t db_live) {
  core::SeckillActivity left = record.activity;
  if (left.is_lottery()) {
    std::map<std::string, int64_t> won;
    for (const auto& order : orders) {
      if (Live(order) && !order.items.empty()) won[order.items[0]] += order.quantity;
    }
    for (auto& prize : left.lottery->prizes)
      prize.stock = std::max<int64_t>(0, prize.stock - won[prize.id]);
    left.stock = left.lottery->TotalStock();
  } else if (left.kind == core::StockKind::kItemised) {
    std::set<std::string> taken;
    for (const auto& order : orders) {
      if (Live(order)) taken.insert(order.items.begin(), order.items.end());
    }
    std::erase_if(left.items, [&](const std::string& item) { return taken.contains(item); });
  } else {
    left.stock = std::max<int64_t>(0, record.total_units - db_live);
  }
  return left;
}

// Rebuilds an activity Redis does not have: live orders first, then the definition and stock.
asio::awaitable<base::Status> Rebuild(ServiceContext& context, const store::ActivityRecord& record,
                                      const std::vector<store::OrderRecord>& orders,
                                      int64_t db_live, ReconcileReport& report) {
  redis::ActivityInspector inspector(context.runner(), context.settings().key_namespace);
  std::vector<redis::RestoredOrder> live;
  for (const auto& order : orders) {
    if (!Live(order)) continue;
    live.push_back({order.order_id, order.user_id, order.quantity, order.created_ms, order.items});
  }
  auto restored = co_await inspector.RestoreOrders(record.activity.id, live);
  if (!restored.ok()) co_return std::move(restored).error();
  const core::SeckillActivity left = WhatIsLeft(record, orders, db_live);
  auto setup = co_await context.seckill().AsyncSetup(left, redis::SetupMode::kLoadIfMissing,
                                                     asio::use_awaitable);
  if (!setup.ok()) co_return std::move(setup).error();
  // The restored orders count as reserved, so Redis's own counters add up again.
  const redis::SeckillKeys keys(context.settings().key_namespace, record.activity.id);
  const redis::IntArg units(db_live);
  const redis::Command reserved({"HINCRBY", keys.meta(), "reserved", units});
  const redis::Command total({"HINCRBY", keys.meta(), "total", units});
  auto counted = co_await context.redis().AsyncSend(reserved, asio::use_awaitable);
  auto totalled = co_await context.redis().AsyncSend(total, asio::use_awaitable);
  if (!counted.ok()) co_return std::move(counted).error();
  if (!totalled.ok()) co_return std::move(totalled).error();
  report.rebuilt = true;
  spdlog::warn("reconcile '{}': rebuilt from the record ({} live orders, {} units left)",
               record.activity.id, *restored, left.InitialUnits());
  report.notes.push_back(fmt::format(
      "rebuilt from the record: {} live orders restored, {} units left; intents that were in "
      "the lost stream and never reached the record cannot be recovered",
      *restored, left.InitialUnits()));
  co_await Announce(context);
  co_return base::Status();
}

}  // namespace

std::string ReconcileReport::Json() const {
  base::JsonWriter w;
  w.BeginObject().Key("activity_id").String(activity_id).Key("loaded").Bool(loaded);
  w.Key("initial").Int(initial).Key("remaining").Int(remaining).Key("not_in_db").Int(not_in_db);
  w.Key("db_live").Int(db_live).Key("cancelled_not_returned").Int(cancelled_not_returned);
  w.Key("drift").Int(drift).Key("returned").Int(returned).Key("reappended").Int(reappended);
  w.Key("rebuilt").Bool(rebuilt).Key("notes").Strings(notes).EndObject();
  return std::move(w).Take();
}

asio::awaitable<Result<ReconcileReport>> Reconcile(ServiceContext& context,
                                                   const store::ActivityRecord& known,
                                                   bool repair) {
  const std::string id = known.activity.id;
  ReconcileReport report;
  report.activity_id = id;

  // 1. The record: the definition (items too: a rebuild needs them) and every order.
  const auto read_record = [id](store::Store& store) { return store.GetActivity(id, true); };
  const auto read_orders = [id](store::Store& store) { return store.OrdersOfActivity(id); };
  auto record = co_await context.OnDb(read_record);
  if (!record.ok()) co_return std::move(record).error();
  auto orders = co_await context.OnDb(read_orders);
  if (!orders.ok()) co_return std::move(orders).error();
  std::map<std::string, const store::OrderRecord*> in_db;
  for (const auto& order : *orders) {
    in_db[order.order_id] = &order;
    if (Live(order)) report.db_live += order.quantity;
  }
  report.initial = record->total_units;

  // 2. Redis's counters, in one atomic read.
  auto status = co_await context.seckill().AsyncStatus(id, asio::use_awaitable);
  if (!status.ok()) co_return std::move(status).error();
  report.loaded = status->found;
  if (!status->found) {
    report.drift = report.initial - report.db_live;
    if (!repair) {
      report.notes.push_back("not in Redis: the sale is stopped until it is rebuilt (repair)");
      co_return report;
    }
    // Missing since when (by the first run that saw it, on any instance)?
    const redis::SeckillKeys keys(context.settings().key_namespace, id);
    const std::string missing_key = keys.meta() + ":missing_since";
    const std::string now_text = std::to_string(context.clock().NowMs());
    const redis::Command mark({"SET", missing_key, now_text, "NX", "GET", "PX", "86400000"});
    auto marked = co_await context.redis().AsyncSend(mark, asio::use_awaitable);
    if (!marked.ok()) co_return std::move(marked).error();
    int64_t since = context.clock().NowMs();
    if (marked->is_string()) {
      const std::string_view text = marked->str();
      std::from_chars(text.data(), text.data() + text.size(), since);
    }
    const int64_t waited = context.clock().NowMs() - since;
    if (waited < context.settings().rebuild_grace.count()) {
      report.notes.push_back(fmt::format(
          "not in Redis for {} ms: the sale is stopped; rebuilt once {} ms have passed (consumers "
          "holding intents of the lost stream drop them meanwhile)",
          waited, context.settings().rebuild_grace.count()));
      co_return report;
    }
    auto rebuilt = co_await Rebuild(context, *record, *orders, report.db_live, report);
    if (!rebuilt.ok()) co_return std::move(rebuilt).error();
    const redis::Command unmark({"DEL", missing_key});
    co_await context.redis().AsyncSend(unmark, asio::use_awaitable);
    status = co_await context.seckill().AsyncStatus(id, asio::use_awaitable);
    if (!status.ok()) co_return std::move(status).error();
  }
  report.remaining = status->remaining;

  // 3. Redis's order records: which the record has (and in which state).
  redis::ActivityInspector inspector(context.runner(), context.settings().key_namespace);
  auto records = co_await inspector.Orders(id);
  if (!records.ok()) co_return std::move(records).error();
  int64_t reserved_in_db = 0;
  std::vector<const redis::OrderRecordEntry*> to_release;
  std::vector<const redis::OrderRecordEntry*> lost_candidates;
  int64_t released_but_live = 0;
  for (const auto& entry : *records) {
    auto found = in_db.find(entry.order.order_id);
    if (entry.state == 'R') {
      if (found == in_db.end()) {
        lost_candidates.push_back(&entry);
        continue;
      }
      reserved_in_db += entry.order.quantity;
      if (!Live(*found->second)) {
        report.cancelled_not_returned += entry.order.quantity;
        to_release.push_back(&entry);
      }
    } else if (entry.state == 'X' && found != in_db.end() && Live(*found->second)) {
      ++released_but_live;
    }
  }
  report.not_in_db = (status->reserved - status->released) - reserved_in_db;
  report.drift = report.initial - (report.remaining + report.not_in_db + report.db_live +
                                   report.cancelled_not_returned);
  if (released_but_live > 0) {
    report.notes.push_back(fmt::format(
        "{} orders are released in Redis but live in the record (their units may be sold twice): "
        "cancel them in the record or put their units back by hand",
        released_but_live));
  }
  if (report.drift != 0) {
    report.notes.push_back(fmt::format(
        "drift {}: {} units unaccounted for; not repaired (stock is never added or removed to "
        "hide a difference)",
        report.drift, report.drift > 0 ? "fewer" : "more"));
  }
  if (!repair) co_return report;

  // 4. Repairs.
  for (const auto* entry : to_release) {
    auto released =
        co_await context.seckill().AsyncRelease(id, entry->order.order_id, asio::use_awaitable);
    if (released.ok() && released->outcome == redis::ReleaseOutcome::kReleased) {
      report.returned += released->quantity;
    }
  }
  if (!lost_candidates.empty()) {
    auto streamed = co_await inspector.OrderIdsInStreams(id);
    if (!streamed.ok()) co_return std::move(streamed).error();
    for (const auto* entry : lost_candidates) {
      const std::string& order_id = entry->order.order_id;
      if (streamed->contains(order_id)) continue;  // on its way
      // Persisted (and trimmed) since the record was read?
      const auto read_order = [order_id](store::Store& store) { return store.GetOrder(order_id); };
      auto persisted = co_await context.OnDb(read_order);
      if (persisted.ok()) continue;
      if (persisted.error().code != ErrorCode::kNotFound) co_return std::move(persisted).error();
      if (record->activity.is_lottery()) {
        report.notes.push_back(fmt::format(
            "win {} of {} is in neither the stream nor the record; a win's draw number is not in "
            "its Redis record, so it is not appended again",
            order_id, entry->user_id));
        continue;
      }
      auto appended = co_await inspector.Reappend(id, order_id);
      if (!appended.ok()) co_return std::move(appended).error();
      if (*appended) ++report.reappended;
    }
  }
  co_return report;
}

}  // namespace flashsale::service
