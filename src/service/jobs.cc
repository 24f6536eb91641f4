#include "service/jobs.h"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>

#include "base/json_writer.h"
#include "keyspace/lock.h"
#include "keyspace/service_state.h"
#include "service/lease_keeper.h"
#include "service/redis_repair.h"
#include "service/redis_watch.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr std::chrono::milliseconds kLease{30'000};
constexpr std::chrono::milliseconds kExtendEvery{10'000};
// Due jobs are found by a local check; the tick is short so that a Redis event is repaired
// within a tick of being noticed.
constexpr std::chrono::milliseconds kScheduleTick{100};
constexpr std::chrono::milliseconds kFrozenTick{100};

// Prewarm of one activity: the JSON line of what happened.
asio::awaitable<std::string> Prewarm(ServiceContext& context, const store::ActivityRecord& known) {
  base::JsonWriter w;
  w.BeginObject().Key("activity_id").String(known.activity.id);
  const int64_t now_ms = context.clock().NowMs();
  if (known.activity.start_ms <= now_ms) {
    w.Key("action").String("none").Key("why").String("started: never touched by prewarm");
    w.EndObject();
    co_return std::move(w).Take();
  }
  auto status =
      co_await context.activity_scripts().AsyncStatus(known.activity.id, asio::use_awaitable);
  if (status.ok() && status->found) {
    w.Key("action").String("none").Key("why").String("loaded already").EndObject();
    co_return std::move(w).Take();
  }
  const std::string id = known.activity.id;
  // A sale that has orders in the record started once, whatever its start time says now (it can
  // be postponed): loading its whole stock would sell those units again. Reconciliation rebuilds
  // it with what is left.
  const auto count = [id](store::Store& store) { return store.CountOrders(id); };
  auto orders = co_await context.OnDb(count);
  if (!orders.ok() || orders->orders > 0) {
    w.Key("action").String(orders.ok() ? "none" : "failed");
    w.Key("why").String(orders.ok() ? "orders in the record: reconciliation rebuilds it"
                                    : orders.error().message);
    w.EndObject();
    co_return std::move(w).Take();
  }
  const auto read = [id](store::Store& store) { return store.GetActivity(id, true); };
  auto record = co_await context.OnDb(read);
  if (!record.ok()) {
    w.Key("action").String("failed").Key("why").String(record.error().message).EndObject();
    co_return std::move(w).Take();
  }
  auto setup = co_await context.activity_scripts().AsyncSetup(
      record->activity, keyspace::SetupMode::kLoadIfMissing, asio::use_awaitable);
  if (!setup.ok()) {
    w.Key("action").String("failed").Key("why").String(setup.error().message).EndObject();
  } else {
    w.Key("action").String(setup->loaded ? "loaded" : "none");
    w.Key("units").Int(record->activity.InitialUnits()).EndObject();
  }
  co_return std::move(w).Take();
}

// The expire job for one activity: the JSON line of what it did.
asio::awaitable<Result<std::string>> Expire(ServiceContext& context,
                                            const store::ActivityRecord& record) {
  constexpr int64_t kBatch = 1000;
  const std::string id = record.activity.id;
  const int64_t window = record.activity.payment_window_ms;
  int64_t cancelled = 0;
  int64_t returned = 0;
  int64_t not_returned = 0;
  while (window > 0) {
    const int64_t now_ms = context.clock().NowMs();
    const auto cancel = [id, before = now_ms - window, now_ms](store::Store& store) {
      return store.CancelUnpaid(id, before, kBatch, now_ms);
    };
    auto orders = co_await context.OnDb(cancel);
    if (!orders.ok()) co_return std::move(orders).error();
    for (const auto& order : *orders) {
      // The record cancelled it first: a payment racing with the expiry is refused from here on,
      // and the unit goes back exactly once.
      auto released =
          co_await context.activity_scripts().AsyncRelease(id, order.order_id, asio::use_awaitable);
      if (released.ok() && released->outcome == keyspace::ReleaseOutcome::kReleased) {
        returned += released->quantity;
      } else if (!released.ok()) {
        ++not_returned;  // reconciliation returns it (cancelled, not returned)
      }
    }
    cancelled += static_cast<int64_t>(orders->size());
    if (static_cast<int64_t>(orders->size()) < kBatch) break;
  }
  base::JsonWriter w;
  w.BeginObject().Key("activity_id").String(id).Key("payment_window_ms").Int(window);
  w.Key("cancelled").Int(cancelled).Key("units_returned").Int(returned);
  w.Key("not_returned_yet").Int(not_returned).EndObject();
  co_return std::move(w).Take();
}

// Reconciliation of one activity: the JSON of its report, which is also kept in Redis for the
// admin API.
asio::awaitable<Result<std::string>> ReconcileOne(ServiceContext& context,
                                                  const store::ActivityRecord& record, bool repair,
                                                  JobMetrics* metrics) {
  auto report = co_await Reconcile(context, record, repair);
  if (!report.ok()) co_return std::move(report).error();
  std::string json = report->Json();
  if (metrics != nullptr) metrics->SetDrift(record.activity.id, report->drift);
  keyspace::ServiceState state(context.redis(), context.settings().key_namespace);
  (void)co_await state.KeepReconcileReport(record.activity.id, json);  // best effort
  if (report->drift != 0) {
    spdlog::warn("reconcile '{}': drift {}", record.activity.id, report->drift);
  }
  co_return json;
}

// The requested job on one activity: the JSON line of what it did.
asio::awaitable<Result<std::string>> RunOn(ServiceContext& context, const JobRequest& request,
                                           const store::ActivityRecord& record,
                                           JobMetrics* metrics) {
  switch (request.job) {
    case Job::kPrewarm:
      co_return co_await Prewarm(context, record);
    case Job::kExpire:
      co_return co_await Expire(context, record);
    case Job::kReconcile:
      break;
  }
  co_return co_await ReconcileOne(context, record, request.repair, metrics);
}

}  // namespace

std::string_view ToString(Job job) {
  switch (job) {
    case Job::kPrewarm:
      return "prewarm";
    case Job::kReconcile:
      return "reconcile";
    case Job::kExpire:
      return "expire";
  }
  return "reconcile";
}

std::optional<Job> JobFrom(std::string_view name) {
  if (name == "prewarm") return Job::kPrewarm;
  if (name == "reconcile") return Job::kReconcile;
  if (name == "expire") return Job::kExpire;
  return std::nullopt;
}

void JobMetrics::SetDrift(const std::string& activity_id, int64_t drift) {
  std::lock_guard lock(mutex_);
  drift_[activity_id] = drift;
}

void JobMetrics::KeepOnly(const std::set<std::string>& ids) {
  std::lock_guard lock(mutex_);
  std::erase_if(drift_, [&ids](const auto& entry) { return !ids.contains(entry.first); });
}

void JobMetrics::AppendPrometheus(std::string& out) const {
  out +=
      "# HELP flashsale_job_runs_total Job runs made by this process, by job.\n"
      "# TYPE flashsale_job_runs_total counter\n";
  for (Job job : {Job::kPrewarm, Job::kReconcile, Job::kExpire}) {
    out += fmt::format("flashsale_job_runs_total{{job=\"{}\"}} {}\n", ToString(job),
                       runs[static_cast<size_t>(job)].value());
  }
  out += fmt::format(
      "# HELP flashsale_job_lock_lost_total Job runs stopped because their lock was lost.\n"
      "# TYPE flashsale_job_lock_lost_total counter\nflashsale_job_lock_lost_total {}\n"
      "# HELP flashsale_reconcile_drift Units the invariant could not account for at the last "
      "reconciliation (0: it holds).\n# TYPE flashsale_reconcile_drift gauge\n",
      lock_lost.value());
  std::lock_guard lock(mutex_);
  for (const auto& [id, drift] : drift_) {
    out += fmt::format("flashsale_reconcile_drift{{activity=\"{}\"}} {}\n", id, drift);
  }
}

asio::awaitable<Result<std::string>> RunJob(ServiceContext& context, const JobRequest& request,
                                            JobMetrics* metrics) {
  const keyspace::NamespaceKeys keys(context.settings().key_namespace);
  const std::string_view job = ToString(request.job);
  // Shared with the watchdog, which may still be extending when the run ends.
  auto lock = std::make_shared<keyspace::DistributedLock>(context.runner(), keys.JobLock(job),
                                                          keys.JobFence(job));
  auto taken = co_await lock->TryAcquire(context.random(), kLease);
  if (!taken.ok()) co_return std::move(taken).error();
  if (!taken->has_value()) {
    co_return MakeError(ErrorCode::kAlreadyExists, "the {} job is running on another instance",
                        ToString(request.job));
  }
  const keyspace::Lease lease = **taken;
  auto keeper =
      LeaseKeeper::Start(co_await asio::this_coro::executor, lock, lease, kLease, kExtendEvery);
  const LeaseKeeper::Guard keeping(keeper);
  if (metrics != nullptr) metrics->runs[static_cast<size_t>(request.job)].Add();

  const SnapshotPtr snapshot = context.snapshot();
  base::JsonWriter w;
  w.BeginObject().Key("job").String(ToString(request.job)).Key("fence").Int(lease.fence);
  w.Key("activities").BeginArray();
  std::optional<base::Error> failed;
  bool found = request.activity_id.empty();
  for (const auto& record : snapshot->all()) {
    if (!request.activity_id.empty() && record.activity.id != request.activity_id) continue;
    found = true;
    if (keeper->lost()) break;
    auto line = co_await RunOn(context, request, record, metrics);
    if (!line.ok()) {
      failed = std::move(line).error();
      break;
    }
    w.Raw(*line);
  }
  w.EndArray();
  const bool lost = keeper->lost();
  keeper->Stop();
  if (lost) {
    if (metrics != nullptr) metrics->lock_lost.Add();
    co_return MakeError(ErrorCode::kUnavailable, "the {} job lost its lock and stopped",
                        ToString(request.job));
  }
  // A release that fails leaves the lock to expire with its lease; the job's work is done.
  auto released = co_await lock->Release(lease);
  if (!released.ok()) {
    spdlog::warn("the {} job's lock: {}", ToString(request.job), released.error().message);
  }
  if (failed) co_return std::move(*failed);
  if (!found) co_return MakeError(ErrorCode::kNotFound, "no activity '{}'", request.activity_id);
  w.EndObject();
  co_return std::move(w).Take();
}

asio::awaitable<void> RunJobSchedule(ServiceContext& context, JobSchedule schedule,
                                     const bool* stop, JobMetrics* metrics) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  using Clock = std::chrono::steady_clock;
  std::map<Job, Clock::time_point> next;
  const std::pair<Job, std::chrono::milliseconds> jobs[] = {
      {Job::kPrewarm, schedule.prewarm_every},
      {Job::kReconcile, schedule.reconcile_every},
      {Job::kExpire, schedule.expire_every}};
  RedisWatch* watch = context.settings().redis_watch;
  keyspace::ServiceState state(context.redis(), context.settings().key_namespace);
  while (!*stop) {
    if (watch != nullptr && watch->frozen()) {
      // Redis restarted or failed over: the lost-write repair first (or wait for the instance
      // that runs it); no other job runs on a Redis that may have lost writes.
      auto resolved = co_await ResolveRedisEvent(context, *watch, /*may_repair=*/true);
      if (!resolved.ok()) spdlog::warn("lost-write repair: {}", resolved.error().message);
      tick.expires_after(kFrozenTick);
      co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    if (watch != nullptr && watch->activities().any_frozen()) {
      // An activity whose Redis held less of its write sequence than was acknowledged: its
      // repair (the others go on selling and their jobs run).
      co_await ResolveFrozenActivities(context, *watch, /*may_repair=*/true);
    }
    for (const auto& [job, every] : jobs) {
      if (every.count() <= 0 || *stop || Clock::now() < next[job]) continue;
      next[job] = Clock::now() + std::min(every, std::chrono::milliseconds(5'000));
      // This period's run: claimed by one instance.
      auto claimed = co_await state.ClaimJobPeriod(ToString(job), every);
      if (!claimed.ok() || !*claimed) continue;
      const JobRequest request{.job = job};
      auto ran = co_await RunJob(context, request, metrics);
      if (!ran.ok()) spdlog::warn("scheduled {} job: {}", ToString(job), ran.error().message);
    }
    tick.expires_after(kScheduleTick);
    co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace flashsale::service
