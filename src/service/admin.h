#pragma once
// Operator actions. The database holds the record of every activity; Redis gets each change
// through the setup and add-stock scripts; every change INCRs the registry version so all
// instances reload, and this instance reloads before the call returns.
//
// Order of writes, chosen so a failure half-way can undersell but never oversell:
//   create     Redis (setup, loads the stock) then the database. A failure after Redis leaves an
//              activity Redis has and no registry knows, so nothing sells it; creating it again
//              finds the stock loaded and only updates its definition.
//   update     the database then Redis (definition only, never stock).
//   add stock  the database then Redis. A failure after the database leaves fewer units in Redis
//              than recorded: reported to the operator, and the difference is simply not sold.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "keyspace/activity_scripts.h"
#include "service/activity_guard.h"
#include "service/context.h"

namespace flashsale::service {

struct ActivityState {
  store::ActivityRecord record;
  std::optional<keyspace::ActivityStatus> redis;  // nothing: Redis did not answer (see redis_error)
  std::string redis_error;
  std::optional<keyspace::GroupInfo> pipeline;  // the order stream's consumer group
  std::optional<store::OrderCounts> persisted;  // nothing: the database did not answer
  std::string reconciliation;  // the last reconciliation report (JSON); empty: none yet
  bool frozen = false;         // purchases and draws wait for the lost-write repair
  FreezeReason frozen_reason = FreezeReason::kNone;  // why (ServiceContext::FrozenReason)
  int64_t oversold_units = 0;  // units Redis sold again before a lost-write repair (meta)
};

// Arguments are references: await these at once, with the arguments alive meanwhile.
boost::asio::awaitable<base::Result<ActivityState>> CreateActivity(ServiceContext& context,
                                                                   const core::Activity& activity);
boost::asio::awaitable<base::Result<ActivityState>> UpdateActivity(
    ServiceContext& context, std::string_view activity_id, const store::ActivityUpdate& update);
boost::asio::awaitable<base::Result<ActivityState>> AddStock(ServiceContext& context,
                                                             std::string_view activity_id,
                                                             int64_t units,
                                                             std::span<const std::string> items);
// Deletes an activity that sold nothing: its Redis keys first (a script that refuses when
// anything was reserved, atomically with the purchases), then its record; then every instance is
// told. kNotFound for an unknown id; kFailedPrecondition when it sold something (nothing changes).
// The record failing after Redis let go leaves an activity Redis lost: retrying the delete
// finishes it (reconciliation would otherwise rebuild it after its grace).
boost::asio::awaitable<base::Status> DeleteActivity(ServiceContext& context,
                                                    std::string_view activity_id);
boost::asio::awaitable<base::Result<ActivityState>> GetActivityState(ServiceContext& context,
                                                                     std::string_view activity_id);
boost::asio::awaitable<base::Result<std::vector<ActivityState>>> ListActivityStates(
    ServiceContext& context);

// Dead letters of an activity's order stream, and putting one back on the stream.
boost::asio::awaitable<base::Result<std::vector<keyspace::StreamEntry>>> ListDeadLetters(
    ServiceContext& context, std::string_view activity_id, int64_t count);
boost::asio::awaitable<base::Result<std::string>> RetryDeadLetter(ServiceContext& context,
                                                                  std::string_view activity_id,
                                                                  std::string_view dead_id);

// Reloads the registry from the database.
boost::asio::awaitable<base::Status> ReloadRegistry(ServiceContext& context);
// Tells every instance an activity changed (INCR of the registry version) and reloads this one's
// registry; failures are logged (other instances see the change once Redis is back).
boost::asio::awaitable<void> Announce(ServiceContext& context);

// Raises this process's floors (service/activity_guard.h) to the record's write marks
// (Store::WrittenSeqs): what any process's pipeline persisted. ReloadRegistry does it before it
// publishes, so an activity this process can sell has a floor at least the record's.
boost::asio::awaitable<base::Status> RaiseFloorsFromRecord(ServiceContext& context);

// Until `*stop`: polls the registry version key every `every` and reloads when it moved (another
// instance changed an activity). Errors are logged and retried at the next tick. `timer` paces
// the polls; cancelling it (after setting *stop) ends the loop at once. While frozen for a Redis
// event or an activity's write sequence, it looks every 100 ms whether the repair ran, and with
// `may_repair` (a process without a job schedule of its own: `serve --consumers 0`) runs it.
boost::asio::awaitable<void> PollRegistry(ServiceContext& context, std::chrono::milliseconds every,
                                          boost::asio::steady_timer& timer, const bool* stop,
                                          bool may_repair = false);

}  // namespace flashsale::service
