#pragma once
// A distributed lock on one Redis key (S0-5), done right:
//   - taken with SET NX PX and a token unique to the holder;
//   - extended and released only through compare-and-act scripts, so a holder whose lease ran
//     out can never extend or delete the lease of whoever holds the lock now;
//   - each holder gets a fencing token (a counter that only grows, INCR in the same script that
//     takes the lock): writes that must not come from a stale holder carry it and are checked
//     against the newest (e.g. lottery_draw.lua's fence);
//   - a watchdog (LockWatchdog) extends the lease while the work runs and tells the work when
//     the lock is lost, so it stops.
// Every call has the connection's timeout; a call whose outcome is unknown is reported so.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/random.h"
#include "base/result.h"
#include "redis/scripts.h"

namespace flashsale::keyspace {

struct Lease {
  std::string key;
  std::string token;  // unique to this holder
  int64_t fence = 0;  // the fencing token
};

class DistributedLock {
 public:
  // `lock_key` and `fence_key` must be in one Redis Cluster slot (share a hash tag).
  DistributedLock(redis::ScriptEvaluator& runner, std::string lock_key, std::string fence_key);

  // The lease, or nothing when another holder has the lock.
  boost::asio::awaitable<base::Result<std::optional<Lease>>> TryAcquire(
      base::Random& random, std::chrono::milliseconds ttl);
  // True when extended; false when the lease is lost (expired, or taken by another).
  boost::asio::awaitable<base::Result<bool>> Extend(const Lease& lease,
                                                    std::chrono::milliseconds ttl);
  // True when released; false when this lease no longer held the lock (nothing was deleted).
  boost::asio::awaitable<base::Result<bool>> Release(const Lease& lease);

 private:
  redis::ScriptEvaluator& runner_;
  std::string lock_key_;
  std::string fence_key_;
  const redis::Script& acquire_;
  const redis::Script& extend_;
  const redis::Script& release_;
  // Reply fields (each script's RETURNS).
  redis::IntField acquired_, fence_or_ttl_ms_, extended_, released_;
};

}  // namespace flashsale::keyspace
