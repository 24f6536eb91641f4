#pragma once
// The lost-write repair after Redis restarted or failed over (issue "When Redis fails", point 3),
// run once per Redis process (run_id) across all instances, and how a frozen instance learns
// that it ran (service/redis_watch.h).
//
// ResolveRedisEvent, called while this process is frozen:
//   1. takes the run_ids the watch has seen and not confirmed (one on a single server; on a
//      cluster, one per node that restarted or took over slots);
//   2. if the marker <namespace>:redis:repaired:{<run_id>} of each (redis::ServiceState, read and
//      written only through it) exists under the record's
//      current fence, the repair for these servers is done (here or on another instance): the
//      watch is confirmed with that epoch and summary, and the sale reopens;
//   3. otherwise, when allowed (the instance runs jobs), takes the repair lock (one repair at a
//      time across instances; the others wait for the markers), advances the record's fence
//      (store::Store::AdvanceFence: from now on no order batch read before it can be written),
//      and reconciles every activity of the record (not of the registry: a fresh instance may not
//      have loaded it) with repairs, after_event (service/reconcile.h): live orders Redis lost
//      applied again, activities it lost rebuilt, oversold units counted and their orders
//      flagged; then writes a marker for every server the process uses (keyed by run_id: a
//      marker written into a server that restarted again meanwhile names a run_id that is gone
//      and frees nothing) and confirms.

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>

#include "base/result.h"
#include "service/context.h"
#include "service/redis_watch.h"

namespace flashsale::service {

// Once after each confirmed event (RedisWatch::TakeLostCheckDue): the orders this instance
// acknowledged (RedisWatch::Acknowledged) that exist neither in Redis's order records nor in the
// record are counted as acknowledged and lost on the event (admin status, /metrics). Called by
// ResolveRedisEvent when it confirms. A lost order that also left a trace the repair counted (an
// idempotency record or stream entry) is counted by both.
boost::asio::awaitable<void> CountAcknowledgedLost(ServiceContext& context, RedisWatch& watch);

// True when the watch is (now) confirmed for the server behind `context`'s connection.
boost::asio::awaitable<base::Result<bool>> ResolveRedisEvent(ServiceContext& context,
                                                             RedisWatch& watch, bool may_repair);

}  // namespace flashsale::service
