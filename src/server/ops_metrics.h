#pragma once
// The parts of /metrics an operator's Prometheus expects besides the service's own counters
// (metrics.h), gathered at scrape time: the process_* families (CPU, memory, descriptors, start
// time), flashsale_build_info, whether Redis and the database answer now (1/0), and per activity
// the units remaining and held in Redis, the live units in the record, and whether the activity
// is frozen.
//
// flashsale_activity_frozen is 1 for an activity whose sale this service has stopped on its own
// (a Redis failure it could not rule out an oversell after). Nothing in this service freezes a
// sale yet, so the gauge is 0 for every activity until that exists (ActivitySample::frozen in
// ops_metrics.cc is where a freeze is to be reported); alert rules and the dashboard watch it.

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
