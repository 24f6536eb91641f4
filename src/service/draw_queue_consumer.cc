#include "service/draw_queue_consumer.h"

#include <spdlog/spdlog.h>

#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <csignal>

#include "base/failpoint.h"
#include "base/ids.h"

namespace flashsale::service {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

bool ParseInt(std::string_view text, int64_t& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

bool Queued(const store::ActivityRecord& record) {
  return record.activity.is_lottery() &&
         record.activity.lottery->admission != core::Admission::kDirect;
}

}  // namespace

DrawQueueConsumer::DrawQueueConsumer(ServiceContext& context, QueueConsumerOptions options,
                                     QueueMetrics& metrics)
    : context_(context), options_(std::move(options)), metrics_(metrics) {}

asio::awaitable<int64_t> DrawQueueConsumer::Pass(const bool* stop) {
  const SnapshotPtr snapshot = context_.snapshot();
  const auto now = Clock::now();
  const bool claim_due = now >= next_claim_;
  if (claim_due) next_claim_ = now + options_.claim_idle / 4;
  int64_t decided = 0;
  for (const auto& record : snapshot->all()) {
    if (*stop) break;
    if (!Queued(record)) continue;
    const std::string& id = record.activity.id;
    // Frozen for a lost-write repair: no draw of it until the repair ran.
    if (context_.Frozen(id)) continue;
    if (!groups_ready_[id]) {
      auto created = co_await context_.draw_queue().EnsureGroup(id);
      if (!created.ok()) {
        // kNotFound: deleted since this snapshot was taken (gone from the next one).
        if (created.error().code != base::ErrorCode::kNotFound) {
          spdlog::warn("draw queue of '{}': {}", id, created.error().message);
        }
        continue;
      }
      groups_ready_[id] = true;
    }
    if (record.activity.lottery->admission == core::Admission::kFifo) {
      decided += co_await PassFifo(record, stop);
      continue;
    }
    auto entries = co_await context_.draw_queue().ReadNew(id, options_.name, options_.batch);
    if (!entries.ok()) {
      if (entries.error().detail == base::ErrorDetail::kNoGroup) groups_ready_[id] = false;
      continue;
    }
    if (claim_due) {
      auto claimed = co_await context_.draw_queue().Claim(
          id, options_.name, options_.claim_idle.count(), options_.batch);
      if (claimed.ok() && !claimed->empty()) {
        metrics_.claimed.Add(claimed->size());
        entries->insert(entries->end(), claimed->begin(), claimed->end());
      }
    }
    decided += co_await Decide(record, *entries, 0, stop);
  }
  co_return decided;
}

asio::awaitable<int64_t> DrawQueueConsumer::PassFifo(const store::ActivityRecord& record,
                                                     const bool* stop) {
  const std::string& id = record.activity.id;
  const keyspace::ActivityKeys keys(context_.settings().key_namespace, id);
  keyspace::DistributedLock lock(context_.runner(), keys.queue_lock(), keys.queue_fence());
  auto held = held_.find(id);
  if (held == held_.end()) {
    auto taken = co_await lock.TryAcquire(context_.random(), options_.lock_ttl);
    if (!taken.ok() || !taken->has_value()) co_return 0;
    spdlog::info("queue consumer {} holds the fifo lock of '{}' (fence {})", options_.name, id,
                 (*taken)->fence);
    held = held_.emplace(id, Held{std::move(**taken), Clock::now() + options_.lock_extend}).first;
  } else if (Clock::now() >= held->second.next_extend) {
    // The watchdog: extend while working; a lost lease stops the work at once.
    auto extended = co_await lock.Extend(held->second.lease, options_.lock_ttl);
    if (!extended.ok() || !*extended) {
      spdlog::warn("queue consumer {} lost the fifo lock of '{}'", options_.name, id);
      held_.erase(held);
      co_return 0;
    }
    held->second.next_extend = Clock::now() + options_.lock_extend;
  }
  const int64_t fence = held->second.lease.fence;
  // First whatever an earlier holder left pending (oldest first), then new entries.
  auto pending = co_await context_.draw_queue().Claim(id, options_.name, 0, options_.batch);
  if (!pending.ok()) co_return 0;
  if (!pending->empty()) {
    metrics_.claimed.Add(pending->size());
    co_return co_await Decide(record, *pending, fence, stop);
  }
  auto entries = co_await context_.draw_queue().ReadNew(id, options_.name, options_.batch);
  if (!entries.ok()) {
    if (entries.error().detail == base::ErrorDetail::kNoGroup) groups_ready_[id] = false;
    co_return 0;
  }
  co_return co_await Decide(record, *entries, fence, stop);
}

asio::awaitable<int64_t> DrawQueueConsumer::Decide(
    const store::ActivityRecord& record, const std::vector<keyspace::StreamEntry>& entries,
    int64_t fence, const bool* stop) {
  const std::string& id = record.activity.id;
  std::vector<std::string> done;
  for (const auto& entry : entries) {
    if (*stop) break;
    const std::string_view ticket = entry.Field("ticket");
    const std::string_view user = entry.Field("user_id");
    int64_t admitted_ms = 0;
    if (!base::IsValidId(ticket) || !base::IsValidId(user) ||
        !ParseInt(entry.Field("ts"), admitted_ms)) {
      // No ticket anyone could poll: nothing to answer. Said, counted, and removed.
      spdlog::error("draw queue of '{}': entry {} is malformed; removed", id, entry.id);
      metrics_.malformed.Add();
      done.push_back(entry.id);
      continue;
    }
    // Checked again before each draw: a freeze since the pass began holds the rest back.
    if (context_.Frozen(id)) break;
    const keyspace::DrawRequest draw{
        .order_id = ticket,
        .user_id = user,
        .now_ms = admitted_ms,  // the window is checked at admission time
        .pick = context_.random().Uniform(keyspace::kDrawRandomBound),
        .fallback = context_.random().Uniform(keyspace::kDrawRandomBound),
        .idempotency_token = ticket,
        .idempotency_ttl_ms = context_.settings().idempotency_ttl_ms,
        .fence = fence,
    };
    auto drawn = co_await context_.activity_scripts().AsyncDraw(id, draw, context_.Floor(id),
                                                                asio::use_awaitable);
    if (!drawn.ok()) {
      if (drawn.error().detail == base::ErrorDetail::kFenced) {
        metrics_.fenced.Add();
        spdlog::warn("queue consumer {}: a newer holder has the fifo lock of '{}'", options_.name,
                     id);
        held_.erase(id);
      } else {
        spdlog::warn("draw queue of '{}': {}; entry {} stays pending", id, drawn.error().message,
                     entry.id);
      }
      break;  // in order: nothing after an entry that is not decided yet
    }
    if (!context_.Observe(id, drawn->outcome, drawn->written)) {
      spdlog::warn(
          "draw queue of '{}': Redis is behind the write sequence; entry {} stays "
          "pending until the activity's repair ran",
          id, entry.id);
      break;
    }
    done.push_back(entry.id);
    metrics_.decided.Add();
    // A fault test's SIGKILL between the draw and its acknowledgement.
    if (base::FailpointHit("kill-after-draw")) ::raise(SIGKILL);
  }
  if (!done.empty()) {
    auto acked = co_await context_.draw_queue().Done(id, done);
    if (!acked.ok()) {
      // Left pending: redelivered later, and the draw replays its outcome.
      spdlog::warn("draw queue of '{}': acknowledge: {}", id, acked.error().message);
    }
  }
  co_return static_cast<int64_t>(done.size());
}

asio::awaitable<void> DrawQueueConsumer::ReleaseLocks() {
  for (const auto& [id, held] : held_) {
    const keyspace::ActivityKeys keys(context_.settings().key_namespace, id);
    keyspace::DistributedLock lock(context_.runner(), keys.queue_lock(), keys.queue_fence());
    auto released = co_await lock.Release(held.lease);  // when it fails, the lease expires it
    if (!released.ok()) spdlog::warn("draw queue of '{}': lock: {}", id, released.error().message);
  }
  held_.clear();
}

}  // namespace flashsale::service
