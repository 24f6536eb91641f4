#pragma once
// The parts of /metrics an operator's Prometheus expects besides the service's own counters
// (metrics.h), gathered at scrape time: the process_* families (CPU, memory, descriptors, start
// time), flashsale_build_info, whether Redis and the database answer now (1/0), and per activity
// the units remaining and held in Redis, the live units in the record, and whether the activity
// is frozen.
//
// flashsale_activity_frozen is 1 while this service refuses the activity's purchases and draws
// because Redis restarted or failed over and the lost-write repair has not run yet
// (service/redis_watch.h; the freeze holds every activity of the process); alert rules and the
// dashboard watch it.

#include <boost/asio/awaitable.hpp>
#include <string>

#include "service/context.h"

namespace flashsale::server {

// Appends the families above to `out` (Prometheus text format). Per-activity gauges cover the
// activities of this thread's registry snapshot; an activity Redis does not answer for has no
// remaining/reserved sample, one the database does not answer for no persisted sample.
boost::asio::awaitable<void> AppendOperatorMetrics(service::ServiceContext& context,
                                                   std::string& out);

}  // namespace flashsale::server
