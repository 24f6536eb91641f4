#include "service/admin.h"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "keyspace/activity_delete.h"
#include "keyspace/service_state.h"
#include "service/jobs.h"
#include "service/redis_repair.h"
#include "service/redis_watch.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

// After a change: tell every instance, and reload here before answering.
asio::awaitable<void> Announce(ServiceContext& context) {
  keyspace::ServiceState state(context.redis(), context.settings().key_namespace);
  auto bumped = co_await state.BumpRegistryVersion();
  if (!bumped.ok()) {
    spdlog::warn(
        "registry version not bumped ({}); other instances see the change when Redis is back",
        bumped.error().message);
  }
  if (auto reloaded = co_await ReloadRegistry(context); !reloaded.ok()) {
    spdlog::warn("registry reload failed: {}", reloaded.error().message);
  }
}

namespace {

// The record with what Redis and the order pipeline say about it: remaining stock, the stream's
// pending and lag, dead letters, and the units the database holds.
asio::awaitable<ActivityState> WithRedisStatus(ServiceContext& context,
                                               const store::ActivityRecord& record) {
  ActivityState state{record, std::nullopt, {}, std::nullopt, std::nullopt};
  state.frozen_reason = context.FrozenReason(record.activity.id);
  state.frozen = state.frozen_reason != FreezeReason::kNone;
  auto status =
      co_await context.activity_scripts().AsyncStatus(record.activity.id, asio::use_awaitable);
  if (status.ok()) {
    state.redis = std::move(*status);
    auto pipeline = co_await context.order_stream().Info(record.activity.id);
    if (pipeline.ok()) state.pipeline = std::move(*pipeline);
    keyspace::ServiceState kept(context.redis(), context.settings().key_namespace);
    auto report = co_await kept.ReconcileReport(record.activity.id);
    if (report.ok() && report->has_value()) state.reconciliation = std::move(**report);
    auto units = co_await kept.OversoldUnits(record.activity.id);
    if (units.ok()) state.oversold_units = *units;
  } else {
    state.redis_error = status.error().ToString();
  }
  const auto count = [id = record.activity.id](store::Store& store) {
    return store.CountOrders(id);
  };
  auto persisted = co_await context.OnDb(count);
  if (persisted.ok()) state.persisted = *persisted;
  co_return state;
}

// Pushes a record's definition (never its stock) to Redis.
asio::awaitable<base::Status> PushDefinition(ServiceContext& context,
                                             const store::ActivityRecord& record) {
  core::Activity definition = record.activity;
  definition.items.clear();
  if (definition.kind == core::StockKind::kItemised) definition.stock = 0;
  auto setup = co_await context.activity_scripts().AsyncSetup(
      definition, keyspace::SetupMode::kDefinitionOnly, asio::use_awaitable);
  if (!setup.ok()) co_return std::move(setup).error();
  co_return base::Status();
}

asio::awaitable<Result<store::ActivityRecord>> LoadRecord(ServiceContext& context,
                                                          std::string_view activity_id) {
  const auto get = [id = std::string(activity_id)](store::Store& store) {
    return store.GetActivity(id, false);
  };
  co_return co_await context.OnDb(get);
}

}  // namespace

asio::awaitable<Result<ActivityState>> CreateActivity(ServiceContext& context,
                                                      const core::Activity& activity) {
  if (auto valid = core::Validate(activity); !valid) co_return valid.error();
  auto existing = co_await LoadRecord(context, activity.id);
  if (existing.ok()) {
    co_return MakeError(ErrorCode::kAlreadyExists, "activity '{}' exists already", activity.id);
  }
  if (existing.error().code != ErrorCode::kNotFound) co_return std::move(existing).error();

  auto setup = co_await context.activity_scripts().AsyncSetup(
      activity, keyspace::SetupMode::kCreate, asio::use_awaitable);
  if (!setup.ok()) {
    co_return MakeError(setup.error().code, "activity '{}' not created: Redis: {}", activity.id,
                        setup.error().message);
  }
  if (setup->clash) {
    // Left by a create whose database insert failed (nothing sold it: the registry never had
    // it), or loaded by a concurrent create: Redis is not changed under either.
    co_return MakeError(ErrorCode::kAlreadyExists,
                        "activity '{}' not created: Redis already holds it with {} units of kind "
                        "'{}' (from an earlier create that was not recorded, or one in progress); "
                        "create it with that stock and kind",
                        activity.id, setup->held_total, setup->held_kind);
  }
  const auto create = [activity, now_ms = context.clock().NowMs()](store::Store& store) {
    return store.CreateActivity(activity, now_ms);
  };
  auto created = co_await context.OnDb(create);
  if (!created.ok()) {
    if (created.error().code == ErrorCode::kAlreadyExists) {
      // Created meanwhile by someone else: our setup may have rewritten its definition in Redis.
      auto record = co_await LoadRecord(context, activity.id);
      if (record.ok()) {
        if (auto pushed = co_await PushDefinition(context, *record); !pushed.ok()) {
          spdlog::warn("activity '{}': definition not restored in Redis: {}", activity.id,
                       pushed.error().message);
        }
      }
    }
    co_return MakeError(created.error().code,
                        "activity '{}' is loaded in Redis but not recorded in the database: {}; "
                        "nothing sells it until it is created again",
                        activity.id, created.error().message);
  }
  co_await Announce(context);
  co_return co_await WithRedisStatus(context, *created);
}

asio::awaitable<Result<ActivityState>> UpdateActivity(ServiceContext& context,
                                                      std::string_view activity_id,
                                                      const store::ActivityUpdate& update) {
  const auto write = [id = std::string(activity_id), update, now_ms = context.clock().NowMs()](
                         store::Store& store) { return store.UpdateActivity(id, update, now_ms); };
  auto updated = co_await context.OnDb(write);
  if (!updated.ok()) co_return std::move(updated).error();
  // The record is the truth; the registry (all instances) enforces it locally even if Redis
  // missed it, and the next update pushes it again.
  auto pushed = co_await PushDefinition(context, *updated);
  co_await Announce(context);
  ActivityState state = co_await WithRedisStatus(context, *updated);
  if (!pushed.ok()) state.redis_error = "definition not pushed to Redis: " + pushed.error().message;
  co_return state;
}

asio::awaitable<Result<ActivityState>> AddStock(ServiceContext& context,
                                                std::string_view activity_id, int64_t units,
                                                std::span<const std::string> items) {
  const SnapshotPtr snapshot = context.snapshot();
  if (const auto* known = snapshot->Find(activity_id); known && known->activity.is_lottery()) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "'{}' is a lottery: its prize stock is set when it is created",
                        activity_id);
  } else if (known && known->activity.kind == core::StockKind::kCounted && !items.empty()) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "'{}': this sale counts units; send units, not items", activity_id);
  } else if (known && known->activity.kind == core::StockKind::kItemised && items.empty()) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "'{}': this sale sells item ids; send items, not units", activity_id);
  }
  const auto record = [id = std::string(activity_id), units,
                       items = std::vector<std::string>(items.begin(), items.end()),
                       now_ms = context.clock().NowMs()](store::Store& store) {
    return store.AddStock(id, units, items, now_ms);
  };
  auto recorded = co_await context.OnDb(record);
  if (!recorded.ok()) co_return std::move(recorded).error();
  auto added = co_await context.activity_scripts().AsyncAddStock(activity_id, units, items,
                                                                 asio::use_awaitable);
  co_await Announce(context);
  if (!added.ok() || !added->found) {
    const std::string why =
        added.ok() ? "the activity is not loaded in Redis" : added.error().message;
    co_return MakeError(added.ok() ? ErrorCode::kNotFound : added.error().code,
                        "{} units recorded for '{}' but not added to Redis ({}); they are not "
                        "sold until reconciliation adds them",
                        units, activity_id, why);
  }
  co_return co_await WithRedisStatus(context, *recorded);
}

asio::awaitable<base::Status> DeleteActivity(ServiceContext& context,
                                             std::string_view activity_id) {
  const std::string id(activity_id);
  const auto find = [id](store::Store& store) { return store.GetActivity(id, false); };
  auto record = co_await context.OnDb(find);
  if (!record.ok()) co_return std::move(record).error();
  const std::string& ns = context.settings().key_namespace;
  auto keys = co_await keyspace::DeleteActivityKeys(context.runner(), ns, id);
  if (!keys.ok()) co_return std::move(keys).error();
  if (*keys == keyspace::DeleteOutcome::kSold) {
    co_return MakeError(ErrorCode::kFailedPrecondition,
                        "'{}' has sold or reserved units: only an activity that sold nothing can "
                        "be deleted (close it instead)",
                        id);
  }
  const auto remove = [id](store::Store& store) { return store.DeleteActivity(id); };
  auto removed = co_await context.OnDb(remove);
  if (!removed.ok()) co_return std::move(removed).error();
  co_await Announce(context);
  co_return base::Status();
}

asio::awaitable<Result<ActivityState>> GetActivityState(ServiceContext& context,
                                                        std::string_view activity_id) {
  auto record = co_await LoadRecord(context, activity_id);
  if (!record.ok()) co_return std::move(record).error();
  co_return co_await WithRedisStatus(context, *record);
}

asio::awaitable<Result<std::vector<ActivityState>>> ListActivityStates(ServiceContext& context) {
  const auto list = [](store::Store& store) { return store.ListActivities(); };
  auto records = co_await context.OnDb(list);
  if (!records.ok()) co_return std::move(records).error();
  std::vector<ActivityState> states;
  for (const auto& record : *records) states.push_back(co_await WithRedisStatus(context, record));
  co_return states;
}

asio::awaitable<Result<std::vector<keyspace::StreamEntry>>> ListDeadLetters(
    ServiceContext& context, std::string_view activity_id, int64_t count) {
  if (context.snapshot()->Find(activity_id) == nullptr) {
    co_return MakeError(ErrorCode::kNotFound, "no activity '{}'", activity_id);
  }
  co_return co_await context.order_stream().ListDead(activity_id, count);
}

asio::awaitable<Result<std::string>> RetryDeadLetter(ServiceContext& context,
                                                     std::string_view activity_id,
                                                     std::string_view dead_id) {
  if (context.snapshot()->Find(activity_id) == nullptr) {
    co_return MakeError(ErrorCode::kNotFound, "no activity '{}'", activity_id);
  }
  auto id = co_await context.order_stream().RetryDead(activity_id, dead_id);
  if (id.ok()) spdlog::info("dead letter {} of '{}' put back as {}", dead_id, activity_id, *id);
  co_return id;
}

asio::awaitable<base::Status> RaiseFloorsFromRecord(ServiceContext& context) {
  RedisWatch* watch = context.settings().redis_watch;
  if (watch == nullptr) co_return base::Status();
  const auto read = [](store::Store& store) { return store.WrittenSeqs(); };
  auto written = co_await context.OnDb(read);
  if (!written.ok()) co_return std::move(written).error();
  for (const auto& [id, seq] : *written) watch->activities().Of(id).Raise(seq);
  co_return base::Status();
}

asio::awaitable<base::Status> ReloadRegistry(ServiceContext& context) {
  ActivityRegistry& registry = context.registry();
  const auto read = [&registry](store::Store& store) { return registry.Read(store); };
  auto load = co_await context.OnDb(read);
  if (!load.ok()) co_return std::move(load).error();
  // The floors first: an activity this process can sell has a floor at least the record's.
  if (auto raised = co_await RaiseFloorsFromRecord(context); !raised.ok()) {
    co_return std::move(raised).error();
  }
  // False when a reload that read the record later has published already: this one is older.
  registry.Publish(std::move(*load));
  co_return base::Status();
}

asio::awaitable<void> PollRegistry(ServiceContext& context, std::chrono::milliseconds every,
                                   asio::steady_timer& timer, const bool* stop, bool may_repair) {
  keyspace::ServiceState state(context.redis(), context.settings().key_namespace);
  std::string seen;
  bool first = true;
  RedisWatch* watch = context.settings().redis_watch;
  while (!*stop) {
    if (watch != nullptr && watch->frozen()) {
      // Frozen after a Redis restart or failover: free as soon as the repair's marker says so
      // (the repair itself runs on an instance's job schedule, or here in a process without).
      auto resolved = co_await ResolveRedisEvent(context, *watch, may_repair);
      if (!resolved.ok()) spdlog::debug("redis event: {}", resolved.error().message);
    }
    if (watch != nullptr && watch->activities().any_frozen()) {
      co_await ResolveFrozenActivities(context, *watch, may_repair);
    }
    auto version = co_await state.RegistryVersion();
    bool reloaded_now = false;
    if (version.ok()) {
      if (first || *version != seen) {
        if (auto reloaded = co_await ReloadRegistry(context); reloaded.ok()) {
          seen = *version;
          first = false;
          reloaded_now = true;
        } else {
          spdlog::warn("registry reload failed: {}", reloaded.error().message);
        }
      }
    }
    // What the other processes' pipelines persisted raises this one's floors (a reload did).
    if (!reloaded_now && !first) {
      if (auto raised = co_await RaiseFloorsFromRecord(context); !raised.ok()) {
        spdlog::debug("write marks of the record: {}", raised.error().message);
      }
    }
    if (*stop) break;
    timer.expires_after(watch != nullptr && (watch->frozen() || watch->activities().any_frozen())
                            ? std::min(every, std::chrono::milliseconds(100))
                            : every);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace flashsale::service
