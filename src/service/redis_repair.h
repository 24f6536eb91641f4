#pragma once
// The lost-write repair after Redis restarted or failed over (issue "When Redis fails", point 3),
// run once per Redis process (run_id) across all instances, and how a frozen instance learns
// that it ran (service/redis_watch.h).
//
// ResolveRedisEvent, called while this process is frozen:
//   1. asks the server behind its own connection for its run_id (INFO server);
//   2. if the marker <namespace>:redis:repaired:{<run_id>} exists (redis::ServiceState, read and
//      written only through it), the repair for this server is
//      done (here or on another instance): the watch is confirmed with the marker's epoch and
//      summary, and the sale reopens;
//   3. otherwise, when allowed (the instance runs jobs), takes the repair lock (one repair at a
//      time across instances; the others wait for the marker), advances the record's fence
//      (store::Store::AdvanceFence: from now on no order batch read before it can be written),
//      and reconciles every activity of the record (not of the registry: a fresh instance may not
//      have loaded it) with repairs, after_event (service/reconcile.h): live orders Redis lost
//      applied again, activities it lost rebuilt, oversold units counted and their orders
//      flagged; then writes the marker (keyed by the run_id it repaired: a marker written into a
//      server that restarted again meanwhile names the wrong run_id and frees nothing) and
//      confirms.

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>

#include "base/result.h"
#include "service/context.h"
#include "service/redis_watch.h"

namespace flashsale::service {

// True when the watch is (now) confirmed for the server behind `context`'s connection.
boost::asio::awaitable<base::Result<bool>> ResolveRedisEvent(ServiceContext& context,
                                                             RedisWatch& watch, bool may_repair);

}  // namespace flashsale::service
