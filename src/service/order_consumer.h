#pragma once
// The order pipeline: turns every order intent in the activities' streams into exactly one row in
// the system of record, whatever crashes in between (S3-5, S3-6).
//
// Design note. Each intent goes through the consumer group "persist":
//   1. read a batch (XREADGROUP), or claim entries some dead consumer left pending (XAUTOCLAIM
//      after claim_idle);
//   2. write the batch in ONE database transaction with idempotent inserts (existence check by
//      order id, then INSERT IGNORE / ON CONFLICT DO NOTHING);
//   3. acknowledge (XACK) only after the commit.
// A crash anywhere leaves the entries pending: after a crash before the commit they are written
// by whoever claims them; after the commit but before XACK they are written again, found
// duplicate, and acknowledged. So every intent ends in the database exactly once.
//
// Failures are told apart. The database being down or slow is no fault of the entries: the
// batch is held and retried with backoff (its entries "touched" so nobody claims them), the
// stream absorbs the backlog, and nothing is dead-lettered. A failure of one entry (unreadable,
// or refused: another live order of the same user in a limit-1 activity, i.e. a double sale)
// counts against that entry in Redis (so any consumer sees the count); the entry stays pending
// and is claimed again after claim_idle; after max_deliveries it moves to the dead-letter stream
// with its last error, acknowledged in the same script, and is counted in /metrics.
//
// Trimming removes only entries before the oldest one the group has not acknowledged, so never
// an entry that is not yet in the database.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "keyspace/order_stream.h"
#include "service/burst_gate.h"
#include "service/context.h"
#include "service/draw_queue_consumer.h"
#include "service/event_relay.h"
#include "service/jobs.h"

namespace flashsale::service {

struct ConsumerOptions {
  std::string name;  // unique among the consumers of one Redis (host, pid, index)
  // Stream entries a read asks for (an entry: one intent, or a reserve call's batch of them).
  int64_t batch = 100;
  // While an activity's stream has a backlog (a read came back full), each next read of it asks
  // for twice as many entries, up to this (never below `batch`), while a read's intents are
  // fewer than this: one transaction and one XACK for more orders. Back to `batch` once a read
  // is not full.
  int64_t max_batch = 1000;
  std::chrono::milliseconds idle_poll{20};      // pause when no stream had anything
  std::chrono::milliseconds claim_idle{30000};  // a pending entry this idle is claimed
  std::chrono::milliseconds claim_every{1000};
  std::chrono::milliseconds trim_every{5000};  // also refreshes the gauges
  int64_t max_deliveries = 5;
  std::chrono::milliseconds backoff_max{5000};  // database retries
  // The nice value of the consumer's thread (OrderPipeline: reading, parsing and acknowledging
  // its batches; 0..19). Above 0, a burst's purchases get the CPU first and the backlog drains
  // once it ends: the thread waits for each batch's inserts (on the shared database executor, at
  // the process's priority, so the store's lock is never held by a starved thread), so persisting
  // goes at the pace the lowered thread keeps. The jobs, the lost-write repair and the admission
  // queues run on a thread of their own at the process's priority (docs/durability.md).
  int nice = 0;
  // Burst deferral (service/burst_gate.h): while an activity's stream grows by burst_rate entries
  // a second or more (a reserve call's batch is one entry), it is left unread, for burst_defer at
  // most at once (then read until caught up). 0: off. `flashsale serve` sets
  // --consumer-burst-rate.
  int64_t burst_rate = 0;
  std::chrono::milliseconds burst_defer{10000};
};

// Shared by every consumer of a process; read by /metrics.
struct PipelineMetrics {
  base::Counter persisted;     // orders written
  base::Counter duplicates;    // redeliveries found already written
  base::Counter dead_letters;  // intents moved to dead-letter streams
  base::Counter entry_failures;
  base::Counter db_errors;  // database calls that failed (retried)
  base::Counter claimed;    // entries taken over from other consumers
  base::Counter fenced;     // batches refused by the record's fence (read before a Redis event)
  base::LatencyHistogram batch_latency;
  QueueMetrics queue;  // the lotteries' admission queues (same consumers, same threads)
  JobMetrics jobs;     // prewarm and reconciliation runs of this process
  RelayMetrics relay;  // the order events' relay of this process (webhooks, the broker)

  // Per activity, refreshed by the consumers every trim_every.
  void SetGauges(const std::string& activity_id, const keyspace::GroupInfo& info);
  // Drops the series of activities not in `ids` (deleted ones), here and in `jobs`.
  void KeepOnly(const std::set<std::string>& ids);
  void AppendPrometheus(std::string& out) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, keyspace::GroupInfo> gauges_;
};

class OrderConsumer {
 public:
  // `context` (its database executor, registry, clock) and `source` (keyspace::OrderStream on
  // the thread's Redis connection; an in-process double in unit tests) belong to the consumer's
  // own I/O thread.
  OrderConsumer(ServiceContext& context, keyspace::OrderSource& source, ConsumerOptions options,
                PipelineMetrics& metrics);

  // Until *stop: passes over every activity the registry knows.
  boost::asio::awaitable<void> Run(const bool* stop);

  // One pass: for each activity, read (and, when due, claim), persist, acknowledge; trims and
  // refreshes gauges when due. The number of entries handled. For Run and for tests.
  boost::asio::awaitable<int64_t> Pass(const bool* stop);

 private:
  // `fence`: the record's epoch the batch was read under (service/redis_watch.h), if any.
  // `redelivered`: some of `intents` were claimed (delivered before, so their entries may have
  // failure counts to forget once written); entries read as new have none.
  boost::asio::awaitable<void> Process(const store::ActivityRecord& activity,
                                       std::vector<keyspace::OrderIntent> intents, bool redelivered,
                                       std::optional<int64_t> fence, const bool* stop);
  // The batch's outcomes; retries while the database is unavailable. Given up with kCancelled
  // (told to stop), or with detail kFenced (the record's fence refused it) or kEntriesLost (its
  // entries are no longer this consumer's); any other error is not unavailability (then the
  // entries are tried one by one). `orders`
  // is shared with the database thread's job (which may outlive a timed-out wait), not copied;
  // `ids`: the entries they came from, each once (kept from being claimed while it retries).
  using Orders = std::shared_ptr<const std::vector<store::OrderRecord>>;
  boost::asio::awaitable<base::Result<std::vector<store::InsertOutcome>>> Insert(
      std::string_view activity_id, const Orders& orders, std::span<const std::string> ids,
      std::optional<int64_t> fence, const bool* stop);
  // Counts a failed delivery of one entry (`parts`: its intents that failed); at max_deliveries
  // those intents are dead-lettered (with `error`) and the entry acknowledged, before that it
  // stays pending and is claimed again after claim_idle.
  // `refused`: its orders the record refused, written as "refused" events before the move.
  boost::asio::awaitable<void> Fail(std::string_view activity_id, const std::string& entry_id,
                                    const std::vector<int>& parts, const std::string& error,
                                    std::vector<store::RefusedOrder> refused);
  boost::asio::awaitable<void> Pause(std::chrono::milliseconds duration);

  ServiceContext& context_;
  keyspace::OrderSource& source_;
  ConsumerOptions options_;
  PipelineMetrics& metrics_;
  std::map<std::string, bool> groups_ready_;
  std::map<std::string, int64_t> read_count_;  // per activity: the next read's count
  std::map<std::string, BurstGate> bursts_;    // per activity (with options_.burst_rate)
  std::chrono::steady_clock::time_point next_claim_{};
  std::chrono::steady_clock::time_point next_trim_{};
};

// An order intent as the row the record keeps of it, judged against its activity (a win needs its
// draw number and one prize; a sale's intent without the limit it was sold under takes the
// activity's); kInvalidArgument naming the bad field, as for an unreadable intent.
base::Result<store::OrderRecord> OrderRecordOf(const keyspace::OrderIntent& intent,
                                               const store::ActivityRecord& activity);

}  // namespace flashsale::service
