#include "service/order_consumer.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>

#include "base/failpoint.h"
#include "base/strings.h"
#include "service/redis_watch.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::ErrorDetail;
using base::MakeError;
using base::Result;
using Clock = std::chrono::steady_clock;

namespace {

// Insert gave the batch up: the consumer stops (kCancelled), the record's fence refused it, or its
// entries are no longer this consumer's. Nothing more is done with it here (not acknowledged, not
// failed).
bool GivenUp(const base::Error& error) {
  return error.code == ErrorCode::kCancelled || error.detail == ErrorDetail::kFenced ||
         error.detail == ErrorDetail::kEntriesLost;
}

}  // namespace

Result<store::OrderRecord> OrderRecordOf(const keyspace::OrderIntent& intent,
                                         const store::ActivityRecord& activity) {
  if (!intent.readable()) return MakeError(ErrorCode::kInvalidArgument, "{}", intent.unreadable);
  store::OrderRecord order;
  order.order_id = intent.order_id;
  order.user_id = intent.user_id;
  order.activity_id = activity.activity.id;
  order.stream_id = intent.IntentId();
  order.quantity = intent.quantity;
  order.created_ms = intent.created_ms;
  order.items = intent.items;
  order.written = intent.written;
  if (activity.activity.is_lottery()) {
    // A win: one prize, under the user's draw number (the record's one-win-per-draw key).
    if (intent.draw < 1 || order.items.size() != 1 || order.quantity != 1) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "unreadable win: draw {}, prize '{}', quantity {}", intent.draw,
                       base::JoinWords(order.items), order.quantity);
    }
    order.draw_no = intent.draw;
    return order;
  }
  // The per-user limit the order was sold under (S3-10): the record's one-live-order key holds
  // only orders sold under limit 1, whatever the limit is now. An intent without it (written
  // before intents carried it, or appended again from its Redis record by reconciliation) takes
  // the activity's limit as it is now.
  if (intent.limit == keyspace::OrderIntent::kUnreadableNumber) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "unreadable intent: limit (not a whole number of at least 1)");
  }
  const int64_t limit = intent.limit != 0 ? intent.limit : activity.activity.per_user_limit;
  order.single_unit = limit == 1;
  return order;
}

void PipelineMetrics::SetGauges(const std::string& activity_id, const keyspace::GroupInfo& info) {
  std::lock_guard lock(mutex_);
  gauges_[activity_id] = info;
}

void PipelineMetrics::KeepOnly(const std::set<std::string>& ids) {
  {
    std::lock_guard lock(mutex_);
    std::erase_if(gauges_, [&ids](const auto& entry) { return !ids.contains(entry.first); });
  }
  jobs.KeepOnly(ids);
}

void PipelineMetrics::AppendPrometheus(std::string& out) const {
  out += fmt::format(
      "# HELP flashsale_orders_persisted_total Orders written to the database by consumers.\n"
      "# TYPE flashsale_orders_persisted_total counter\n"
      "flashsale_orders_persisted_total {}\n"
      "# HELP flashsale_orders_duplicate_total Redelivered intents found already written.\n"
      "# TYPE flashsale_orders_duplicate_total counter\n"
      "flashsale_orders_duplicate_total {}\n"
      "# HELP flashsale_dead_letters_total Intents moved to a dead-letter stream.\n"
      "# TYPE flashsale_dead_letters_total counter\n"
      "flashsale_dead_letters_total {}\n"
      "# HELP flashsale_order_entry_failures_total Failed deliveries of order stream entries (one "
      "with an intent that failed).\n"
      "# TYPE flashsale_order_entry_failures_total counter\n"
      "flashsale_order_entry_failures_total {}\n"
      "# HELP flashsale_order_db_errors_total Database calls of the pipeline that failed and were "
      "retried.\n"
      "# TYPE flashsale_order_db_errors_total counter\n"
      "flashsale_order_db_errors_total {}\n"
      "# HELP flashsale_orders_claimed_total Intents taken over from consumers presumed dead.\n"
      "# TYPE flashsale_orders_claimed_total counter\n"
      "flashsale_orders_claimed_total {}\n"
      "# HELP flashsale_order_batches_fenced_total Batches read before a Redis restart or "
      "failover, refused by the record's fence.\n"
      "# TYPE flashsale_order_batches_fenced_total counter\n"
      "flashsale_order_batches_fenced_total {}\n"
      "# HELP flashsale_order_batch_duration_seconds Time to persist and acknowledge a batch.\n"
      "# TYPE flashsale_order_batch_duration_seconds histogram\n",
      persisted.value(), duplicates.value(), dead_letters.value(), entry_failures.value(),
      db_errors.value(), claimed.value(), fenced.value());
  base::AppendPrometheusHistogram(out, "flashsale_order_batch_duration_seconds", "",
                                  batch_latency.Read());
  out += fmt::format(
      "# HELP flashsale_queue_draws_total Queued lottery draws decided by queue consumers.\n"
      "# TYPE flashsale_queue_draws_total counter\n"
      "flashsale_queue_draws_total {}\n"
      "# HELP flashsale_queue_claimed_total Queued draws taken over from consumers presumed dead.\n"
      "# TYPE flashsale_queue_claimed_total counter\n"
      "flashsale_queue_claimed_total {}\n"
      "# HELP flashsale_queue_fenced_total Draws refused because the fifo lock had moved on.\n"
      "# TYPE flashsale_queue_fenced_total counter\n"
      "flashsale_queue_fenced_total {}\n"
      "# HELP flashsale_queue_malformed_total Queue entries without a valid ticket, removed.\n"
      "# TYPE flashsale_queue_malformed_total counter\n"
      "flashsale_queue_malformed_total {}\n",
      queue.decided.value(), queue.claimed.value(), queue.fenced.value(), queue.malformed.value());
  jobs.AppendPrometheus(out);
  relay.AppendPrometheus(out);
  std::lock_guard lock(mutex_);
  out +=
      "# HELP flashsale_stream_pending Order stream entries (an order intent, or a reserve call's "
      "batch of them) delivered to a consumer, not yet in the database.\n"
      "# TYPE flashsale_stream_pending gauge\n";
  for (const auto& [id, info] : gauges_) {
    out += fmt::format("flashsale_stream_pending{{activity=\"{}\"}} {}\n", id, info.pending);
  }
  out +=
      "# HELP flashsale_stream_lag Order stream entries (an order intent, or a reserve call's "
      "batch of them) not yet delivered to any consumer.\n"
      "# TYPE flashsale_stream_lag gauge\n";
  for (const auto& [id, info] : gauges_) {
    out += fmt::format("flashsale_stream_lag{{activity=\"{}\"}} {}\n", id, info.lag);
  }
  out +=
      "# HELP flashsale_stream_dead_letters Intents in the activity's dead-letter stream.\n"
      "# TYPE flashsale_stream_dead_letters gauge\n";
  for (const auto& [id, info] : gauges_) {
    out +=
        fmt::format("flashsale_stream_dead_letters{{activity=\"{}\"}} {}\n", id, info.dead_letters);
  }
}

OrderConsumer::OrderConsumer(ServiceContext& context, keyspace::OrderSource& source,
                             ConsumerOptions options, PipelineMetrics& metrics)
    : context_(context), source_(source), options_(std::move(options)), metrics_(metrics) {}

asio::awaitable<void> OrderConsumer::Pause(std::chrono::milliseconds duration) {
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

asio::awaitable<void> OrderConsumer::Run(const bool* stop) {
  spdlog::info("order consumer {} started", options_.name);
  auto backoff = options_.idle_poll;
  while (!*stop) {
    const int64_t handled = co_await Pass(stop);
    if (handled > 0) {
      backoff = options_.idle_poll;
      continue;
    }
    co_await Pause(backoff);
    // Nothing to do (or Redis down): back off a little, up to ten idle polls.
    backoff = std::min(backoff * 2, options_.idle_poll * 10);
  }
  spdlog::info("order consumer {} stopped", options_.name);
}

asio::awaitable<int64_t> OrderConsumer::Pass(const bool* stop) {
  // A frozen activity (its Redis lost writes, or its server changed) is not read until its
  // lost-write repair ran; a batch carries the record's epoch it was read under, so one read
  // before an event is refused by the record once the repair advanced it
  // (store::Store::InsertOrders).
  RedisWatch* watch = context_.settings().redis_watch;
  const std::optional<int64_t> fence =
      watch != nullptr ? std::optional<int64_t>(watch->epoch()) : std::nullopt;
  const SnapshotPtr snapshot = context_.snapshot();
  const auto now = Clock::now();
  const bool claim_due = now >= next_claim_;
  const bool trim_due = now >= next_trim_;
  if (claim_due) next_claim_ = now + options_.claim_every;
  if (trim_due) next_trim_ = now + options_.trim_every;
  int64_t handled = 0;
  if (trim_due) {
    std::set<std::string> ids;
    for (const auto& activity : snapshot->all()) ids.insert(activity.activity.id);
    metrics_.KeepOnly(ids);
  }
  for (const auto& activity : snapshot->all()) {
    if (*stop) break;
    const std::string& id = activity.activity.id;
    if (context_.Frozen(id)) continue;
    if (!groups_ready_[id]) {
      auto created = co_await source_.EnsureGroup(id);
      if (!created.ok()) {
        // kNotFound: deleted since this snapshot was taken (gone from the next one).
        if (created.error().code != ErrorCode::kNotFound) {
          spdlog::warn("order stream of '{}': {}", id, created.error().message);
        }
        continue;
      }
      groups_ready_[id] = true;
    }
    BurstGate& gate =
        bursts_.try_emplace(id, options_.burst_rate, options_.burst_defer).first->second;
    if (options_.burst_rate > 0) {
      // A burst of purchases on it: left unread for now (its claims and trim wait too).
      auto length = co_await source_.Length(id);
      if (length.ok() && gate.Defer(*length, Clock::now())) continue;
    }
    int64_t& count = read_count_[id];
    if (count < options_.batch) count = options_.batch;
    auto entries = co_await source_.ReadNew(id, options_.name, count);
    if (!entries.ok()) {
      // A stream deleted from under us (Redis lost its data): make the group again next pass.
      if (entries.error().detail == ErrorDetail::kNoGroup) groups_ready_[id] = false;
      count = options_.batch;
      continue;
    }
    // A full read means a backlog: the next one takes more (fewer commits and round trips per
    // order while it drains), as long as a read's intents stay under max_batch (an entry holds
    // a reserve call's batch: one intent or dozens).
    const auto read = static_cast<int64_t>(std::count_if(
        entries->begin(), entries->end(), [](const auto& entry) { return entry.part == 0; }));
    const auto intents = static_cast<int64_t>(entries->size());
    if (read < count) {
      gate.CaughtUp();
      count = options_.batch;
    } else if (intents < options_.max_batch) {
      count = std::min(count * 2, std::max(options_.max_batch, options_.batch));
    }
    bool redelivered = false;
    if (claim_due && read < options_.batch) {
      auto claimed = co_await source_.Claim(id, options_.name, options_.claim_idle.count(),
                                            options_.batch - read);
      if (claimed.ok() && !claimed->empty()) {
        metrics_.claimed.Add(claimed->size());
        redelivered = true;
        for (auto& entry : *claimed) entries->push_back(std::move(entry));
      }
    }
    if (!entries->empty()) {
      handled += static_cast<int64_t>(entries->size());
      co_await Process(activity, std::move(*entries), redelivered, fence, stop);
    }
    if (trim_due) {
      auto trimmed = co_await source_.Trim(id);
      if (!trimmed.ok()) spdlog::warn("trim '{}': {}", id, trimmed.error().message);
      gate.Restart();  // shorter now: the next length starts a new window
      auto info = co_await source_.Info(id);
      if (info.ok()) metrics_.SetGauges(id, *info);
    }
  }
  co_return handled;
}

asio::awaitable<void> OrderConsumer::Process(const store::ActivityRecord& activity,
                                             std::vector<keyspace::OrderIntent> intents,
                                             bool redelivered, std::optional<int64_t> fence,
                                             const bool* stop) {
  const auto start = Clock::now();
  const std::string& activity_id = activity.activity.id;
  auto parsed = std::make_shared<std::vector<store::OrderRecord>>();
  std::vector<store::OrderRecord>& orders = *parsed;
  orders.reserve(intents.size());
  // Per order: its entry's id and its place in the entry (an entry may hold a batch's intents).
  std::vector<std::string> ids;
  std::vector<int> parts;
  ids.reserve(intents.size());
  parts.reserve(intents.size());
  // The entries, each once, in the order read (an entry's intents come together): what is
  // acknowledged, or failed, as a whole.
  std::vector<std::string> entry_ids;
  // Entries with an intent that failed this time: the failed parts and the last error.
  std::map<std::string, std::pair<std::vector<int>, std::string>> failed;
  // Per entry: its intents the record refused (a double sale), for their "refused" events.
  std::map<std::string, std::vector<store::RefusedOrder>> refused;
  const auto fail = [&failed](const std::string& id, int part, std::string error) {
    auto& [failed_parts, last_error] = failed[id];
    failed_parts.push_back(part);
    last_error = std::move(error);
  };
  for (auto& intent : intents) {
    if (entry_ids.empty() || entry_ids.back() != intent.entry_id) {
      entry_ids.push_back(intent.entry_id);
    }
    auto order = OrderRecordOf(intent, activity);
    if (!order.ok()) {
      // Counted like any failure: during a rolling upgrade a newer consumer may read it.
      fail(intent.entry_id, intent.part, order.error().message);
      continue;
    }
    orders.push_back(std::move(*order));
    ids.push_back(std::move(intent.entry_id));
    parts.push_back(intent.part);
  }
  const Orders all = std::move(parsed);

  // Per order: written (acknowledge), refused by the record (dead-letter), or failed (leave
  // pending; counted against the entry).
  std::vector<std::optional<store::InsertOutcome>> outcomes(orders.size());
  // (Not a conditional expression: GCC 12 destroys a co_await's result twice in one.)
  Result<std::vector<store::InsertOutcome>> batch = std::vector<store::InsertOutcome>{};
  if (!orders.empty()) batch = co_await Insert(activity_id, all, entry_ids, fence, stop);
  if (!batch.ok() && GivenUp(batch.error())) co_return;
  if (batch.ok()) {
    for (size_t i = 0; i < orders.size(); ++i) outcomes[i] = (*batch)[i];
    // Read from Redis, so Redis held these sequences: this process's floor follows (the record's
    // mark, raised in the same commit, carries it to the other processes).
    core::WriteSeq highest;
    for (const auto& order : orders) highest = std::max(highest, order.written);
    if (!highest.zero()) context_.Observe(activity_id, core::Outcome::kReserved, highest);
  } else {
    // The batch failed for a reason of its own: find which entries, one at a time.
    spdlog::warn("batch of {} for '{}' failed ({}); retrying one by one", orders.size(),
                 activity_id, batch.error().message);
    for (size_t i = 0; i < orders.size(); ++i) {
      const Orders one = std::make_shared<const std::vector<store::OrderRecord>>(
          std::vector<store::OrderRecord>{orders[i]});
      auto single = co_await Insert(activity_id, one, std::span(&ids[i], 1), fence, stop);
      if (!single.ok() && GivenUp(single.error())) co_return;
      if (single.ok()) {
        outcomes[i] = (*single)[0];
      } else {
        fail(ids[i], parts[i], single.error().message);
      }
    }
  }

  for (size_t i = 0; i < orders.size(); ++i) {
    if (!outcomes[i]) continue;
    switch (*outcomes[i]) {
      case store::InsertOutcome::kInserted:
        metrics_.persisted.Add();
        break;
      case store::InsertOutcome::kDuplicate:
        metrics_.duplicates.Add();
        break;
      case store::InsertOutcome::kConflict:
        // A second live order of a user sold under limit 1 (or a second win of one draw): a
        // double sale the record refused (or a cancellation not recorded yet). Retried, then
        // dead-lettered, its units returned to stock: seen, never silently dropped.
        refused[ids[i]].push_back({orders[i].order_id, activity_id});
        fail(ids[i], parts[i],
             fmt::format("user '{}' already has a live order in activity '{}' (per-user limit 1): "
                         "the record refused order {}",
                         orders[i].user_id, activity_id, orders[i].order_id));
        break;
    }
  }
  // An entry is acknowledged once every intent in it is in the record; one with an intent that
  // failed counts one failed delivery (its intents written meanwhile are found duplicate when it
  // comes again), and only the failed intents are dead-lettered.
  std::vector<std::string> to_ack;
  to_ack.reserve(entry_ids.size());
  for (const std::string& id : entry_ids) {
    if (!failed.contains(id)) to_ack.push_back(id);
  }
  for (auto& [id, failure] : failed) {
    co_await Fail(activity_id, id, failure.first, failure.second, refused[id]);
  }

  if (base::FailpointHit("kill-after-commit")) ::raise(SIGKILL);
  // Failure counts exist only for entries delivered before: a failure is counted after a
  // delivery, and an entry that failed stays pending until it is claimed again. So a batch read
  // as new has none to forget, and its acknowledgement is one command.
  auto acked = co_await source_.Ack(activity_id, to_ack, redelivered);
  if (!acked.ok()) {
    // Written but not acknowledged: they come back and are found duplicate. Nothing is lost.
    spdlog::warn("XACK for '{}' failed: {}", activity_id, acked.error().message);
  }
  metrics_.batch_latency.Record(Clock::now() - start);
}

asio::awaitable<Result<std::vector<store::InsertOutcome>>> OrderConsumer::Insert(
    std::string_view activity_id, const Orders& orders, std::span<const std::string> ids,
    std::optional<int64_t> fence, const bool* stop) {
  auto backoff = std::chrono::milliseconds(100);
  for (;;) {
    const auto write = [orders, now_ms = context_.clock().NowMs(), fence](store::Store& store) {
      return store.InsertOrders(*orders, now_ms, fence);
    };
    Result<std::vector<store::InsertOutcome>> outcomes = co_await context_.OnDb(write);
    if (!outcomes.ok() && outcomes.error().detail == ErrorDetail::kFenced) {
      // Fenced: read before a Redis restart or failover that the repair has counted without
      // it. Left pending, never acknowledged: if this Redis still holds the entries, they are
      // claimed and written under the new epoch; if not, they are gone with what Redis lost.
      metrics_.fenced.Add();
      spdlog::warn("{} held order intents of '{}' refused by the record: {}", orders->size(),
                   activity_id, outcomes.error().message);
      // A repair (on any instance, for any activity) advanced the fence: what is read from now
      // on was read after it, and carries its epoch.
      if (RedisWatch* watch = context_.settings().redis_watch) {
        const auto read_fence = [](store::Store& store) { return store.ReadFence(); };
        auto epoch = co_await context_.OnDb(read_fence);
        if (epoch.ok()) watch->AdoptEpoch(*epoch);
      }
      co_return outcomes;
    }
    const bool retry = !outcomes.ok() && (outcomes.error().code == ErrorCode::kUnavailable ||
                                          outcomes.error().code == ErrorCode::kUnknownOutcome);
    if (!retry) co_return outcomes;
    // The database is down or slow, or a commit's fate is unknown: hold the batch and try
    // again (InsertOrders is idempotent). Not the entries' fault: it does not count against them.
    metrics_.db_errors.Add();
    spdlog::warn("persisting {} orders of '{}': {}; retrying in {} ms", orders->size(), activity_id,
                 outcomes.error().message, backoff.count());
    if (*stop) co_return MakeError(ErrorCode::kCancelled, "stopping");
    co_await Pause(backoff);
    backoff = std::min(backoff * 2, options_.backoff_max);
    // Still ours? Keeps other consumers from claiming what we hold, and tells a batch whose
    // stream Redis lost (wiped, failed over) from one that waits: a lost batch is dropped, never
    // written after reconciliation rebuilt the activity without it.
    auto touched = co_await source_.Touch(activity_id, options_.name, ids);
    if (touched.ok() && *touched < static_cast<int64_t>(ids.size())) {
      spdlog::warn(
          "{} of {} held order intents of '{}' are no longer pending for this consumer; "
          "the batch is dropped",
          static_cast<int64_t>(ids.size()) - *touched, ids.size(), activity_id);
      co_return MakeError(ErrorCode::kFailedPrecondition, ErrorDetail::kEntriesLost,
                          "held entries lost");
    }
    if (!touched.ok()) {
      if (touched.error().detail == ErrorDetail::kNoGroup) {
        spdlog::warn("the order stream of '{}' was lost; {} held intents are dropped", activity_id,
                     ids.size());
        co_return MakeError(ErrorCode::kFailedPrecondition, ErrorDetail::kEntriesLost,
                            "stream lost");
      }
      spdlog::warn("touch held entries of '{}': {}", activity_id, touched.error().message);
    }
  }
}

asio::awaitable<void> OrderConsumer::Fail(std::string_view activity_id, const std::string& entry_id,
                                          const std::vector<int>& parts, const std::string& error,
                                          std::vector<store::RefusedOrder> refused) {
  metrics_.entry_failures.Add();
  auto count = co_await source_.RecordFailure(activity_id, entry_id);
  const int64_t deliveries = count.ok() ? *count : 1;
  if (deliveries < options_.max_deliveries) {
    spdlog::warn("order intent {} of '{}' failed ({} of {}): {}", entry_id, activity_id, deliveries,
                 options_.max_deliveries, error);
    co_return;  // stays pending; claimed again after claim_idle
  }
  // The refused orders' events (store::Store::RecordRefused) before the dead letter: the record
  // holds them even if this process dies right after the move. Not written: not moved either
  // (the entry stays pending and comes again).
  if (!refused.empty()) {
    const auto record = [refused = std::move(refused), now = context_.clock().NowMs()](
                            store::Store& store) { return store.RecordRefused(refused, now); };
    auto recorded = co_await context_.OnDb(record);
    if (!recorded.ok()) {
      spdlog::warn("order intent {} of '{}': its refused events were not written ({}); retried",
                   entry_id, activity_id, recorded.error().message);
      co_return;
    }
  }
  auto moved = co_await source_.DeadLetter(activity_id, entry_id, parts, error, deliveries,
                                           context_.clock().NowMs());
  if (moved.ok()) {
    metrics_.dead_letters.Add(moved->moved);
    spdlog::error(
        "{} order intent(s) of entry {} of '{}' moved to the dead-letter stream ({} units of their "
        "orders returned to stock; the orders show as refused): {}",
        moved->moved, entry_id, activity_id, moved->released, error);
  } else {
    spdlog::error("dead-lettering {} of '{}' failed: {}", entry_id, activity_id,
                  moved.error().message);
  }
}

}  // namespace flashsale::service
