#pragma once
// Queue consumers of lotteries with an admission queue (keyspace/draw_queue.h, S3-3, S3-4). Each
// pass goes over the registry's queued lotteries:
//   - admission "queue": any number of consumers read through the group "draw"; entries pending
//     longer than claim_idle (their consumer presumed dead) are claimed;
//   - admission "fifo" (strict first come, first served): only the holder of the activity's
//     queue lock reads (one consumer at a time, keyspace/lock.h). It extends its lease every pass
//     (the watchdog), takes over whatever a previous holder left pending first, and draws one
//     entry after another with its fencing token, so a holder that lost the lock while paused has
//     its late draws refused.
// Each entry runs the same draw script as a direct draw, with the ticket as order id and
// idempotency key: the outcome lands on the ticket in the same atomic call, and a redelivered
// entry (its consumer died after the draw, before the acknowledgement) replays that outcome
// instead of drawing again. Decided entries are acknowledged and deleted.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "base/metrics.h"
#include "keyspace/lock.h"
#include "service/context.h"

namespace flashsale::service {

struct QueueConsumerOptions {
  std::string name;  // unique among the consumers of one Redis
  int64_t batch = 100;
  std::chrono::milliseconds claim_idle{30000};
  std::chrono::milliseconds lock_ttl{5000};     // a fifo consumer's lease
  std::chrono::milliseconds lock_extend{1000};  // extended this often while held
};

struct QueueMetrics {
  base::Counter decided;  // queued draws decided
  base::Counter claimed;  // entries taken over from consumers presumed dead
  base::Counter fenced;   // draws refused because the lock had moved on
  base::Counter malformed;
};

class DrawQueueConsumer {
 public:
  DrawQueueConsumer(ServiceContext& context, QueueConsumerOptions options, QueueMetrics& metrics);

  // One pass over the queued lotteries; the number of entries decided.
  boost::asio::awaitable<int64_t> Pass(const bool* stop);
  // Releases the fifo locks held (on a clean stop).
  boost::asio::awaitable<void> ReleaseLocks();

 private:
  struct Held {
    keyspace::Lease lease;
    std::chrono::steady_clock::time_point next_extend;
  };
  boost::asio::awaitable<int64_t> PassFifo(const store::ActivityRecord& activity, const bool* stop);
  // Draws the entries in order; stops at the first that could not be decided (left pending).
  // The number decided.
  boost::asio::awaitable<int64_t> Decide(const store::ActivityRecord& activity,
                                         const std::vector<keyspace::StreamEntry>& entries,
                                         int64_t fence, const bool* stop);

  ServiceContext& context_;
  QueueConsumerOptions options_;
  QueueMetrics& metrics_;
  std::map<std::string, bool> groups_ready_;
  std::map<std::string, Held> held_;  // fifo activities whose lock this consumer holds
  std::chrono::steady_clock::time_point next_claim_{};
};

}  // namespace flashsale::service
