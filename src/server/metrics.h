#pragma once
// The service's metrics, in Prometheus text format at /metrics: requests by route and status
// word, a latency histogram per route, refusals answered without Redis, and the Redis
// connections' own counters and latency. Each I/O thread writes its own shard; the scrape sums.

#include <array>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/metrics.h"
#include "redis/connection.h"
#include "server/reply.h"
#include "service/purchase.h"
#include "service/registry.h"
#include "service/script_batches.h"
#include "store/store.h"

namespace flashsale::server {

std::string_view RouteName(RouteId route);

class MetricsShard {
 public:
  void Request(RouteId route, Word word, std::chrono::nanoseconds latency);
  void LocalRefusal(service::LocalReason reason);
  // An answer to a buyer of `activity_id` on a purchase or draw route, counted for the report
  // after the sale (Metrics::TakeAnswers). At most kMaxAnswerActivities ids at once (a take drops
  // the ids that name no activity); an answer about one more is not counted
  // (flashsale_answers_uncounted_total).
  void Answer(std::string_view activity_id, Word word);

  static constexpr size_t kMaxAnswerActivities = 4096;

 private:
  friend class Metrics;
  static constexpr size_t kRoutes = static_cast<size_t>(RouteId::kCount);
  static constexpr size_t kWords = static_cast<size_t>(Word::kCount);
  struct IdHash {
    using is_transparent = void;
    size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
  };
  using AnswerCounts =
      std::unordered_map<std::string, std::array<int64_t, kWords>, IdHash, std::equal_to<>>;
  std::mutex answers_mutex_;  // this thread counts, the flusher takes
  AnswerCounts answers_;      // guarded by answers_mutex_
  base::Counter answers_uncounted_;
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

  // The answers every shard counted since the last take, and those given back, summed per
  // activity and word, for the activities of `known` (answers about an id that names no activity,
  // e.g. a mistyped URL, are left out: the record keeps only real activities' rows). Moved out.
  std::vector<store::AnswerCount> TakeAnswers(const service::ActivitySnapshot& known);
  // Counts whose write failed, kept for the next take.
  void GiveBackAnswers(std::vector<store::AnswerCount> counts);

 private:
  mutable std::mutex mutex_;
  std::vector<store::AnswerCount> answers_given_back_;  // guarded by mutex_
  std::deque<MetricsShard> shards_;                     // deque: addresses stay valid
  std::vector<std::function<void(std::string&)>> sources_;
};

}  // namespace flashsale::server
