#pragma once
// Runs order consumers (order_consumer.h), each on a thread of its own with its own Redis
// connection (at ConsumerOptions::nice), and beside them one more thread at the process's
// priority for the admission queues' consumer, the registry poll and the scheduled jobs (the
// lost-write repair among them), inside `flashsale serve` or as `flashsale worker`. Any number of
// them, in any number of processes on any hosts, may run against one Redis and one database.

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "redis/connection.h"
#include "service/context.h"
#include "service/event_relay.h"
#include "service/order_consumer.h"
#include "service/registry.h"
#include "store/store.h"

namespace flashsale::service {

struct PipelineDeps {
  redis::ConnectionOptions redis;
  store::Store* store = nullptr;
  boost::asio::any_io_executor db_executor;
  ActivityRegistry* registry = nullptr;
  const ServiceSettings* settings = nullptr;
  const base::Clock* clock = nullptr;
  RandomFactory random = MakeSecureRandom;  // each consumer thread's (queued draws, lock tokens)
  PipelineMetrics* metrics = nullptr;
  JobSchedule jobs;       // run by the jobs' thread (zero periods: none)
  RelayOptions webhooks;  // run by the jobs' thread (service/event_relay.h); no receivers: none
};

class OrderPipeline {
 public:
  // `options.name` is a prefix; consumer i is "<prefix>-<i>" (the queues' consumer is
  // "<prefix>"). With `poll_registry`, the jobs' thread also keeps the registry fresh (a worker
  // has no HTTP server to do it). No consumers: no threads at all.
  OrderPipeline(PipelineDeps deps, ConsumerOptions options, int consumers, bool poll_registry,
                std::chrono::milliseconds registry_poll);
  ~OrderPipeline();
  OrderPipeline(const OrderPipeline&) = delete;
  OrderPipeline& operator=(const OrderPipeline&) = delete;

  // Loads the registry (when polling it) and starts the threads.
  base::Status Start();
  // Consumers finish the batch in hand (a batch waiting for the database is left pending for
  // others to claim), then the threads end. Idempotent.
  void Stop();

  // "<host>-<pid>": unique per process on a host, so unique among a Redis's consumers.
  static std::string DefaultName();

  // Sets the calling thread's nice value (Linux: per thread); false with a warning logged when
  // the system refuses. For the consumers' threads (ConsumerOptions::nice).
  static bool LowerThreadPriority(int nice);

 private:
  class Runner;
  PipelineDeps deps_;
  ConsumerOptions options_;
  int consumers_;
  bool poll_registry_;
  std::chrono::milliseconds registry_poll_;
  std::vector<std::unique_ptr<Runner>> runners_;
};

}  // namespace flashsale::service
