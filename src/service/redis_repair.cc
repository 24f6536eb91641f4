#include "service/redis_repair.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <map>
#include <set>
#include <vector>

#include "base/strings.h"
#include "redis/inspect.h"
#include "redis/lock.h"
#include "redis/scripts.h"
#include "service/admin.h"
#include "service/jobs.h"
#include "service/reconcile.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr std::chrono::milliseconds kRepairLease{300'000};

int64_t ToInt(std::string_view text) {
  int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// The marker's fields, empty when there is none.
asio::awaitable<Result<std::map<std::string, std::string>>> ReadMarker(ServiceContext& context,
                                                                       const std::string& key) {
  const redis::Command read({"HGETALL", key});
  auto reply = co_await redis::Await(context.redis(), read);
  if (!reply.ok()) co_return std::move(reply).error();
  std::map<std::string, std::string> fields;
  for (size_t i = 0; i + 1 < reply->size(); i += 2) {
    fields[std::string((*reply)[i].str())] = std::string((*reply)[i + 1].str());
  }
  co_return fields;
}

RepairSummary FromMarker(const std::map<std::string, std::string>& fields) {
  RepairSummary summary;
  const auto get = [&](const char* name) {
    auto it = fields.find(name);
    return it == fields.end() ? std::string() : it->second;
  };
  summary.activities = base::SplitWords(get("activities"));
  summary.orders_applied = ToInt(get("orders_applied"));
  summary.units_applied = ToInt(get("units_applied"));
  summary.rebuilt = ToInt(get("rebuilt"));
  summary.oversold_units = ToInt(get("oversold_units"));
  summary.flagged_orders = ToInt(get("flagged_orders"));
  summary.acknowledged_lost = ToInt(get("acknowledged_lost"));
  summary.epoch = ToInt(get("epoch"));
  return summary;
}

// Whether every run_id of `run_ids` has a marker of the record's current fence; the summary of
// the last one read.
struct Marked {
  bool all = false;
  int64_t fence = 0;
  RepairSummary summary;
};

asio::awaitable<Result<Marked>> ReadMarkers(ServiceContext& context,
                                            const std::vector<std::string>& run_ids) {
  const auto read_fence = [](store::Store& store) { return store.ReadFence(); };
  auto fence = co_await context.OnDb(read_fence);
  if (!fence.ok()) co_return std::move(fence).error();
  Marked marked;
  marked.fence = *fence;
  marked.all = true;
  for (const std::string& run_id : run_ids) {
    auto fields =
        co_await ReadMarker(context, RepairMarkerKey(context.settings().key_namespace, run_id));
    if (!fields.ok()) co_return std::move(fields).error();
    // A marker under an older epoch than the record's fence: another server was repaired since
    // (the endpoint, or this node, went back to this one): repaired again, so batches carry the
    // current epoch.
    if (fields->empty() || FromMarker(*fields).epoch != *fence) {
      marked.all = false;
      break;
    }
    marked.summary = FromMarker(*fields);
  }
  co_return marked;
}

}  // namespace

std::string RepairMarkerKey(std::string_view key_namespace, std::string_view run_id) {
  return fmt::format("{}:redis:repaired:{{{}}}", key_namespace, run_id);
}

asio::awaitable<void> CountAcknowledgedLost(ServiceContext& context, RedisWatch& watch) {
  if (!watch.TakeLostCheckDue()) co_return;
  redis::ActivityInspector inspector(context.runner(), context.settings().key_namespace);
  std::vector<std::string> lost;
  for (const auto& [activity_id, order_ids] : watch.AcknowledgedOrders()) {
    auto records = co_await inspector.Orders(activity_id);
    const std::string id = activity_id;
    const auto read = [id](store::Store& store) { return store.OrdersOfActivity(id); };
    auto orders = co_await context.OnDb(read);
    if (!records.ok() || !orders.ok()) {
      spdlog::warn("acknowledged orders of '{}' not checked after the repair: {}", activity_id,
                   !records.ok() ? records.error().message : orders.error().message);
      continue;
    }
    std::set<std::string_view> known;
    for (const auto& entry : *records) known.insert(entry.order.order_id);
    for (const auto& order : *orders) known.insert(order.order_id);
    for (const std::string& order_id : order_ids) {
      if (!known.contains(order_id)) lost.push_back(order_id);
    }
  }
  watch.CountAcknowledgedLost(lost);
}

asio::awaitable<Result<bool>> ResolveRedisEvent(ServiceContext& context, RedisWatch& watch,
                                                bool may_repair) {
  const std::string& ns = context.settings().key_namespace;
  // The servers this process met and has not confirmed (one on a single server; on a cluster,
  // one per node that restarted or took over slots).
  const std::vector<std::string> pending = watch.Pending();
  if (pending.empty()) co_return !watch.frozen();
  auto marked = co_await ReadMarkers(context, pending);
  if (!marked.ok()) co_return std::move(marked).error();
  if (marked->all) {
    watch.Confirm(pending, marked->fence, marked->summary);
    co_await CountAcknowledgedLost(context, watch);
    co_return !watch.frozen();
  }
  if (!may_repair) co_return false;

  redis::DistributedLock lock(context.runner(), fmt::format("{}:jobs:{{repair}}:lock", ns),
                              fmt::format("{}:jobs:{{repair}}:fence", ns));
  auto taken = co_await lock.TryAcquire(context.random(), kRepairLease);
  if (!taken.ok()) co_return std::move(taken).error();
  if (!taken->has_value()) co_return false;  // another instance repairs; its marker frees us
  const redis::Lease lease = **taken;
  const auto finish = [&]() -> asio::awaitable<void> { co_await lock.Release(lease); };

  // Done by another instance between our read and the lock (markers of the current epoch)?
  marked = co_await ReadMarkers(context, pending);
  if (!marked.ok()) {
    co_await finish();
    co_return std::move(marked).error();
  }
  if (marked->all) {
    co_await finish();
    watch.Confirm(pending, marked->fence, marked->summary);
    co_await CountAcknowledgedLost(context, watch);
    co_return !watch.frozen();
  }

  const std::string names_of_pending = base::JoinWords(pending);
  spdlog::warn("redis {}: lost-write repair starts", names_of_pending);
  const auto advance = [](store::Store& store) { return store.AdvanceFence(); };
  auto epoch = co_await context.OnDb(advance);
  if (!epoch.ok()) {
    co_await finish();
    co_return std::move(epoch).error();
  }
  const auto list = [](store::Store& store) { return store.ListActivities(); };
  auto activities = co_await context.OnDb(list);
  if (!activities.ok()) {
    co_await finish();
    co_return std::move(activities).error();
  }
  RepairSummary summary;
  summary.epoch = *epoch;
  for (const auto& record : *activities) {
    auto report = co_await Reconcile(context, record, /*repair=*/true, /*after_event=*/true);
    if (!report.ok()) {
      spdlog::warn("redis {}: repair of '{}' failed: {}", names_of_pending, record.activity.id,
                   report.error().message);
      co_await finish();
      co_return std::move(report).error();
    }
    summary.activities.push_back(record.activity.id);
    summary.orders_applied += report->reapplied_orders;
    summary.units_applied += report->reapplied_units;
    summary.rebuilt += report->rebuilt ? 1 : 0;
    summary.oversold_units += report->oversold_units;
    summary.flagged_orders += report->flagged_orders;
    summary.acknowledged_lost += report->acknowledged_lost;
    const redis::Command keep({"SET", ReconcileReportKey(ns, record.activity.id), report->Json()});
    co_await redis::Await(context.redis(), keep);
  }
  // A marker for every server this process uses, repaired or not before: the repair reconciled
  // every activity on all of them under this epoch, so an instance that meets them later is
  // confirmed, not made to repair again. Each marker is keyed by its run_id: one written into a
  // server that restarted again meanwhile names a run_id that is gone and frees nothing (the new
  // server is another event).
  const redis::IntArg epoch_arg(summary.epoch), applied(summary.orders_applied),
      units(summary.units_applied), rebuilt(summary.rebuilt), oversold(summary.oversold_units),
      flagged(summary.flagged_orders), lost(summary.acknowledged_lost), at(context.clock().NowMs());
  const std::string names = base::JoinWords(summary.activities);
  std::vector<std::string> covered = watch.Seen();
  for (const std::string& run_id : pending) {
    if (std::find(covered.begin(), covered.end(), run_id) == covered.end()) {
      covered.push_back(run_id);
    }
  }
  for (const std::string& run_id : covered) {
    const redis::Command mark({"HSET",
                               RepairMarkerKey(ns, run_id),
                               "run_id",
                               run_id,
                               "epoch",
                               epoch_arg,
                               "activities",
                               names,
                               "orders_applied",
                               applied,
                               "units_applied",
                               units,
                               "rebuilt",
                               rebuilt,
                               "oversold_units",
                               oversold,
                               "flagged_orders",
                               flagged,
                               "acknowledged_lost",
                               lost,
                               "repaired_ms",
                               at});
    auto written = co_await redis::Await(context.redis(), mark);
    if (!written.ok()) {
      co_await finish();
      co_return std::move(written).error();
    }
  }
  co_await finish();
  watch.Confirm(pending, summary.epoch, summary);
  co_await CountAcknowledgedLost(context, watch);
  co_await Announce(context);
  co_return !watch.frozen();
}

}  // namespace flashsale::service
