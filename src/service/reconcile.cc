#include "service/reconcile.h"

#include <spdlog/spdlog.h>

#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <set>

#include "base/json_writer.h"
#include "keyspace/inspect.h"
#include "keyspace/service_state.h"
#include "service/admin.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::Result;

namespace {

// How long the first sighting of an activity missing from Redis is remembered.
constexpr std::chrono::milliseconds kMissingMarkTtl{86'400'000};

bool Live(const store::OrderRecord& order) { return order.state != store::OrderState::kCancelled; }

std::vector<keyspace::RestoredOrder> LiveOrders(const std::vector<store::OrderRecord>& orders) {
  std::vector<keyspace::RestoredOrder> live;
  for (const auto& order : orders) {
    if (!Live(order)) continue;
    live.push_back({order.order_id, order.user_id, order.quantity, order.created_ms, order.items,
                    order.draw_no});
  }
  return live;
}

// Applies the record's live orders that Redis does not hold to a loaded activity
// (activity_reapply_orders.lua); units Redis resold meanwhile close the activity, in Redis (the
// script) and in the record, and their orders are flagged for compensation in the record.
asio::awaitable<base::Status> Reapply(ServiceContext& context, const store::ActivityRecord& record,
                                      const std::vector<store::OrderRecord>& orders,
                                      ReconcileReport& report) {
  keyspace::ActivityInspector inspector(context.runner(), context.settings().key_namespace);
  const std::vector<keyspace::RestoredOrder> live = LiveOrders(orders);
  auto applied = co_await inspector.ReapplyOrders(record.activity.id, live);
  if (!applied.ok()) co_return std::move(applied).error();
  report.reapplied_orders += applied->applied;
  report.reapplied_units += applied->units;
  if (applied->applied > 0) {
    spdlog::warn(
        "reconcile '{}': {} orders ({} units) of the record were missing from Redis; "
        "applied again",
        record.activity.id, applied->applied, applied->units);
    report.notes.push_back(fmt::format(
        "{} live orders ({} units) of the record were missing from Redis (it lost writes); "
        "applied again",
        applied->applied, applied->units));
  }
  if (applied->short_units == 0) co_return base::Status();
  report.oversold_units += applied->short_units;
  report.flagged_orders += static_cast<int64_t>(applied->short_orders.size());
  spdlog::error(
      "reconcile '{}': {} units were sold again before the repair (oversold); the activity is "
      "closed and {} orders are flagged for compensation",
      record.activity.id, applied->short_units, applied->short_orders.size());
  report.notes.push_back(fmt::format(
      "{} units were sold again before the repair: oversold; the activity is closed and {} "
      "orders are flagged for compensation in the record",
      applied->short_units, applied->short_orders.size()));
  const std::string id = record.activity.id;
  const auto close = [id, now = context.clock().NowMs()](store::Store& store) {
    store::ActivityUpdate update;
    update.open = false;
    return store.UpdateActivity(id, update, now);
  };
  auto closed = co_await context.OnDb(close);
  if (!closed.ok()) co_return std::move(closed).error();
  const auto flag = [ids = applied->short_orders, now = context.clock().NowMs()](
                        store::Store& store) { return store.FlagCompensation(ids, now); };
  auto flagged = co_await context.OnDb(flag);
  if (!flagged.ok()) co_return std::move(flagged).error();
  co_await Announce(context);
  co_return base::Status();
}

// Rebuilds an activity Redis does not have: loaded closed with the record's whole stock, then
// the record's live orders applied (each once: units, buyers' counts, lotteries' draw counts from
// draw_no, records and counters in the same script), then opened as the record says. Every step
// is atomic and a rerun converges: a crash between them leaves the activity closed, loaded, and
// its missing marker set; the next run finds the marker, applies what is missing and opens it
// (unless units were oversold: `oversold`, from an earlier run, or now).
asio::awaitable<base::Status> Rebuild(ServiceContext& context, const store::ActivityRecord& record,
                                      const std::vector<store::OrderRecord>& orders,
                                      ReconcileReport& report, int64_t oversold = 0) {
  core::Activity closed = record.activity;
  closed.open = false;
  auto loaded = co_await context.activity_scripts().AsyncSetup(
      closed, keyspace::SetupMode::kLoadIfMissing, asio::use_awaitable);
  if (!loaded.ok()) co_return std::move(loaded).error();
  auto applied = co_await Reapply(context, record, orders, report);
  if (!applied.ok()) co_return applied;
  if (report.oversold_units == 0 && oversold == 0) {
    auto opened = co_await context.activity_scripts().AsyncSetup(
        record.activity, keyspace::SetupMode::kDefinitionOnly, asio::use_awaitable);
    if (!opened.ok()) co_return std::move(opened).error();
  }
  report.rebuilt = true;
  spdlog::warn("reconcile '{}': rebuilt from the record ({} live orders applied)",
               record.activity.id, report.reapplied_orders);
  report.notes.push_back(fmt::format(
      "rebuilt from the record: {} live orders applied; intents that were in the lost stream and "
      "never reached the record cannot be recovered",
      report.reapplied_orders));
  co_await Announce(context);
  co_return base::Status();
}

// What reconciliation reads of the record: the definition (items too: a rebuild needs them) and
// every order.
struct RecordView {
  store::ActivityRecord record;
  std::vector<store::OrderRecord> orders;
};

// 1. The record, and its terms of the invariant: the initial stock and the live units.
asio::awaitable<Result<RecordView>> ReadRecord(ServiceContext& context, const std::string& id,
                                               ReconcileReport& report) {
  const auto read_record = [id](store::Store& store) { return store.GetActivity(id, true); };
  const auto read_orders = [id](store::Store& store) { return store.OrdersOfActivity(id); };
  auto record = co_await context.OnDb(read_record);
  if (!record.ok()) co_return std::move(record).error();
  auto orders = co_await context.OnDb(read_orders);
  if (!orders.ok()) co_return std::move(orders).error();
  for (const auto& order : *orders) {
    if (Live(order)) report.db_live += order.quantity;
  }
  report.initial = record->total_units;
  co_return RecordView{std::move(*record), std::move(*orders)};
}

// 2b. An activity Redis does not have: rebuilt from the record when repairs are allowed and it
// has been missing for the grace period (at once after a Redis event). False when the report is
// final as it is (not rebuilt).
asio::awaitable<Result<bool>> RebuildIfMissing(ServiceContext& context, const RecordView& view,
                                               bool repair, bool after_event,
                                               ReconcileReport& report) {
  report.drift = report.initial - report.db_live;
  if (!repair) {
    report.notes.push_back("not in Redis: the sale is stopped until it is rebuilt (repair)");
    co_return false;
  }
  // Missing since when (by the first run that saw it, on any instance)?
  const std::string& id = view.record.activity.id;
  keyspace::ServiceState kept(context.redis(), context.settings().key_namespace);
  auto since = co_await kept.MarkMissing(id, context.clock().NowMs(), kMissingMarkTtl);
  if (!since.ok()) co_return std::move(since).error();
  const int64_t waited = context.clock().NowMs() - *since;
  if (!after_event && waited < context.settings().rebuild_grace.count()) {
    report.notes.push_back(fmt::format(
        "not in Redis for {} ms: the sale is stopped; rebuilt once {} ms have passed (consumers "
        "holding intents of the lost stream drop them meanwhile)",
        waited, context.settings().rebuild_grace.count()));
    co_return false;
  }
  auto rebuilt = co_await Rebuild(context, view.record, view.orders, report);
  if (!rebuilt.ok()) co_return std::move(rebuilt).error();
  // Best effort: the mark expires by itself.
  (void)co_await kept.ClearMissing(id);
  co_return true;
}

// 2c. A rebuild that stopped after loading the activity (closed) left its missing mark: it is
// finished now, or the sale would stay closed for good (opened unless units were oversold,
// `oversold` from Redis). True when it was finished here.
asio::awaitable<Result<bool>> FinishStoppedRebuild(ServiceContext& context, const RecordView& view,
                                                   int64_t oversold, ReconcileReport& report) {
  const std::string& id = view.record.activity.id;
  keyspace::ServiceState kept(context.redis(), context.settings().key_namespace);
  auto unfinished = co_await kept.IsMarkedMissing(id);
  if (!unfinished.ok()) co_return std::move(unfinished).error();
  if (!*unfinished) co_return false;
  auto rebuilt = co_await Rebuild(context, view.record, view.orders, report, oversold);
  if (!rebuilt.ok()) co_return std::move(rebuilt).error();
  (void)co_await kept.ClearMissing(id);  // best effort: the mark expires by itself
  co_return true;
}

// 3b. Live orders of the record that Redis does not hold (it lost writes it had acknowledged):
// applied again. True when there were some (Redis's counters and records are then stale).
asio::awaitable<Result<bool>> ReapplyMissing(ServiceContext& context, const RecordView& view,
                                             const std::vector<keyspace::OrderRecordEntry>& records,
                                             ReconcileReport& report) {
  std::set<std::string> in_redis;
  for (const auto& entry : records) in_redis.insert(entry.order.order_id);
  std::vector<store::OrderRecord> missing;
  for (const auto& order : view.orders) {
    if (Live(order) && !in_redis.contains(order.order_id)) missing.push_back(order);
  }
  if (missing.empty()) co_return false;
  auto applied = co_await Reapply(context, view.record, missing, report);
  if (!applied.ok()) co_return applied.error();
  co_return true;
}

// Whether an order id is in the record now (read again: it may have been persisted since the
// record was read).
asio::awaitable<Result<bool>> InRecordNow(ServiceContext& context, const std::string& order_id) {
  const auto read_order = [order_id](store::Store& store) { return store.GetOrder(order_id); };
  auto persisted = co_await context.OnDb(read_order);
  if (persisted.ok()) co_return true;
  if (persisted.error().code != ErrorCode::kNotFound) co_return std::move(persisted).error();
  co_return false;
}

// 3c. After a Redis event: replies that said "reserved" which still show in Redis (idempotency
// records, stream entries), whose order is neither in Redis's records nor in the record:
// acknowledged, lost.
asio::awaitable<base::Status> CountAcknowledgedLost(
    ServiceContext& context, keyspace::ActivityInspector& inspector, const RecordView& view,
    const std::vector<keyspace::OrderRecordEntry>& records, ReconcileReport& report) {
  const std::string& id = view.record.activity.id;
  std::set<std::string> known_ids;
  for (const auto& entry : records) known_ids.insert(entry.order.order_id);
  for (const auto& order : view.orders) known_ids.insert(order.order_id);
  auto told = co_await inspector.IdempotentOrderIds(id);
  if (!told.ok()) co_return std::move(told).error();
  auto streamed = co_await inspector.OrderIdsInStreams(id);
  if (!streamed.ok()) co_return std::move(streamed).error();
  std::set<std::string> candidates(told->begin(), told->end());
  candidates.insert(streamed->begin(), streamed->end());
  for (const auto& order_id : candidates) {
    if (known_ids.contains(order_id)) continue;
    auto persisted = co_await InRecordNow(context, order_id);
    if (!persisted.ok()) co_return std::move(persisted).error();
    if (!*persisted) ++report.acknowledged_lost;
  }
  if (report.acknowledged_lost > 0) {
    report.notes.push_back(fmt::format(
        "{} orders a buyer was told about exist neither in Redis nor in the record (lost with "
        "the writes Redis lost)",
        report.acknowledged_lost));
  }
  report.notes.push_back(
      "orders acknowledged after the last write this Redis kept, whose intent never reached "
      "the record, leave no trace to count (the 'wait' and 'fsync' durability modes prevent "
      "them)");
  co_return base::Status();
}

// 4. Repairs: units of orders the record cancelled returned; intents lost on the way to the
// record appended again (unless on their way, or persisted since the record was read).
asio::awaitable<base::Status> Repair(ServiceContext& context,
                                     keyspace::ActivityInspector& inspector, const RecordView& view,
                                     const Accounting& accounting, ReconcileReport& report) {
  const std::string& id = view.record.activity.id;
  for (const auto* entry : accounting.to_release) {
    auto released = co_await context.activity_scripts().AsyncRelease(id, entry->order.order_id,
                                                                     asio::use_awaitable);
    if (released.ok() && released->outcome == keyspace::ReleaseOutcome::kReleased) {
      report.returned += released->quantity;
    }
  }
  if (accounting.lost_candidates.empty()) co_return base::Status();
  auto streamed = co_await inspector.OrderIdsInStreams(id);
  if (!streamed.ok()) co_return std::move(streamed).error();
  for (const auto* entry : accounting.lost_candidates) {
    const std::string& order_id = entry->order.order_id;
    if (streamed->contains(order_id)) continue;  // on its way
    auto persisted = co_await InRecordNow(context, order_id);
    if (!persisted.ok()) co_return std::move(persisted).error();
    if (*persisted) continue;
    if (view.record.activity.is_lottery()) {
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
  co_return base::Status();
}

}  // namespace

std::string ReconcileReport::Json() const {
  base::JsonWriter w;
  w.BeginObject().Key("activity_id").String(activity_id).Key("loaded").Bool(loaded);
  w.Key("initial").Int(initial).Key("remaining").Int(remaining).Key("not_in_db").Int(not_in_db);
  w.Key("db_live").Int(db_live).Key("cancelled_not_returned").Int(cancelled_not_returned);
  w.Key("drift").Int(drift).Key("returned").Int(returned).Key("reappended").Int(reappended);
  w.Key("rebuilt").Bool(rebuilt).Key("reapplied_orders").Int(reapplied_orders);
  w.Key("reapplied_units").Int(reapplied_units).Key("oversold_units").Int(oversold_units);
  w.Key("flagged_orders").Int(flagged_orders).Key("acknowledged_lost").Int(acknowledged_lost);
  w.Key("notes").Strings(notes).EndObject();
  return std::move(w).Take();
}

Accounting Account(const keyspace::ActivityStatus& status,
                   const std::vector<keyspace::OrderRecordEntry>& records,
                   const std::vector<store::OrderRecord>& orders, ReconcileReport& report) {
  std::map<std::string_view, const store::OrderRecord*> in_db;
  for (const auto& order : orders) in_db[order.order_id] = &order;
  Accounting accounting;
  report.remaining = status.remaining;
  int64_t reserved_in_db = 0;
  int64_t released_but_live = 0;
  for (const auto& entry : records) {
    auto found = in_db.find(entry.order.order_id);
    if (entry.state == 'R') {
      if (found == in_db.end()) {
        accounting.lost_candidates.push_back(&entry);
        continue;
      }
      reserved_in_db += entry.order.quantity;
      if (!Live(*found->second)) {
        report.cancelled_not_returned += entry.order.quantity;
        accounting.to_release.push_back(&entry);
      }
    } else if ((entry.state == 'X' || entry.state == 'F') && found != in_db.end() &&
               Live(*found->second)) {
      ++released_but_live;
    }
  }
  report.not_in_db = (status.reserved - status.released) - reserved_in_db;
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
  return accounting;
}

asio::awaitable<Result<ReconcileReport>> Reconcile(ServiceContext& context,
                                                   const store::ActivityRecord& known, bool repair,
                                                   bool after_event) {
  const std::string id = known.activity.id;
  ReconcileReport report;
  report.activity_id = id;
  auto view = co_await ReadRecord(context, id, report);
  if (!view.ok()) co_return std::move(view).error();

  // 2. Redis's counters, in one atomic read.
  auto status = co_await context.activity_scripts().AsyncStatus(id, asio::use_awaitable);
  if (!status.ok()) co_return std::move(status).error();
  report.loaded = status->found;
  if (!status->found) {
    auto rebuilt = co_await RebuildIfMissing(context, *view, repair, after_event, report);
    if (!rebuilt.ok()) co_return std::move(rebuilt).error();
    if (!*rebuilt) co_return report;
    status = co_await context.activity_scripts().AsyncStatus(id, asio::use_awaitable);
    if (!status.ok()) co_return std::move(status).error();
  } else if (repair) {
    auto finished = co_await FinishStoppedRebuild(context, *view, status->oversold, report);
    if (!finished.ok()) co_return std::move(finished).error();
    if (*finished) {
      status = co_await context.activity_scripts().AsyncStatus(id, asio::use_awaitable);
      if (!status.ok()) co_return std::move(status).error();
    }
  }

  // 3. Redis's order records: which the record has (and in which state).
  keyspace::ActivityInspector inspector(context.runner(), context.settings().key_namespace);
  auto records = co_await inspector.Orders(id);
  if (!records.ok()) co_return std::move(records).error();
  if (repair && !report.rebuilt) {
    auto reapplied = co_await ReapplyMissing(context, *view, *records, report);
    if (!reapplied.ok()) co_return std::move(reapplied).error();
    if (*reapplied) {
      status = co_await context.activity_scripts().AsyncStatus(id, asio::use_awaitable);
      if (!status.ok()) co_return std::move(status).error();
      records = co_await inspector.Orders(id);
      if (!records.ok()) co_return std::move(records).error();
    }
  }
  if (after_event) {
    auto counted = co_await CountAcknowledgedLost(context, inspector, *view, *records, report);
    if (!counted.ok()) co_return std::move(counted).error();
  }
  const Accounting accounting = Account(*status, *records, view->orders, report);
  if (!repair) co_return report;
  auto repaired = co_await Repair(context, inspector, *view, accounting, report);
  if (!repaired.ok()) co_return std::move(repaired).error();
  co_return report;
}

}  // namespace flashsale::service
