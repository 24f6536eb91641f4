#include "service/redis_repair.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/strings.h"
#include "keyspace/inspect.h"
#include "keyspace/lock.h"
#include "keyspace/service_state.h"
#include "redis/cluster.h"
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

RepairSummary FromMarker(const keyspace::RepairMarker& marker) {
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

keyspace::RepairMarker ToMarker(std::string_view run_id, const RepairSummary& summary,
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

// Whether every run_id of `run_ids` has a marker under an epoch of at least `min_epoch` (the
// record's fence when the event was first handled: a marker under an older epoch was written
// before the event, for a server that has since changed role or lost writes); the record's fence
// now, and the summary of the last marker read.
struct Marked {
  bool all = false;
  int64_t fence = 0;
  RepairSummary summary;
};

asio::awaitable<Result<Marked>> ReadMarkers(ServiceContext& context, keyspace::ServiceState& state,
                                            const std::vector<std::string>& run_ids,
                                            int64_t min_epoch) {
  const auto read_fence = [](store::Store& store) { return store.ReadFence(); };
  auto fence = co_await context.OnDb(read_fence);
  if (!fence.ok()) co_return std::move(fence).error();
  Marked marked{.all = true, .fence = *fence, .summary = {}};
  for (const std::string& run_id : run_ids) {
    auto marker = co_await state.ReadRepairMarker(run_id);
    if (!marker.ok()) co_return std::move(marker).error();
    if (!marker->has_value() || (*marker)->epoch < std::max<int64_t>(min_epoch, 1)) {
      marked.all = false;
      break;
    }
    marked.summary = FromMarker(**marker);
  }
  co_return marked;
}

// One activity's repair under `epoch` (the fence advanced already): its sequence as Redis holds it
// read first (what the repair is bound to), then reconciled with repairs after an event, then its
// sequence re-based to `epoch`. kUnavailable when Redis fell behind what was read meanwhile (it
// lost writes again): the caller repairs it again.
asio::awaitable<Result<ReconcileReport>> RepairActivity(ServiceContext& context,
                                                        const store::ActivityRecord& record,
                                                        int64_t epoch) {
  const std::string& id = record.activity.id;
  auto before = co_await context.activity_scripts().AsyncStatus(id, asio::use_awaitable);
  if (!before.ok()) co_return std::move(before).error();
  const keyspace::WriteSeq seen = before->found ? before->written : keyspace::WriteSeq{};
  auto report = co_await Reconcile(context, record, /*repair=*/true, /*after_event=*/true);
  if (!report.ok()) co_return report;
  keyspace::ActivityInspector inspector(context.runner(), context.settings().key_namespace);
  auto rebased = co_await inspector.Rebase(id, epoch, seen);
  if (!rebased.ok()) co_return std::move(rebased).error();
  using Outcome = keyspace::RebaseResult::Outcome;
  if (rebased->outcome == Outcome::kBehind) {
    co_return base::MakeError(
        base::ErrorCode::kUnavailable,
        "'{}': Redis fell to write sequence {}.{} while the repair ran (it began at {}.{}): it "
        "lost writes again; repaired again",
        id, rebased->now.epoch, rebased->now.seq, seen.epoch, seen.seq);
  }
  // Not loaded: an activity the record holds that reconciliation did not (re)build (it could
  // not: a note says why); nothing of it is sold, so nothing to re-base.
  (void)co_await keyspace::ServiceState(context.redis(), context.settings().key_namespace)
      .KeepReconcileReport(id, report->Json());  // best effort, as for the job's runs
  co_return report;
}

// The repair of a server's event: the record's fence advanced, then every activity of the record
// on the repaired servers (`on_pending`: all on one server) repaired and re-based, each report
// kept.
asio::awaitable<Result<RepairSummary>> RepairAll(
    ServiceContext& context, std::string_view servers, const LeaseKeeper& keeper,
    const std::function<bool(const std::string&)>& on_pending) {
  const auto advance = [](store::Store& store) { return store.AdvanceFence(); };
  auto epoch = co_await context.OnDb(advance);
  if (!epoch.ok()) co_return std::move(epoch).error();
  if (RedisWatch* watch = context.settings().redis_watch) watch->AdoptEpoch(*epoch);
  const auto list = [](store::Store& store) { return store.ListActivities(); };
  auto activities = co_await context.OnDb(list);
  if (!activities.ok()) co_return std::move(activities).error();
  RepairSummary summary;
  summary.epoch = *epoch;
  for (const auto& listed : *activities) {
    if (!on_pending(listed.activity.id)) continue;
    if (keeper.lost()) {
      co_return base::MakeError(base::ErrorCode::kUnavailable,
                                "redis {}: the repair lost its lock and stopped", servers);
    }
    const std::string id = listed.activity.id;
    const auto read = [id](store::Store& store) { return store.GetActivity(id, true); };
    auto record = co_await context.OnDb(read);
    if (!record.ok()) {
      if (record.error().code == base::ErrorCode::kNotFound) continue;  // deleted meanwhile
      co_return std::move(record).error();
    }
    auto report = co_await RepairActivity(context, *record, *epoch);
    if (!report.ok()) {
      spdlog::warn("redis {}: repair of '{}' failed: {}", servers, id, report.error().message);
      co_return std::move(report).error();
    }
    Add(summary, *report);
  }
  co_return summary;
}

struct Repaired {
  RepairSummary summary;
  bool here = false;  // repaired by this call (else: found done by another instance)
  std::vector<std::string> confirmed;  // the run_ids it covers
};

// Under the repair lock: done by another instance between our first look and the lock (markers
// since the event), or repaired here and the markers written for the servers that did not
// change while it ran.
asio::awaitable<Result<Repaired>> RepairOnce(ServiceContext& context, keyspace::ServiceState& state,
                                             const RedisWatch& watch,
                                             const std::map<std::string, std::string>& pending,
                                             const LeaseKeeper& keeper) {
  std::vector<std::string> run_ids;
  for (const auto& [node, run_id] : pending) run_ids.push_back(run_id);
  auto marked = co_await ReadMarkers(context, state, run_ids, watch.event_fence());
  if (!marked.ok()) co_return std::move(marked).error();
  if (marked->all) co_return Repaired{std::move(marked->summary), false, run_ids};
  const std::string servers = base::JoinWords(run_ids);
  // At startup this is the check every process makes of the Redis it finds (nothing was lost
  // that anyone saw: said at info level); after a restart or failover seen live, a repair.
  const bool startup = watch.startup_open();
  const auto started = std::chrono::steady_clock::now();
  // Which activities: on one server, all of them; on a cluster, those whose slot a pending node
  // serves now (the router's map on this thread; a slot whose node is not known: repaired too).
  const redis::ClusterRouter* router = context.redis().cluster();
  if (router != nullptr) {
    // This thread's map may predate the event (another thread's router reported it): it would
    // leave a promoted node's activities out. Each activity of the record read through it first:
    // a slot that moved is followed (MOVED points it at its node at once), and one still pointed
    // at a node that is gone fails; its map refreshed, the next round repairs.
    const auto list = [](store::Store& store) { return store.ListActivities(); };
    auto listed = co_await context.OnDb(list);
    if (!listed.ok()) co_return std::move(listed).error();
    for (const auto& activity : *listed) {
      const std::string& id = activity.activity.id;
      auto status = co_await context.activity_scripts().AsyncStatus(id, asio::use_awaitable);
      if (!status.ok()) {
        co_return base::MakeError(base::ErrorCode::kUnavailable,
                                  "redis {}: '{}' not read before the repair ({}); repaired once "
                                  "the slot map is current",
                                  servers, id, status.error().message);
      }
    }
  }
  if (startup) {
    spdlog::info("redis {}: start-up check of every activity against the record", servers);
  } else {
    spdlog::warn("redis {}: lost-write repair starts", servers);
  }
  const auto on_pending = [router, &pending](const std::string& activity_id) {
    if (router == nullptr) return true;
    const std::string node = router->NodeOfSlot(redis::KeySlot(fmt::format("{{{}}}", activity_id)));
    return node.empty() || pending.contains(node);
  };
  auto summary = co_await RepairAll(context, servers, keeper, on_pending);
  if (!summary.ok()) co_return std::move(summary).error();
  spdlog::log(startup && summary->orders_applied == 0 && summary->oversold_units == 0
                  ? spdlog::level::info
                  : spdlog::level::warn,
              "redis {}: {} done in {} ms: {} activities checked, {} orders applied again, {} "
              "rebuilt, {} units oversold (epoch {})",
              servers, startup ? "start-up check" : "lost-write repair",
              std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - started)
                  .count(),
              summary->activities.size(), summary->orders_applied, summary->rebuilt,
              summary->oversold_units, summary->epoch);
  // Markers only for the servers the repair began with and that are still there: one that changed
  // meanwhile (another run_id, another promotion) is repaired in the next round.
  const std::map<std::string, std::string> now = watch.PendingNodes();
  Repaired repaired{std::move(*summary), true, {}};
  const int64_t now_ms = context.clock().NowMs();
  for (const auto& [node, run_id] : pending) {
    const auto still = now.find(node);
    if (still == now.end() || still->second != run_id) {
      spdlog::warn("redis {}: the server changed while the repair ran ({}); repaired again", node,
                   still == now.end() ? std::string("confirmed meanwhile") : still->second);
      continue;
    }
    auto written = co_await state.WriteRepairMarker(ToMarker(run_id, repaired.summary, now_ms));
    if (!written.ok()) co_return std::move(written).error();
    repaired.confirmed.push_back(run_id);
  }
  co_return repaired;
}

// Under the repair lock, one activity frozen for its sequence: thawed if a repair ran since it
// froze (Redis holds a later epoch), else repaired here.
asio::awaitable<base::Status> RepairFrozenActivity(ServiceContext& context, RedisWatch& watch,
                                                   const std::string& id, keyspace::WriteSeq floor,
                                                   const LeaseKeeper& keeper) {
  auto status = co_await context.activity_scripts().AsyncStatus(id, asio::use_awaitable);
  if (!status.ok()) co_return std::move(status).error();
  if (status->found && status->written.epoch > floor.epoch) {
    watch.activities().Thaw(id, status->written, status->written.epoch, 0, 0);
    watch.RequestLostCheck();
    co_return base::Status();
  }
  const std::string key = id;
  const auto read = [key](store::Store& store) { return store.GetActivity(key, true); };
  auto record = co_await context.OnDb(read);
  if (!record.ok()) co_return std::move(record).error();
  if (keeper.lost()) {
    co_return base::MakeError(base::ErrorCode::kUnavailable,
                              "'{}': the repair lost its lock and stopped", id);
  }
  spdlog::warn("activity '{}': lost-write repair starts (Redis holds {}.{}, floor {}.{})", id,
               status->written.epoch, status->written.seq, floor.epoch, floor.seq);
  const auto advance = [](store::Store& store) { return store.AdvanceFence(); };
  auto epoch = co_await context.OnDb(advance);
  if (!epoch.ok()) co_return std::move(epoch).error();
  watch.AdoptEpoch(*epoch);
  auto report = co_await RepairActivity(context, *record, *epoch);
  if (!report.ok()) co_return std::move(report).error();
  RepairSummary summary;
  summary.epoch = *epoch;
  Add(summary, *report);
  watch.CountActivityRepair(summary);
  watch.activities().Thaw(id, keyspace::WriteSeq{*epoch, 0}, *epoch, report->reapplied_orders,
                          report->oversold_units);
  watch.RequestLostCheck();
  if (report->rebuilt || report->oversold_units > 0) co_await Announce(context);
  co_return base::Status();
}

// The repair lock held for `work` (one repair at a time across instances): false when another
// instance holds it (its repair frees us).
template <typename Work>
asio::awaitable<Result<bool>> UnderRepairLock(ServiceContext& context,
                                              keyspace::ServiceState& state, Work work) {
  auto lock = std::make_shared<keyspace::DistributedLock>(
      context.runner(), state.keys().JobLock(kRepairJob), state.keys().JobFence(kRepairJob));
  auto taken = co_await lock->TryAcquire(context.random(), kRepairLease);
  if (!taken.ok()) co_return std::move(taken).error();
  if (!taken->has_value()) co_return false;
  auto keeper = LeaseKeeper::Start(co_await asio::this_coro::executor, lock, **taken, kRepairLease,
                                   kRepairExtendEvery);
  const LeaseKeeper::Guard keeping(keeper);
  base::Status worked = co_await work(*keeper);
  keeper->Stop();
  auto released = co_await lock->Release(**taken);  // when it fails, the lease expires it
  if (!released.ok()) spdlog::warn("lost-write repair's lock: {}", released.error().message);
  if (!worked.ok()) co_return std::move(worked).error();
  co_return true;
}

}  // namespace

asio::awaitable<void> CountAcknowledgedLost(ServiceContext& context, RedisWatch& watch) {
  if (!watch.TakeLostCheckDue()) co_return;
  keyspace::ActivityInspector inspector(context.runner(), context.settings().key_namespace);
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
    std::set<std::string> known;
    for (const auto& entry : *records) known.insert(entry.order.order_id);
    for (const auto& order : *orders) known.insert(order.order_id);
    // An order a surviving trace names (an idempotency record, a stream entry) was counted by the
    // repair already (reconcile.cc counts those whose order is gone): not counted twice.
    auto told = co_await inspector.IdempotentOrderIds(activity_id);
    auto streamed = co_await inspector.OrderIdsInStreams(activity_id);
    if (!told.ok() || !streamed.ok()) {
      spdlog::warn("acknowledged orders of '{}' not checked after the repair: {}", activity_id,
                   !told.ok() ? told.error().message : streamed.error().message);
      continue;
    }
    known.insert(told->begin(), told->end());
    known.insert(streamed->begin(), streamed->end());
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
  const std::map<std::string, std::string> pending = watch.PendingNodes();
  if (pending.empty()) co_return !watch.frozen();
  std::vector<std::string> run_ids;
  for (const auto& [node, run_id] : pending) run_ids.push_back(run_id);
  keyspace::ServiceState state(context.redis(), context.settings().key_namespace);
  if (watch.event_fence() < 0) {
    const auto read_fence = [](store::Store& store) { return store.ReadFence(); };
    auto fence = co_await context.OnDb(read_fence);
    if (!fence.ok()) co_return std::move(fence).error();
    watch.SetEventFence(*fence);
  }
  auto marked = co_await ReadMarkers(context, state, run_ids, watch.event_fence());
  if (!marked.ok()) co_return std::move(marked).error();
  if (marked->all) {
    watch.Confirm(run_ids, marked->fence, marked->summary);
    co_await CountAcknowledgedLost(context, watch);
    co_return !watch.frozen();
  }
  if (!may_repair) co_return false;

  Repaired repaired;
  auto ran = co_await UnderRepairLock(
      context, state, [&](const LeaseKeeper& keeper) -> asio::awaitable<base::Status> {
        auto once = co_await RepairOnce(context, state, watch, pending, keeper);
        if (!once.ok()) co_return std::move(once).error();
        repaired = std::move(*once);
        co_return base::Status();
      });
  if (!ran.ok()) co_return std::move(ran).error();
  if (!*ran) co_return false;  // another instance repairs; its markers free us
  watch.Confirm(repaired.confirmed, repaired.summary.epoch, repaired.summary);
  co_await CountAcknowledgedLost(context, watch);
  if (repaired.here) co_await Announce(context);
  co_return !watch.frozen();
}

asio::awaitable<void> ResolveFrozenActivities(ServiceContext& context, RedisWatch& watch,
                                              bool may_repair) {
  if (!watch.activities().any_frozen()) co_return;
  keyspace::ServiceState state(context.redis(), context.settings().key_namespace);
  for (const auto& frozen : watch.activities().FrozenFloors()) {
    // (Named copies: clang 14 cannot capture a structured binding in the lambda below.)
    const std::string& id = frozen.first;
    const keyspace::WriteSeq floor = frozen.second;
    // Repaired elsewhere since it froze? Only a repair writes a later epoch.
    auto status = co_await context.activity_scripts().AsyncStatus(id, asio::use_awaitable);
    if (!status.ok()) continue;  // Redis unreachable: next round
    if (status->found && status->written.epoch > floor.epoch) {
      watch.activities().Thaw(id, status->written, status->written.epoch, 0, 0);
      watch.RequestLostCheck();
      continue;
    }
    if (!may_repair) continue;
    auto ran = co_await UnderRepairLock(
        context, state, [&](const LeaseKeeper& keeper) -> asio::awaitable<base::Status> {
          co_return co_await RepairFrozenActivity(context, watch, id, floor, keeper);
        });
    if (!ran.ok()) spdlog::warn("lost-write repair of '{}': {}", id, ran.error().message);
  }
  co_await CountAcknowledgedLost(context, watch);
}

}  // namespace flashsale::service
