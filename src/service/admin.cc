#include "service/admin.h"

#include <spdlog/spdlog.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "service/blocking.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

template <typename F>
auto OnDb(ServiceContext& context, F function) {
  return RunBlocking(context.db_executor(), std::move(function), asio::use_awaitable);
}

// After a change: tell every instance, and reload here before answering.
asio::awaitable<void> Announce(ServiceContext& context) {
  // (Commands are built before co_await: GCC 12 miscompiles initializer lists inside it.)
  const redis::Command incr{"INCR", ActivityRegistry::VersionKey(context.settings().key_namespace)};
  auto bumped = co_await context.redis().AsyncSend(incr, asio::use_awaitable);
  if (!bumped.ok()) {
    spdlog::warn(
        "registry version not bumped ({}); other instances see the change when Redis "
        "is back",
        bumped.error().message);
  }
  if (auto reloaded = co_await ReloadRegistry(context); !reloaded.ok()) {
    spdlog::warn("registry reload failed: {}", reloaded.error().message);
  }
}

asio::awaitable<ActivityState> WithRedisStatus(ServiceContext& context,
                                               store::ActivityRecord record) {
  ActivityState state{std::move(record), std::nullopt, {}};
  auto status =
      co_await context.seckill().AsyncStatus(state.record.activity.id, asio::use_awaitable);
  if (status.ok()) {
    state.redis = std::move(*status);
  } else {
    state.redis_error = status.error().ToString();
  }
  co_return state;
}

// Pushes a record's definition (never its stock) to Redis.
asio::awaitable<base::Status> PushDefinition(ServiceContext& context,
                                             const store::ActivityRecord& record) {
  core::SeckillActivity definition = record.activity;
  definition.items.clear();
  if (definition.kind == core::StockKind::kItemised) definition.stock = 0;
  auto setup = co_await context.seckill().AsyncSetup(definition, redis::SetupMode::kDefinitionOnly,
                                                     asio::use_awaitable);
  if (!setup.ok()) co_return std::move(setup).error();
  co_return base::Status();
}

}  // namespace

asio::awaitable<Result<ActivityState>> CreateActivity(ServiceContext& context,
                                                      core::SeckillActivity activity) {
  if (auto valid = core::Validate(activity); !valid) co_return valid.error();
  auto existing = co_await OnDb(context, [&store = context.store(), id = activity.id] {
    return store.GetActivity(id, false);
  });
  if (existing.ok()) {
    co_return MakeError(ErrorCode::kAlreadyExists, "activity '{}' exists already", activity.id);
  }
  if (existing.error().code != ErrorCode::kNotFound) co_return std::move(existing).error();

  auto setup = co_await context.seckill().AsyncSetup(activity, redis::SetupMode::kLoadIfMissing,
                                                     asio::use_awaitable);
  if (!setup.ok()) {
    co_return MakeError(setup.error().code, "activity '{}' not created: Redis: {}", activity.id,
                        setup.error().message);
  }
  const int64_t now_ms = context.clock().NowMs();
  auto created = co_await OnDb(context, [&store = context.store(), &activity, now_ms] {
    return store.CreateActivity(activity, now_ms);
  });
  if (!created.ok()) {
    if (created.error().code == ErrorCode::kAlreadyExists) {
      // Created meanwhile by someone else: our setup may have rewritten its definition in Redis.
      auto record = co_await OnDb(context, [&store = context.store(), id = activity.id] {
        return store.GetActivity(id, false);
      });
      if (record.ok()) co_await PushDefinition(context, *record);
    }
    co_return MakeError(created.error().code,
                        "activity '{}' is loaded in Redis but not recorded in the database: {}; "
                        "nothing sells it until it is created again",
                        activity.id, created.error().message);
  }
  co_await Announce(context);
  co_return co_await WithRedisStatus(context, std::move(*created));
}

asio::awaitable<Result<ActivityState>> UpdateActivity(ServiceContext& context,
                                                      std::string activity_id,
                                                      store::ActivityUpdate update) {
  const int64_t now_ms = context.clock().NowMs();
  auto updated = co_await OnDb(context, [&store = context.store(), &activity_id, &update, now_ms] {
    return store.UpdateActivity(activity_id, update, now_ms);
  });
  if (!updated.ok()) co_return std::move(updated).error();
  // The record is the truth; the registry (all instances) enforces it locally even if Redis
  // missed it, and the next update pushes it again.
  auto pushed = co_await PushDefinition(context, *updated);
  co_await Announce(context);
  ActivityState state = co_await WithRedisStatus(context, std::move(*updated));
  if (!pushed.ok()) state.redis_error = "definition not pushed to Redis: " + pushed.error().message;
  co_return state;
}

asio::awaitable<Result<ActivityState>> AddStock(ServiceContext& context, std::string activity_id,
                                                int64_t units, std::vector<std::string> items) {
  const int64_t now_ms = context.clock().NowMs();
  auto recorded =
      co_await OnDb(context, [&store = context.store(), &activity_id, units, &items, now_ms] {
        return store.AddStock(activity_id, units, items, now_ms);
      });
  if (!recorded.ok()) co_return std::move(recorded).error();
  auto added =
      co_await context.seckill().AsyncAddStock(activity_id, units, items, asio::use_awaitable);
  co_await Announce(context);
  if (!added.ok() || !added->found) {
    const std::string why =
        added.ok() ? "the activity is not loaded in Redis" : added.error().message;
    co_return MakeError(added.ok() ? ErrorCode::kNotFound : added.error().code,
                        "{} units recorded for '{}' but not added to Redis ({}); they are not "
                        "sold until reconciliation adds them",
                        units, activity_id, why);
  }
  co_return co_await WithRedisStatus(context, std::move(*recorded));
}

asio::awaitable<Result<ActivityState>> GetActivityState(ServiceContext& context,
                                                        std::string activity_id) {
  auto record = co_await OnDb(context, [&store = context.store(), &activity_id] {
    return store.GetActivity(activity_id, false);
  });
  if (!record.ok()) co_return std::move(record).error();
  co_return co_await WithRedisStatus(context, std::move(*record));
}

asio::awaitable<Result<std::vector<ActivityState>>> ListActivityStates(ServiceContext& context) {
  auto records =
      co_await OnDb(context, [&store = context.store()] { return store.ListActivities(); });
  if (!records.ok()) co_return std::move(records).error();
  std::vector<ActivityState> states;
  for (auto& record : *records)
    states.push_back(co_await WithRedisStatus(context, std::move(record)));
  co_return states;
}

asio::awaitable<base::Status> ReloadRegistry(ServiceContext& context) {
  auto records =
      co_await OnDb(context, [&store = context.store()] { return store.ListActivities(); });
  if (!records.ok()) co_return std::move(records).error();
  context.registry().Publish(std::move(*records));
  co_return base::Status();
}

asio::awaitable<void> PollRegistry(ServiceContext& context, std::chrono::milliseconds every,
                                   const bool* stop) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const redis::Command get{"GET", ActivityRegistry::VersionKey(context.settings().key_namespace)};
  std::string seen;
  bool first = true;
  while (!*stop) {
    auto version = co_await context.redis().AsyncSend(get, asio::use_awaitable);
    if (version.ok()) {
      const std::string now = version->is_nil() ? "" : std::string(version->str());
      if (first || now != seen) {
        if (auto reloaded = co_await ReloadRegistry(context); reloaded.ok()) {
          seen = now;
          first = false;
        } else {
          spdlog::warn("registry reload failed: {}", reloaded.error().message);
        }
      }
    }
    timer.expires_after(every);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

}  // namespace flashsale::service
