#pragma once
// Startup checks on the Redis a serve or worker is given.

#include "base/result.h"
#include "redis/connection.h"

namespace flashsale::app {

// Refuses a Redis whose maxmemory-policy may evict keys without a TTL (allkeys-*): stock, buyers
// and order intents have none, and an evicted one oversells or loses orders silently. noeviction
// (writes fail loudly when memory is full) and volatile-* (only keys with a TTL: idempotency
// answers and tickets) pass. With `allow_evicting` the problem is logged as a warning instead.
// A Redis that does not answer CONFIG GET (managed services rename it; or it is down now, which
// /readyz reports) passes with a warning that the policy could not be checked.
base::Status CheckEvictionPolicy(const redis::ConnectionOptions& options, bool allow_evicting);

}  // namespace flashsale::app
