#pragma once
// A distributed lock's lease kept alive while a run works: the lease is taken short and extended
// every `every` by a coroutine of its own, so a holder that dies (its process, or the Redis that
// held the lease, restarted from its AOF with the lease in it) blocks the next holder for at most
// one lease, not for however long the run might take. When an extension fails (the lease ran out
// or another holder has the lock, or Redis did not answer) the keeper marks the lease lost; the
// run checks lost() between its steps and stops.
//
// Used by the jobs (service/jobs.cc) and the lost-write repair (service/redis_repair.cc).
// Threading: Start, lost and Stop on the executor given to Start.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <utility>

#include "keyspace/lock.h"

namespace flashsale::service {

class LeaseKeeper {
 public:
  // Starts extending `lease` of `lock` to `ttl` every `every` (every < ttl).
  static std::shared_ptr<LeaseKeeper> Start(boost::asio::any_io_executor executor,
                                            std::shared_ptr<keyspace::DistributedLock> lock,
                                            keyspace::Lease lease, std::chrono::milliseconds ttl,
                                            std::chrono::milliseconds every);

  // True once an extension failed: the run no longer holds the lock.
  bool lost() const { return lost_; }
  // The run is done: no extension after this (the lease is the caller's to release).
  void Stop();

  // Ends the keeping when it goes out of scope, however the run ends (an exception thrown
  // through the run's coroutine, or its frame destroyed with its io_context): no extension after
  // the next tick. It only sets the flag (no timer call, safe during an io_context's shutdown);
  // the run's own Stop() also wakes the keeper at once.
  class Guard {
   public:
    explicit Guard(std::shared_ptr<LeaseKeeper> keeper) : keeper_(std::move(keeper)) {}
    ~Guard() { keeper_->done_ = true; }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    std::shared_ptr<LeaseKeeper> keeper_;
  };

  explicit LeaseKeeper(boost::asio::any_io_executor executor) : timer_(std::move(executor)) {}

 private:
  // Extends until Stop or a failed extension; holds the keeper and the lock meanwhile.
  static boost::asio::awaitable<void> Run(std::shared_ptr<LeaseKeeper> self,
                                          std::shared_ptr<keyspace::DistributedLock> lock,
                                          keyspace::Lease lease, std::chrono::milliseconds ttl,
                                          std::chrono::milliseconds every);
  bool done_ = false;
  bool lost_ = false;
  boost::asio::steady_timer timer_;
};

}  // namespace flashsale::service
