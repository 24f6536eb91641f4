#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

namespace flashsale::server {

namespace {

constexpr std::array<std::string_view, static_cast<size_t>(RouteId::kCount)> kRouteNames = {
    "purchase", "draw",   "ticket",  "room", "activity",  "orders",   "admin",
    "healthz",  "readyz", "metrics", "page", "preflight", "unmatched"};

constexpr std::array<std::string_view, 6> kLocalReasons = {
    "none", "unknown_activity", "closed", "window", "sold_out", "rate_limited"};

}  // namespace

std::string_view RouteName(RouteId route) { return kRouteNames[static_cast<size_t>(route)]; }

void MetricsShard::Request(RouteId route, Word word, std::chrono::nanoseconds latency) {
  const auto r = static_cast<size_t>(route);
  requests_[r][static_cast<size_t>(word)].Add();
  latency_[r].Record(latency);
}

void MetricsShard::LocalRefusal(service::LocalReason reason) {
  local_refusals_[static_cast<size_t>(reason)].Add();
}

void MetricsShard::Answer(std::string_view activity_id, Word word) {
  std::lock_guard lock(answers_mutex_);
  auto found = answers_.find(activity_id);
  if (found == answers_.end()) {
    if (activity_id.empty() || answers_.size() >= kMaxAnswerActivities) {
      answers_uncounted_.Add();
      return;
    }
    found = answers_.emplace(std::string(activity_id), std::array<int64_t, kWords>{}).first;
  }
  ++found->second[static_cast<size_t>(word)];
}

std::vector<store::AnswerCount> Metrics::TakeAnswers(const service::ActivitySnapshot& known) {
  std::map<std::pair<std::string, std::string_view>, int64_t> sums;
  std::lock_guard lock(mutex_);
  for (MetricsShard& shard : shards_) {
    // The counts are read and zeroed in place, and a known activity's entry stays: the thread
    // counting its next answer allocates nothing (tests/server/alloc_integration_test.cc).
    std::lock_guard counting(shard.answers_mutex_);
    for (auto entry = shard.answers_.begin(); entry != shard.answers_.end();) {
      auto& [id, counts] = *entry;
      if (known.Find(id) == nullptr) {
        entry = shard.answers_.erase(entry);
        continue;
      }
      for (size_t w = 0; w < counts.size(); ++w) {
        if (counts[w] > 0) sums[{id, WordName(static_cast<Word>(w))}] += counts[w];
        counts[w] = 0;
      }
      ++entry;
    }
  }
  std::vector<store::AnswerCount> given_back;
  given_back.swap(answers_given_back_);
  for (store::AnswerCount& count : given_back) {
    if (known.Find(count.activity_id) == nullptr) continue;
    // The word's text from the table of words, so that the key's view outlives `given_back`.
    for (size_t w = 0; w < MetricsShard::kWords; ++w) {
      const std::string_view name = WordName(static_cast<Word>(w));
      if (name == count.word) sums[{count.activity_id, name}] += count.count;
    }
  }
  std::vector<store::AnswerCount> answers;
  answers.reserve(sums.size());
  for (const auto& [key, count] : sums) {
    answers.push_back({.activity_id = key.first, .word = std::string(key.second), .count = count});
  }
  return answers;
}

void Metrics::GiveBackAnswers(std::vector<store::AnswerCount> counts) {
  std::lock_guard lock(mutex_);
  for (store::AnswerCount& count : counts) answers_given_back_.push_back(std::move(count));
}

MetricsShard& Metrics::AddShard(const redis::ConnectionStats* redis,
                                const service::ReserveCoalescer* reserves,
                                const service::DrawCoalescer* draws) {
  std::lock_guard lock(mutex_);
  MetricsShard& shard = shards_.emplace_back();
  shard.redis_ = redis;
  shard.reserves_ = reserves;
  shard.draws_ = draws;
  return shard;
}

void Metrics::AddSource(std::function<void(std::string&)> source) {
  std::lock_guard lock(mutex_);
  sources_.push_back(std::move(source));
}

std::string Metrics::RenderPrometheus() const {
  std::lock_guard lock(mutex_);
  std::string out;
  out.reserve(16384);

  out +=
      "# HELP flashsale_http_requests_total HTTP requests by route and status word.\n"
      "# TYPE flashsale_http_requests_total counter\n";
  for (size_t r = 0; r < MetricsShard::kRoutes; ++r) {
    for (size_t w = 0; w < MetricsShard::kWords; ++w) {
      uint64_t total = 0;
      for (const auto& shard : shards_) total += shard.requests_[r][w].value();
      if (total == 0) continue;
      out += fmt::format("flashsale_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n",
                         kRouteNames[r], WordName(static_cast<Word>(w)), total);
    }
  }

  out +=
      "# HELP flashsale_http_request_duration_seconds Time from a whole request read to its "
      "reply handed to the socket.\n"
      "# TYPE flashsale_http_request_duration_seconds histogram\n";
  for (size_t r = 0; r < MetricsShard::kRoutes; ++r) {
    base::LatencyHistogram::Snapshot sum;
    for (const auto& shard : shards_) sum.Add(shard.latency_[r].Read());
    if (sum.count == 0) continue;
    base::AppendPrometheusHistogram(out, "flashsale_http_request_duration_seconds",
                                    fmt::format("route=\"{}\"", kRouteNames[r]), sum);
  }

  out +=
      "# HELP flashsale_local_refusals_total Purchases answered without a Redis round trip.\n"
      "# TYPE flashsale_local_refusals_total counter\n";
  for (size_t i = 1; i < kLocalReasons.size(); ++i) {
    uint64_t total = 0;
    for (const auto& shard : shards_) total += shard.local_refusals_[i].value();
    out += fmt::format("flashsale_local_refusals_total{{reason=\"{}\"}} {}\n", kLocalReasons[i],
                       total);
  }

  uint64_t uncounted = 0;
  for (const auto& shard : shards_) uncounted += shard.answers_uncounted_.value();
  out += fmt::format(
      "# HELP flashsale_answers_uncounted_total Answers to buyers left out of the report's "
      "counts (more than {} activity ids between two writes of the counts).\n"
      "# TYPE flashsale_answers_uncounted_total counter\n"
      "flashsale_answers_uncounted_total {}\n",
      MetricsShard::kMaxAnswerActivities, uncounted);

  uint64_t commands = 0, unavailable = 0, unknown = 0, remote = 0, timeouts = 0, reconnects = 0;
  base::LatencyHistogram::Snapshot redis_latency;
  for (const auto& shard : shards_) {
    if (shard.redis_ == nullptr) continue;
    commands += shard.redis_->commands.value();
    unavailable += shard.redis_->unavailable.value();
    unknown += shard.redis_->unknown_outcome.value();
    remote += shard.redis_->remote_errors.value();
    timeouts += shard.redis_->timeouts.value();
    reconnects += shard.redis_->disconnects.value();
    redis_latency.Add(shard.redis_->latency.Read());
  }
  out += fmt::format(
      "# HELP flashsale_redis_commands_total Commands sent to Redis.\n"
      "# TYPE flashsale_redis_commands_total counter\n"
      "flashsale_redis_commands_total {}\n"
      "# HELP flashsale_redis_errors_total Redis calls that failed, by kind: unavailable (did "
      "not run), unknown_outcome (sent, no reply), remote (error reply).\n"
      "# TYPE flashsale_redis_errors_total counter\n"
      "flashsale_redis_errors_total{{kind=\"unavailable\"}} {}\n"
      "flashsale_redis_errors_total{{kind=\"unknown_outcome\"}} {}\n"
      "flashsale_redis_errors_total{{kind=\"remote\"}} {}\n"
      "# HELP flashsale_redis_timeouts_total Redis calls that hit their deadline.\n"
      "# TYPE flashsale_redis_timeouts_total counter\n"
      "flashsale_redis_timeouts_total {}\n"
      "# HELP flashsale_redis_disconnects_total Redis links that broke and were remade.\n"
      "# TYPE flashsale_redis_disconnects_total counter\n"
      "flashsale_redis_disconnects_total {}\n"
      "# HELP flashsale_redis_command_duration_seconds Redis command latency, send to reply.\n"
      "# TYPE flashsale_redis_command_duration_seconds histogram\n",
      commands, unavailable, unknown, remote, timeouts, reconnects);
  base::AppendPrometheusHistogram(out, "flashsale_redis_command_duration_seconds", "",
                                  redis_latency);

  // Script calls and the requests they carried, by kind: requests / calls is the mean batch the
  // coalescers formed (base/coalescer.h).
  base::CoalescerStats reserve_calls, draw_calls;
  const auto add = [](base::CoalescerStats& sum, const base::CoalescerStats& one) {
    sum.calls += one.calls;
    sum.requests += one.requests;
    sum.largest_batch = std::max(sum.largest_batch, one.largest_batch);
  };
  for (const auto& shard : shards_) {
    if (shard.reserves_ != nullptr) add(reserve_calls, shard.reserves_->stats());
    if (shard.draws_ != nullptr) add(draw_calls, shard.draws_->stats());
  }
  out += fmt::format(
      "# HELP flashsale_script_calls_total Reserve and draw script calls sent to Redis, each "
      "deciding a batch of one or more requests of one activity.\n"
      "# TYPE flashsale_script_calls_total counter\n"
      "flashsale_script_calls_total{{kind=\"reserve\"}} {}\n"
      "flashsale_script_calls_total{{kind=\"draw\"}} {}\n"
      "# HELP flashsale_script_requests_total Requests decided by those calls (divided by the "
      "calls: the mean batch).\n"
      "# TYPE flashsale_script_requests_total counter\n"
      "flashsale_script_requests_total{{kind=\"reserve\"}} {}\n"
      "flashsale_script_requests_total{{kind=\"draw\"}} {}\n"
      "# HELP flashsale_script_largest_batch Most requests one call has carried since the start.\n"
      "# TYPE flashsale_script_largest_batch gauge\n"
      "flashsale_script_largest_batch{{kind=\"reserve\"}} {}\n"
      "flashsale_script_largest_batch{{kind=\"draw\"}} {}\n",
      reserve_calls.calls, draw_calls.calls, reserve_calls.requests, draw_calls.requests,
      reserve_calls.largest_batch, draw_calls.largest_batch);
  for (const auto& source : sources_) source(out);
  return out;
}

}  // namespace flashsale::server
