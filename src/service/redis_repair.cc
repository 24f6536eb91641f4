#include "service/redis_repair.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/strings.h"
#include "redis/inspect.h"
#include "redis/lock.h"
#include "redis/service_state.h"
#include "service/admin.h"
#include "service/jobs.h"
#include "service/lease_keeper.h"
#include "service/reconcile.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::Result;

namespace {

// The repair's lease, kept alive by a LeaseKeeper while it runs: a repair cut short (its process
// or its Redis gone) holds up the next one for at most this long.
constexpr std::chrono::milliseconds kRepairLease{30'000};
constexpr std::chrono::milliseconds kRepairExtendEvery{10'000};
constexpr std::string_view kRepairJob = "repair";  // its lock: the job lock of "repair"

RepairSummary FromMarker(const redis::RepairMarker& marker) {
  RepairSummary summary;
  summary.activities = marker.activities;
  summary.orders_applied = marker.orders_applied;
  summary.units_applied = marker.units_applied;
  summary.rebuilt = marker.rebuilt;
  summary.oversold_units = marker.oversold_units;
  summary.flagged_orders = marker.flagged_orders;
  summary.acknowledged_lost = marker.acknowledged_lost;
  summary.epoch = marker.epoch;
  return summary;
}

redis::RepairMarker ToMarker(std::string_view run_id, const RepairSummary& summary,
                             int64_t now_ms) {
  return {.run_id = std::string(run_id),
          .epoch = summary.epoch,
          .activities = summary.activities,
          .orders_applied = summary.orders_applied,
          .units_applied = summary.units_applied,
          .rebuilt = summary.rebuilt,
          .oversold_units = summary.oversold_units,
          .flagged_orders = summary.flagged_orders,
          .acknowledged_lost = summary.acknowledged_lost,
          .repaired_ms = now_ms};
}

void Add(RepairSummary& summary, const ReconcileReport& report) {
  summary.activities.push_back(report.activity_id);
  summary.orders_applied += report.reapplied_orders;
  summary.units_applied += report.reapplied_units;
  summary.rebuilt += report.rebuilt ? 1 : 0;
  summary.oversold_units += report.oversold_units;
  summary.flagged_orders += report.flagged_orders;
  summary.acknowledged_lost += report.acknowledged_lost;
}

// Whether every run_id of `run_ids` has a marker of the record's current fence; the summary of
// the last one read. A marker under an older epoch than the fence means another server was
// repaired since (the endpoint, or this node, went back to this one): it is repaired again, so
// that batches carry the current epoch.
struct Marked {
  bool all = false;
  int64_t fence = 0;
  RepairSummary summary;
};

asio::awaitable<Result<Marked>> ReadMarkers(ServiceContext& context, redis::ServiceState& state,
                                            const std::vector<std::string>& run_ids) {
  const auto read_fence = [](store::Store& store) { return store.ReadFence(); };
  auto fence = co_await context.OnDb(read_fence);
  if (!fence.ok()) co_return std::move(fence).error();
  Marked marked{.all = true, .fence = *fence, .summary = {}};
  for (const std::string& run_id : run_ids) {
    auto marker = co_await state.ReadRepairMarker(run_id);
    if (!marker.ok()) co_return std::move(marker).error();
    if (!marker->has_value() || (*marker)->epoch != *fence) {
      marked.all = false;
      break;
    }
    marked.summary = FromMarker(**marker);
  }
  co_return marked;
}

// The repair itself: the record's fence advanced, then every activity of the record reconciled
// with repairs after the event, each report kept.
asio::awaitable<Result<RepairSummary>> RepairAll(ServiceContext& context,
                                                 redis::ServiceState& state,
                                                 std::string_view servers,
                                                 const LeaseKeeper& keeper) {
  const auto advance = [](store::Store& store) { return store.AdvanceFence(); };
  auto epoch = co_await context.OnDb(advance);
  if (!epoch.ok()) co_return std::move(epoch).error();
  const auto list = [](store::Store& store) { return store.ListActivities(); };
  auto activities = co_await context.OnDb(list);
  if (!activities.ok()) co_return std::move(activities).error();
  RepairSummary summary;
  summary.epoch = *epoch;
  for (const auto& record : *activities) {
    if (keeper.lost()) {
      co_return base::MakeError(base::ErrorCode::kUnavailable,
                                "redis {}: the repair lost its lock and stopped", servers);
    }
    auto report = co_await Reconcile(context, record, /*repair=*/true, /*after_event=*/true);
    if (!report.ok()) {
      spdlog::warn("redis {}: repair of '{}' failed: {}", servers, record.activity.id,
                   report.error().message);
      co_return std::move(report).error();
    }
    Add(summary, *report);
    // Best effort, as for the job's runs: the summary goes into the marker.
    (void)co_await state.KeepReconcileReport(record.activity.id, report->Json());
  }
  co_return summary;
}

// The servers the markers are written for: every server this process uses, repaired or not
// before, and the pending ones. The repair reconciled every activity on all of them under this
// epoch, so an instance that meets them later is confirmed, not made to repair again. Each marker
// is keyed by its run_id: one written into a server that restarted again meanwhile names a run_id
// that is gone and frees nothing (the new server is another event).
std::vector<std::string> Covered(const RedisWatch& watch, const std::vector<std::string>& pending) {
  std::vector<std::string> covered = watch.Seen();
  for (const std::string& run_id : pending) {
    if (std::find(covered.begin(), covered.end(), run_id) == covered.end()) {
      covered.push_back(run_id);
    }
  }
  return covered;
}

struct Repaired {
  RepairSummary summary;
  bool here = false;  // repaired by this call (else: found done by another instance)
};

// Under the repair lock: done by another instance between our first look and the lock (markers
// of the current epoch), or repaired here and the markers written.
asio::awaitable<Result<Repaired>> RepairOnce(ServiceContext& context, redis::ServiceState& state,
                                             const RedisWatch& watch,
                                             const std::vector<std::string>& pending,
                                             const LeaseKeeper& keeper) {
  auto marked = co_await ReadMarkers(context, state, pending);
  if (!marked.ok()) co_return std::move(marked).error();
  if (marked->all) co_return Repaired{std::move(marked->summary), false};
  const std::string servers = base::JoinWords(pending);
  spdlog::warn("redis {}: lost-write repair starts", servers);
  auto summary = co_await RepairAll(context, state, servers, keeper);
  if (!summary.ok()) co_return std::move(summary).error();
  const int64_t now_ms = context.clock().NowMs();
  for (const std::string& run_id : Covered(watch, pending)) {
    auto written = co_await state.WriteRepairMarker(ToMarker(run_id, *summary, now_ms));
    if (!written.ok()) co_return std::move(written).error();
  }
  co_return Repaired{std::move(*summary), true};
}

}  // namespace

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
  // The servers this process met and has not confirmed (one on a single server; on a cluster,
  // one per node that restarted or took over slots).
  const std::vector<std::string> pending = watch.Pending();
  if (pending.empty()) co_return !watch.frozen();
  redis::ServiceState state(context.redis(), context.settings().key_namespace);
  auto marked = co_await ReadMarkers(context, state, pending);
  if (!marked.ok()) co_return std::move(marked).error();
  if (marked->all) {
    watch.Confirm(pending, marked->fence, marked->summary);
    co_await CountAcknowledgedLost(context, watch);
    co_return !watch.frozen();
  }
  if (!may_repair) co_return false;

  auto lock = std::make_shared<redis::DistributedLock>(
      context.runner(), state.keys().JobLock(kRepairJob), state.keys().JobFence(kRepairJob));
  auto taken = co_await lock->TryAcquire(context.random(), kRepairLease);
  if (!taken.ok()) co_return std::move(taken).error();
  if (!taken->has_value()) co_return false;  // another instance repairs; its markers free us
  auto keeper = LeaseKeeper::Start(co_await asio::this_coro::executor, lock, **taken, kRepairLease,
                                   kRepairExtendEvery);
  const LeaseKeeper::Guard keeping(keeper);
  auto repaired = co_await RepairOnce(context, state, watch, pending, *keeper);
  keeper->Stop();
  auto released = co_await lock->Release(**taken);  // when it fails, the lease expires it
  if (!released.ok()) spdlog::warn("lost-write repair's lock: {}", released.error().message);
  if (!repaired.ok()) co_return std::move(repaired).error();
  watch.Confirm(pending, repaired->summary.epoch, repaired->summary);
  co_await CountAcknowledgedLost(context, watch);
  if (repaired->here) co_await Announce(context);
  co_return !watch.frozen();
}

}  // namespace flashsale::service
