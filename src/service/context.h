#pragma once
// What one I/O thread's use cases share: its Redis connection and script bindings, the database
// and the executor its calls run on, the registry snapshot, the injected clock and randomness,
// and the thread-local knowledge that lets the purchase path answer without Redis (sold-out
// flags, rate-limit refusals still in force). Lives on its thread; not thread-safe.

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "base/clock.h"
#include "base/ids.h"
#include "base/random.h"
#include "core/cache_key.h"
#include "core/outcome.h"
#include "core/write_seq.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/draw_queue.h"
#include "keyspace/idempotency.h"
#include "keyspace/order_stream.h"
#include "keyspace/rate_limiter.h"
#include "redis/replica_wait.h"
#include "service/activity_guard.h"
#include "service/blocking.h"
#include "service/registry.h"
#include "service/script_batches.h"
#include "store/store.h"

namespace flashsale::service {

// Makes one thread's random source (a Random is not thread-safe: each context has its own).
using RandomFactory = std::function<std::unique_ptr<base::Random>()>;
// The CSPRNG (base::SecureRandom): what the binary draws with.
std::unique_ptr<base::Random> MakeSecureRandom();

struct ServiceSettings {
  std::string key_namespace = "fs";
  std::string secret;  // derives the keys of tokens, of ids inside Redis keys, of cache keys
  int64_t idempotency_ttl_ms = 86'400'000;
  int64_t cache_ttl_s = 3600;
  int64_t redis_retries = 2;  // extra attempts of a reserve whose outcome was unknown
  // How long a sold-out reply is answered locally before one request asks Redis again: units a
  // release puts back (expiry, reconciliation) change no registry version, so without this an
  // I/O thread that saw the sale sold out would never sell them. One Redis call per I/O thread
  // per period in the sold-out phase.
  int64_t sold_out_ttl_ms = 1000;
  std::chrono::milliseconds db_timeout{10000};  // longest wait for one database call
  // How long reconciliation waits after it first finds an activity missing from Redis before it
  // rebuilds it: long enough for any consumer still holding a batch of the lost stream to drop it
  // (one database timeout and one retry pause), so none is written after the rebuild.
  std::chrono::milliseconds rebuild_grace{20000};
  // The process's watch for Redis restarts and failovers (service/redis_watch.h); null: none
  // (tests of single components), never frozen.
  class RedisWatch* redis_watch = nullptr;
  // Durability mode wait (docs/durability.md): a reservation or draw is answered as done only
  // once this many replicas acknowledged it (WAIT), within wait_timeout; 0: not waited for.
  int64_t wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{200};
  // Reservations (and draws) of one activity that wait while a call of it is in flight are sent
  // as one batch of at most this many (base/coalescer.h); 1: every request alone.
  int64_t max_batch = 64;
};

class ServiceContext {
 public:
  ServiceContext(const ServiceSettings& settings, redis::ScriptRunner& runner, store::Store& store,
                 boost::asio::any_io_executor db_executor, ActivityRegistry& registry,
                 const base::Clock& clock, base::Random& random)
      : ServiceContext(settings, runner, runner, store, std::move(db_executor), registry, clock,
                       random) {}
  // With the activity scripts (the reserve and draw calls, their coalescers) and the rate limits
  // evaluated by `scripts`, on its executor; everything else Redis does goes through `runner`.
  // Unit tests of the purchase and draw use cases pass an evaluator that answers in process
  // (tests/support/script_double.h) and a runner whose connection is never started.
  ServiceContext(const ServiceSettings& settings, redis::ScriptEvaluator& scripts,
                 redis::ScriptRunner& runner, store::Store& store,
                 boost::asio::any_io_executor db_executor, ActivityRegistry& registry,
                 const base::Clock& clock, base::Random& random);

  const ServiceSettings& settings() const { return settings_; }
  redis::Connection& redis() { return runner_.connection(); }
  redis::ScriptRunner& runner() { return runner_; }
  keyspace::ActivityScripts& activity_scripts() { return activity_scripts_; }
  // The reserve and draw script calls, coalesced per activity (base/coalescer.h): what the
  // purchase and the direct draw send through.
  ReserveCoalescer& reserves() { return reserves_; }
  DrawCoalescer& draws() { return draws_; }
  keyspace::RateLimiter& limiter() { return limiter_; }
  keyspace::OrderStream& order_stream() { return order_stream_; }
  keyspace::DrawQueue& draw_queue() { return draw_queue_; }
  keyspace::IdempotencyRecords& idempotency() { return idempotency_; }
  store::Store& store() { return store_; }
  const boost::asio::any_io_executor& db_executor() const { return db_executor_; }
  ActivityRegistry& registry() { return registry_; }
  const base::Clock& clock() const { return clock_; }
  base::OrderIdGenerator& ids() { return ids_; }
  // Lottery draws, order ids, lock tokens: the CSPRNG in the binary, a seeded source where a test
  // replays draws (RandomFactory).
  base::Random& random() { return random_; }
  const core::CacheKeys& cache_keys() const { return cache_keys_; }
  // Purchases and draws of the activity wait for a lost-write repair: its own freeze (its Redis
  // held less of its write sequence than the floor: service/activity_guard.h), or an event of its
  // Redis server (service/redis_watch.h; on a cluster, of the node serving its slot). Never
  // without a Redis watch.
  bool Frozen(std::string_view activity_id) {
    return FrozenReason(activity_id) != FreezeReason::kNone;
  }
  // Why: kBehind (its own freeze), kServer (its server's event), kNone (not frozen).
  FreezeReason FrozenReason(std::string_view activity_id);
  // The floor to send with the activity's reserve and draw calls ({0, 0} without a watch).
  core::WriteSeq Floor(std::string_view activity_id);
  // What a reserve or draw reply says of the sequence: raises the floor to what Redis holds, or,
  // for kBehind, freezes the activity (its repair follows). False for kBehind.
  bool Observe(std::string_view activity_id, core::Outcome outcome, core::WriteSeq written);
  // `count` purchases or draws of the activity refused because it is frozen (for status and
  // /metrics).
  void CountFrozenRefusals(std::string_view activity_id, int64_t count = 1);
  // Null unless settings().wait_replicas > 0.
  redis::ReplicaWait* replica_wait() { return replica_wait_.get(); }

  // With wait_replicas: waits for the replicas to acknowledge this connection's writes so far
  // (the reservation `order_id` of `activity_id` just answered; on a cluster, those of the node
  // serving the activity's slot); kUnknownOutcome, naming the order id, when they
  // did not within wait_timeout. Without: ok at once.
  boost::asio::awaitable<base::Status> ConfirmDurable(std::string_view activity_id,
                                                      std::string_view order_id);

  // Runs a store call on the database executor; kUnavailable if it takes over db_timeout. Pass a
  // named lambda that owns what it uses (it runs on another thread and may outlive the wait).
  template <typename F>
  boost::asio::awaitable<std::invoke_result_t<const F&, store::Store&>> OnDb(const F& function);

  // The registry's current snapshot; when it changed, local flags are forgotten (the change may
  // have been new stock). Hold the pointer across co_awaits: a later call may replace it.
  SnapshotPtr snapshot();

  // A key-safe token for `data` (a user id, an address, an idempotency key): HMAC under the
  // server secret, hex, 32 characters. Nothing a client sends appears in a key in clear.
  std::string KeyToken(std::string_view data) const;

  // Sold-out flags: set by a sold-out reply with nothing left, cleared by any registry change,
  // and lapsing after settings.sold_out_ttl_ms (units released back are sold again).
  bool IsSoldOut(std::string_view activity_id) const;
  void MarkSoldOut(std::string_view activity_id);

  // Rate-limit refusals still in force, by limiter key: answered without Redis until they pass.
  int64_t RefusedUntil(const std::string& limiter_key) const;
  void RememberRefusal(const std::string& limiter_key, int64_t until_ms);

 private:
  const ServiceSettings& settings_;
  redis::ScriptRunner& runner_;
  keyspace::ActivityScripts activity_scripts_;
  ReserveCoalescer reserves_;  // send through activity_scripts_, so destroyed before it
  DrawCoalescer draws_;
  keyspace::RateLimiter limiter_;
  keyspace::OrderStream order_stream_;
  keyspace::DrawQueue draw_queue_;
  keyspace::IdempotencyRecords idempotency_;
  store::Store& store_;
  boost::asio::any_io_executor db_executor_;
  ActivityRegistry& registry_;
  const base::Clock& clock_;
  base::Random& random_;
  base::OrderIdGenerator ids_;
  std::string key_ids_key_;  // DeriveKey(secret, "key-ids")
  core::CacheKeys cache_keys_;
  std::unique_ptr<redis::ReplicaWait> replica_wait_;
  SnapshotPtr snapshot_;
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  // Activity id -> until when (clock ms) it is answered sold out locally.
  std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> sold_out_;
  std::unordered_map<std::string, int64_t> refused_until_;
  // The guards of the activities this thread met (owned by the watch, live as long as it).
  std::unordered_map<std::string, class ActivityGuard*, StringHash, std::equal_to<>> guards_;
  class ActivityGuard* GuardOf(std::string_view activity_id);
};

template <typename F>
boost::asio::awaitable<std::invoke_result_t<const F&, store::Store&>> ServiceContext::OnDb(
    const F& function) {
  const auto job = [&store = store_, function] { return function(store); };
  auto result = co_await RunBlocking(db_executor_, job, settings_.db_timeout);
  if (!result) {
    co_return base::MakeError(base::ErrorCode::kUnavailable,
                              "the database ({}) did not answer within {} ms", store_.Describe(),
                              settings_.db_timeout.count());
  }
  co_return std::move(*result);
}

}  // namespace flashsale::service
