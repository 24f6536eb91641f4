#include "service/context.h"

#include <algorithm>
#include <boost/asio/use_awaitable.hpp>

#include "base/crypto.h"
#include "redis/cluster.h"
#include "service/activity_guard.h"
#include "service/redis_watch.h"

namespace flashsale::service {

namespace {
constexpr size_t kMaxRememberedRefusals = 100'000;
}

ServiceContext::ServiceContext(const ServiceSettings& settings, redis::ScriptEvaluator& scripts,
                               redis::ScriptRunner& runner, store::Store& store,
                               boost::asio::any_io_executor db_executor, ActivityRegistry& registry,
                               const base::Clock& clock, base::Random& random)
    : settings_(settings),
      runner_(runner),
      activity_scripts_(scripts, settings.key_namespace),
      reserves_(
          scripts.executor(),
          [this](std::string_view activity_id, std::span<const keyspace::ReserveRequest> requests,
                 ReserveCoalescer::Done done) {
            // Admitted before a freeze, sent after it: not sent (the activity's Redis may have
            // lost writes); the floor read now, the freshest.
            if (Frozen(activity_id)) {
              CountFrozenRefusals(activity_id, static_cast<int64_t>(requests.size()));
              return std::move(done)(base::Status(FrozenError()));
            }
            SendReserveBatch(activity_scripts_, activity_id, requests, Floor(activity_id),
                             std::move(done));
          },
          static_cast<size_t>(std::max<int64_t>(settings.max_batch, 1))),
      draws_(
          scripts.executor(),
          [this](std::string_view activity_id, std::span<const keyspace::DrawRequest> requests,
                 DrawCoalescer::Done done) {
            if (Frozen(activity_id)) {
              CountFrozenRefusals(activity_id, static_cast<int64_t>(requests.size()));
              return std::move(done)(base::Status(FrozenError()));
            }
            SendDrawBatch(activity_scripts_, activity_id, requests, Floor(activity_id),
                          std::move(done));
          },
          static_cast<size_t>(std::max<int64_t>(settings.max_batch, 1))),
      limiter_(scripts),
      order_stream_(runner, settings.key_namespace),
      draw_queue_(runner, settings.key_namespace),
      idempotency_(runner, settings.key_namespace),
      store_(store),
      db_executor_(std::move(db_executor)),
      registry_(registry),
      clock_(clock),
      random_(random),
      ids_(clock_, random_),
      key_ids_key_(base::DeriveKey(settings.secret, "key-ids")),
      cache_keys_(settings.key_namespace, base::DeriveKey(settings.secret, "cache-keys")) {
  if (settings.wait_replicas > 0) {
    replica_wait_ = std::make_unique<redis::ReplicaWait>(
        runner.connection(), settings.wait_replicas, settings.wait_timeout);
  }
}

std::unique_ptr<base::Random> MakeSecureRandom() { return std::make_unique<base::SecureRandom>(); }

namespace {

// ConfirmDurable's WAIT, in a coroutine of its own: its frame (the activity's keys, the messages)
// is made only when replicas are awaited, and ConfirmDurable's own frame, made for every unit
// taken, stays small enough for Asio's recycling cache (frames over about 1 KiB are never
// recycled; in the debug build the whole of it was 848 bytes, and missed the cache on draws).
boost::asio::awaitable<base::Status> WaitForReplicas(redis::ReplicaWait& replica_wait,
                                                     std::string_view key_namespace,
                                                     std::string_view activity_id,
                                                     std::string_view order_id) {
  const std::string order(order_id);
  // Every key of the activity has its {id} hash tag: on a cluster, the WAIT goes to the node that
  // took the write.
  const keyspace::ActivityKeys keys(key_namespace, activity_id);
  auto acked = co_await replica_wait.AsyncConfirm(keys.stock(), boost::asio::use_awaitable);
  if (acked.ok() && *acked >= replica_wait.replicas()) co_return base::Status{};
  const std::string why =
      acked.ok() ? fmt::format("{} of {} replicas acknowledged it within {} ms", *acked,
                               replica_wait.replicas(), replica_wait.timeout().count())
                 : acked.error().message;
  co_return base::MakeError(base::ErrorCode::kUnknownOutcome,
                            "order {} was reserved but its durability is not confirmed ({}); "
                            "GET /api/v1/orders shows whether it stands",
                            order, why);
}

}  // namespace

boost::asio::awaitable<base::Status> ServiceContext::ConfirmDurable(std::string_view activity_id,
                                                                    std::string_view order_id) {
  if (!replica_wait_) co_return base::Status{};
  co_return co_await WaitForReplicas(*replica_wait_, settings_.key_namespace, activity_id,
                                     order_id);
}

SnapshotPtr ServiceContext::snapshot() {
  const uint64_t before = snapshot_ ? snapshot_->generation() : 0;
  registry_.Refresh(snapshot_);
  if (snapshot_->generation() != before) sold_out_.clear();
  return snapshot_;
}

std::string ServiceContext::KeyToken(std::string_view data) const {
  return base::HexEncode(base::HmacSha256(key_ids_key_, data)).substr(0, 32);
}

ActivityGuard* ServiceContext::GuardOf(std::string_view activity_id) {
  if (settings_.redis_watch == nullptr) return nullptr;
  if (auto found = guards_.find(activity_id); found != guards_.end()) return found->second;
  ActivityGuard* guard = &settings_.redis_watch->activities().Of(activity_id);
  guards_.emplace(std::string(activity_id), guard);
  return guard;
}

FreezeReason ServiceContext::FrozenReason(std::string_view activity_id) {
  RedisWatch* watch = settings_.redis_watch;
  if (watch == nullptr) return FreezeReason::kNone;
  const bool own = GuardOf(activity_id)->frozen();
  if (!own && !watch->frozen()) return FreezeReason::kNone;
  if (watch->frozen()) {
    // Some server's event is open. One server: it holds every activity. A cluster: the node
    // serving the activity's slot (unknown: as frozen). Frozen so, the activity's freeze is also
    // kept as its own (server_changed, for admin status and /metrics) until that event's repair.
    const redis::ClusterRouter* router = runner_.connection().cluster();
    if (router == nullptr) {
      watch->FreezeForNode(activity_id, "");
      return FreezeReason::kServer;
    }
    const std::string node = router->NodeOfSlot(redis::KeySlot(fmt::format("{{{}}}", activity_id)));
    if (node.empty()) return FreezeReason::kServer;
    if (watch->NodeFrozen(node)) {
      watch->FreezeForNode(activity_id, node);
      return FreezeReason::kServer;
    }
  }
  if (!own) return FreezeReason::kNone;
  // Its own freeze: from its write sequence, or kept from its server's event (thawed with that
  // event's repair).
  return watch->activities().ReasonOf(activity_id);
}

core::WriteSeq ServiceContext::Floor(std::string_view activity_id) {
  ActivityGuard* guard = GuardOf(activity_id);
  return guard != nullptr ? guard->floor() : core::WriteSeq{};
}

bool ServiceContext::Observe(std::string_view activity_id, core::Outcome outcome,
                             core::WriteSeq written) {
  ActivityGuard* guard = GuardOf(activity_id);
  if (outcome != core::Outcome::kBehind) {
    if (guard != nullptr) guard->Raise(written);
    return true;
  }
  if (guard != nullptr) {
    settings_.redis_watch->activities().Freeze(activity_id, FreezeReason::kBehind, written);
  }
  return false;
}

void ServiceContext::CountFrozenRefusals(std::string_view activity_id, int64_t count) {
  RedisWatch* watch = settings_.redis_watch;
  if (watch == nullptr) return;
  for (int64_t i = 0; i < count; ++i) {
    watch->CountRefused();
    watch->activities().CountRefused(activity_id);
  }
}

bool ServiceContext::IsSoldOut(std::string_view activity_id) const {
  if (sold_out_.empty()) return false;
  const auto it = sold_out_.find(activity_id);
  return it != sold_out_.end() && clock_.NowMs() < it->second;
}

void ServiceContext::MarkSoldOut(std::string_view activity_id) {
  const int64_t until = clock_.NowMs() + settings_.sold_out_ttl_ms;
  if (auto it = sold_out_.find(activity_id); it != sold_out_.end()) {
    it->second = until;
  } else {
    sold_out_.emplace(std::string(activity_id), until);
  }
}

int64_t ServiceContext::RefusedUntil(const std::string& limiter_key) const {
  auto it = refused_until_.find(limiter_key);
  return it == refused_until_.end() ? 0 : it->second;
}

void ServiceContext::RememberRefusal(const std::string& limiter_key, int64_t until_ms) {
  // Bounded: a flood of distinct users cannot grow this without limit; forgetting only costs
  // a Redis call.
  if (refused_until_.size() >= kMaxRememberedRefusals) refused_until_.clear();
  refused_until_[limiter_key] = until_ms;
}

}  // namespace flashsale::service
