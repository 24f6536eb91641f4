#pragma once
// The lost-write repair after Redis restarted or failed over (issue "When Redis fails", point 3),
// run once per Redis process (run_id) across all instances, and how a frozen instance learns
// that it ran (service/redis_watch.h).
//
// Two kinds of freeze end here (service/redis_watch.h, service/activity_guard.h):
//
// An activity frozen because its Redis held less of its write sequence than the floor
// (ResolveFrozenActivities): if Redis holds an epoch above the floor it froze at, a repair ran
// (here or on another instance: only a repair writes an epoch) and it is thawed. Otherwise, when
// allowed (the instance runs jobs), under the repair lock: the activity's sequence as Redis holds
// it is read (what the repair is bound to), the record's fence advanced (no order batch read
// before can be written any more), the activity reconciled with repairs after an event
// (service/reconcile.h: live orders Redis lost applied again, the activity rebuilt if Redis lost
// it whole, oversold units counted and flagged), and as the last step its sequence re-based to
// the new epoch (activity_write_rebase.lua), unless Redis fell behind what the repair read
// meanwhile: then nothing is thawed and the next round repairs it again.
//
// A server's event, a run_id change or a promotion (ResolveRedisEvent, while the watch has
// servers pending):
//   1. takes the servers the watch has seen and not confirmed (one on a single server; on a
//      cluster, one per node that restarted or took over slots);
//   2. if the marker <namespace>:redis:repaired:{<run_id>} of each (keyspace::ServiceState) exists
//      under an epoch at least the record's fence when the event was first handled, a repair for
//      these servers ran since the event (here or on another instance): the watch is confirmed
//      and their activities sell again;
//   3. otherwise, when allowed, takes the repair lock (one repair at a time across instances),
//      advances the record's fence, and repairs every activity of the record that those servers
//      hold (one server: all; a cluster: those whose slot a pending node serves), each as above
//      (re-based last); then writes a marker for each server that is still the one the repair
//      began with (a server that changed while it ran is another event: repaired next round),
//      and confirms those.

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>

#include "base/result.h"
#include "service/context.h"
#include "service/redis_watch.h"

namespace flashsale::service {

// Once after each confirmed event or thawed activity (RedisWatch::TakeLostCheckDue): the orders
// this instance acknowledged (RedisWatch::Acknowledged) that exist neither in Redis's order
// records nor in the record are counted as acknowledged and lost (admin status, /metrics). An
// order that left a trace in Redis (an idempotency record or a stream entry naming it) was
// counted by the repair already (ReconcileReport::acknowledged_lost) and is not counted again.
boost::asio::awaitable<void> CountAcknowledgedLost(ServiceContext& context, RedisWatch& watch);

// True when the watch is (now) confirmed for the server behind `context`'s connection.
boost::asio::awaitable<base::Result<bool>> ResolveRedisEvent(ServiceContext& context,
                                                             RedisWatch& watch, bool may_repair);

// The activities frozen for their write sequence: each thawed once Redis shows a repair since,
// or (`may_repair`) repaired here. Does nothing when none is frozen.
boost::asio::awaitable<void> ResolveFrozenActivities(ServiceContext& context, RedisWatch& watch,
                                                     bool may_repair);

}  // namespace flashsale::service
