#include "service/redis_repair.h"

#include <spdlog/spdlog.h>

#include <boost/asio/use_awaitable.hpp>

#include "redis/lock.h"
#include "redis/service_state.h"
#include "service/admin.h"
#include "service/jobs.h"
#include "service/reconcile.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::Result;

namespace {

constexpr std::chrono::milliseconds kRepairLease{300'000};
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

// The repair marker of `run_id` if it was written under the record's current fence. A marker
// under an older epoch means another server was repaired since (the endpoint went back to this
// one): this one is repaired again, so that batches carry the current epoch.
asio::awaitable<Result<std::optional<redis::RepairMarker>>> CurrentMarker(
    ServiceContext& context, redis::ServiceState& state, std::string_view run_id) {
  auto marker = co_await state.ReadRepairMarker(run_id);
  if (!marker.ok()) co_return std::move(marker).error();
  if (!marker->has_value()) co_return std::nullopt;
  const auto read_fence = [](store::Store& store) { return store.ReadFence(); };
  auto fence = co_await context.OnDb(read_fence);
  if (!fence.ok()) co_return std::move(fence).error();
  if ((*marker)->epoch != *fence) co_return std::nullopt;
  co_return std::move(*marker);
}

// The repair itself: the record's fence advanced, then every activity of the record reconciled
// with repairs after the event, each report kept.
asio::awaitable<Result<RepairSummary>> RepairAll(ServiceContext& context,
                                                 redis::ServiceState& state,
                                                 std::string_view run_id) {
  const auto advance = [](store::Store& store) { return store.AdvanceFence(); };
  auto epoch = co_await context.OnDb(advance);
  if (!epoch.ok()) co_return std::move(epoch).error();
  const auto list = [](store::Store& store) { return store.ListActivities(); };
  auto activities = co_await context.OnDb(list);
  if (!activities.ok()) co_return std::move(activities).error();
  RepairSummary summary;
  summary.epoch = *epoch;
  for (const auto& record : *activities) {
    auto report = co_await Reconcile(context, record, /*repair=*/true, /*after_event=*/true);
    if (!report.ok()) {
      spdlog::warn("redis {}: repair of '{}' failed: {}", run_id, record.activity.id,
                   report.error().message);
      co_return std::move(report).error();
    }
    Add(summary, *report);
    // Best effort, as for the job's runs: the summary goes into the marker.
    (void)co_await state.KeepReconcileReport(record.activity.id, report->Json());
  }
  co_return summary;
}

struct Repaired {
  RepairSummary summary;
  bool here = false;  // repaired by this call (else: found done by another instance)
};

// Under the repair lock: done by another instance between our first look and the lock (its
// marker), or repaired here and the marker written. Nothing when the server restarted again
// meanwhile (its marker would free nothing).
asio::awaitable<Result<std::optional<Repaired>>> RepairOnce(ServiceContext& context,
                                                            redis::ServiceState& state,
                                                            std::string_view run_id) {
  auto done = co_await CurrentMarker(context, state, run_id);
  if (!done.ok()) co_return std::move(done).error();
  if (done->has_value()) co_return Repaired{FromMarker(**done), false};
  spdlog::warn("redis {}: lost-write repair starts", run_id);
  auto summary = co_await RepairAll(context, state, run_id);
  if (!summary.ok()) co_return std::move(summary).error();
  auto now_run_id = co_await state.ServerRunId();
  if (!now_run_id.ok() || *now_run_id != run_id) co_return std::nullopt;
  const redis::RepairMarker marker = ToMarker(run_id, *summary, context.clock().NowMs());
  auto marked = co_await state.WriteRepairMarker(marker);
  if (!marked.ok()) co_return std::move(marked).error();
  co_return Repaired{std::move(*summary), true};
}

}  // namespace

asio::awaitable<Result<bool>> ResolveRedisEvent(ServiceContext& context, RedisWatch& watch,
                                                bool may_repair) {
  redis::ServiceState state(context.redis(), context.settings().key_namespace);
  auto run_id = co_await state.ServerRunId();
  if (!run_id.ok()) co_return std::move(run_id).error();
  auto done = co_await CurrentMarker(context, state, *run_id);
  if (!done.ok()) co_return std::move(done).error();
  if (done->has_value()) {
    const RepairSummary summary = FromMarker(**done);
    watch.Confirm(*run_id, summary.epoch, summary);
    co_return !watch.frozen();
  }
  if (!may_repair) co_return false;

  redis::DistributedLock lock(context.runner(), state.keys().JobLock(kRepairJob),
                              state.keys().JobFence(kRepairJob));
  auto taken = co_await lock.TryAcquire(context.random(), kRepairLease);
  if (!taken.ok()) co_return std::move(taken).error();
  if (!taken->has_value()) co_return false;  // another instance repairs; its marker frees us
  auto repaired = co_await RepairOnce(context, state, *run_id);
  co_await lock.Release(**taken);
  if (!repaired.ok()) co_return std::move(repaired).error();
  if (!repaired->has_value()) co_return false;
  const Repaired& outcome = **repaired;
  watch.Confirm(*run_id, outcome.summary.epoch, outcome.summary);
  if (outcome.here) co_await Announce(context);
  co_return !watch.frozen();
}

}  // namespace flashsale::service
