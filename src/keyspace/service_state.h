#pragma once
// What the service keeps in Redis besides the activity scripts' state, as typed calls: the
// registry version every instance polls, each scheduled job's period claim, the lost-write
// repair's marker, the reconciliation report and missing-since mark of an activity, its oversold
// count, and the query cache. The service sends no Redis command of its own: it calls these (or
// the script bindings, activity_scripts.h), and every key they touch is named by NamespaceKeys or
// ActivityKeys.
//
// Each call is one single-key command with the connection's deadline, so in a Redis Cluster it
// goes to the key's node; failures carry the connection's codes (connection.h).

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "redis/connection.h"

namespace flashsale::keyspace {

// Keys of a namespace that belong to no activity:
//   <ns>:registry:version          string  bumped (INCR) on every admin change; instances poll it
//   <ns>:jobs:{<job>}:lock, :fence the job's distributed lock and fencing counter (lock.h); the
//                                  lost-write repair is the job "repair"
//   <ns>:jobs:{<job>}:next         string  the current period's claim of a scheduled job
//                                  (SET NX PX)
//   <ns>:redis:repaired:{<run_id>} hash    the lost-write repair's marker for one Redis process
//   <ns>:idem:{<token>}            string  the claim of an Idempotency-Key (token = HMAC of user
//                                  and key): the request it was first used with,
//                                  "<activity>|<purchase|draw>|<quantity>", kept the idempotency
//                                  TTL while its request made something (keyspace/idempotency.h)
// The query cache's keys are named by core::CacheKeys (core/cache_key.h).
class NamespaceKeys {
 public:
  explicit NamespaceKeys(std::string_view key_namespace);

  const std::string& registry_version() const { return registry_version_; }
  std::string JobLock(std::string_view job) const;
  std::string JobFence(std::string_view job) const;
  std::string JobClaim(std::string_view job) const;
  std::string RepairMarker(std::string_view run_id) const;
  std::string IdempotencyClaim(std::string_view token) const;

 private:
  std::string namespace_;
  std::string registry_version_;
};

// The marker the lost-write repair leaves for one Redis process (its run_id): the repair is done
// for that server, under the record's fence `epoch`, with this summary.
struct RepairMarker {
  std::string run_id;
  int64_t epoch = 0;
  std::vector<std::string> activities;  // the activities repaired
  int64_t orders_applied = 0;
  int64_t units_applied = 0;
  int64_t rebuilt = 0;
  int64_t oversold_units = 0;
  int64_t flagged_orders = 0;
  int64_t acknowledged_lost = 0;
  int64_t repaired_ms = 0;
};

// The marker's hash fields, and back (a field missing or not a number reads as 0).
std::vector<std::pair<std::string, std::string>> RepairMarkerFields(const RepairMarker& marker);
RepairMarker ParseRepairMarker(const std::map<std::string, std::string, std::less<>>& fields);

class ServiceState {
 public:
  // `connection` must outlive this object; calls run on its thread.
  ServiceState(redis::Connection& connection, std::string_view key_namespace);

  const NamespaceKeys& keys() const { return keys_; }

  // The registry version: bumped after an admin change, read by every instance's poller
  // ("" while no change was ever announced).
  boost::asio::awaitable<base::Result<int64_t>> BumpRegistryVersion();
  boost::asio::awaitable<base::Result<std::string>> RegistryVersion();

  // Claims this period of a scheduled job for this instance: true for the one caller that claims
  // it; the claim expires after `period`.
  boost::asio::awaitable<base::Result<bool>> ClaimJobPeriod(std::string_view job,
                                                            std::chrono::milliseconds period);

  // The repair marker of `run_id`, if there is one.
  boost::asio::awaitable<base::Result<std::optional<RepairMarker>>> ReadRepairMarker(
      std::string_view run_id);
  boost::asio::awaitable<base::Status> WriteRepairMarker(const RepairMarker& marker);

  // The last reconciliation report of an activity (JSON), kept for the admin API.
  boost::asio::awaitable<base::Status> KeepReconcileReport(std::string_view activity_id,
                                                           std::string_view json);
  boost::asio::awaitable<base::Result<std::optional<std::string>>> ReconcileReport(
      std::string_view activity_id);
  // Units the lost-write repair found sold twice (the `oversold` field of meta; 0 when none).
  boost::asio::awaitable<base::Result<int64_t>> OversoldUnits(std::string_view activity_id);

  // Marks an activity missing from Redis since `now_ms` unless it is marked already (the mark
  // expires after `ttl`): the time of the first mark, on any instance.
  boost::asio::awaitable<base::Result<int64_t>> MarkMissing(std::string_view activity_id,
                                                            int64_t now_ms,
                                                            std::chrono::milliseconds ttl);
  boost::asio::awaitable<base::Status> ClearMissing(std::string_view activity_id);
  // Whether the activity is marked missing (a rebuild that stopped before it cleared the mark).
  boost::asio::awaitable<base::Result<bool>> IsMarkedMissing(std::string_view activity_id);

  // The query cache: a value under a key of core::CacheKeys, nothing on a miss; Put keeps it for
  // `ttl_s` seconds.
  boost::asio::awaitable<base::Result<std::optional<std::string>>> CacheGet(std::string_view key);
  boost::asio::awaitable<base::Status> CachePut(std::string_view key, std::string_view value,
                                                int64_t ttl_s);

 private:
  redis::Connection& connection_;
  std::string namespace_;
  NamespaceKeys keys_;
};

}  // namespace flashsale::keyspace
