#pragma once
// The service's metrics, in Prometheus text format at /metrics: requests by route and status
// word, a latency histogram per route, refusals answered without Redis, and the Redis
// connections' own counters and latency. Each I/O thread writes its own shard; the scrape sums.

#include <array>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

#include "base/metrics.h"
#include "redis/connection.h"
#include "server/reply.h"
#include "service/purchase.h"
#include "service/script_batches.h"

namespace flashsale::server {

std::string_view RouteName(RouteId route);

class MetricsShard {
 public:
  void Request(RouteId route, Word word, std::chrono::nanoseconds latency);
  void LocalRefusal(service::LocalReason reason);

 private:
  friend class Metrics;
  static constexpr size_t kRoutes = static_cast<size_t>(RouteId::kCount);
  static constexpr size_t kWords = static_cast<size_t>(Word::kCount);
  std::array<std::array<base::Counter, kWords>, kRoutes> requests_;
  std::array<base::LatencyHistogram, kRoutes> latency_;
  std::array<base::Counter, 6> local_refusals_;  // by service::LocalReason
  const redis::ConnectionStats* redis_ = nullptr;
  const service::ReserveCoalescer* reserves_ = nullptr;
  const service::DrawCoalescer* draws_ = nullptr;
};

class Metrics {
 public:
  // A shard for one I/O thread; `redis` is that thread's connection's stats, `reserves` and
  // `draws` its coalescers (each may be null).
  MetricsShard& AddShard(const redis::ConnectionStats* redis,
                         const service::ReserveCoalescer* reserves = nullptr,
                         const service::DrawCoalescer* draws = nullptr);
  // Extra lines appended by other parts (e.g. the order pipeline's lag), called at scrape time.
  void AddSource(std::function<void(std::string&)> source);
  std::string RenderPrometheus() const;

 private:
  mutable std::mutex mutex_;
  std::deque<MetricsShard> shards_;  // deque: addresses stay valid
  std::vector<std::function<void(std::string&)>> sources_;
};

}  // namespace flashsale::server
