#include "service/redis_watch.h"

#include <spdlog/spdlog.h>

#include "base/json_writer.h"

namespace flashsale::service {

std::string RepairSummary::Json() const {
  base::JsonWriter w;
  w.BeginObject().Key("activities").Strings(activities);
  w.Key("orders_applied").Int(orders_applied).Key("units_applied").Int(units_applied);
  w.Key("rebuilt").Int(rebuilt).Key("oversold_units").Int(oversold_units);
  w.Key("flagged_orders").Int(flagged_orders).Key("acknowledged_lost").Int(acknowledged_lost);
  w.Key("epoch").Int(epoch).EndObject();
  return std::move(w).Take();
}

RedisWatch::RedisWatch(const base::Clock& clock) : clock_(clock) {}

void RedisWatch::Hook(redis::ConnectionOptions& options) {
  options.on_server = [this](std::string_view run_id) { return OnServer(run_id); };
  options.on_link_lost = [this] { OnLinkLost(); };
}

bool RedisWatch::OnServer(std::string_view run_id) {
  std::lock_guard lock(mutex_);
  if (run_id == confirmed_ && seen_ == confirmed_) return true;
  if (run_id != seen_) {
    const int64_t now = clock_.NowMs();
    if (!frozen_.load(std::memory_order_relaxed) || seen_.empty()) {
      RedisEvent event;
      event.from_run_id = confirmed_.empty() ? seen_ : confirmed_;
      event.to_run_id = std::string(run_id);
      event.lost_ms = lost_ms_;
      event.back_ms = now;
      events_.push_back(std::move(event));
      if (events_.size() > kKeep) events_.pop_front();
      if (!confirmed_.empty()) {
        ++events_total_;
        spdlog::warn(
            "redis: another server behind the endpoint (run_id {} -> {}): it may have lost "
            "acknowledged writes; purchases and draws are frozen until the repair ran",
            confirmed_, run_id);
      }
    } else if (!events_.empty()) {
      events_.back().to_run_id = std::string(run_id);  // changed again while frozen
    }
    seen_ = std::string(run_id);
    frozen_.store(true, std::memory_order_release);
  }
  // At startup nothing was confirmed yet: let the first commands through (nothing sells while
  // frozen); after an event, nothing queued for the old server goes to the new one.
  return confirmed_.empty();
}

void RedisWatch::OnLinkLost() {
  std::lock_guard lock(mutex_);
  lost_ms_ = clock_.NowMs();
}

std::string RedisWatch::run_id() const {
  std::lock_guard lock(mutex_);
  return seen_;
}

void RedisWatch::Confirm(std::string_view run_id, int64_t epoch, const RepairSummary& summary) {
  std::lock_guard lock(mutex_);
  // Only for the server seen last, and only once (the endpoint may also have gone back to a
  // server repaired before: its marker confirms it again).
  if (run_id != seen_ || !frozen_.load(std::memory_order_relaxed)) return;
  confirmed_ = std::string(run_id);
  epoch_.store(epoch, std::memory_order_release);
  const int64_t now = clock_.NowMs();
  if (!events_.empty() && events_.back().repaired_ms == 0) {
    RedisEvent& event = events_.back();
    event.repaired_ms = now;
    event.summary = summary;
    if (!event.from_run_id.empty()) {
      frozen_ms_total_ += now - event.back_ms;
      totals_.orders_applied += summary.orders_applied;
      totals_.units_applied += summary.units_applied;
      totals_.rebuilt += summary.rebuilt;
      totals_.oversold_units += summary.oversold_units;
      totals_.flagged_orders += summary.flagged_orders;
      totals_.acknowledged_lost += summary.acknowledged_lost;
      spdlog::warn(
          "redis {}: repaired (epoch {}) after {} ms frozen: {} orders ({} units) applied again, "
          "{} activities rebuilt, {} units oversold, {} acknowledged orders lost",
          run_id, epoch, now - event.back_ms, summary.orders_applied, summary.units_applied,
          summary.rebuilt, summary.oversold_units, summary.acknowledged_lost);
    }
  }
  frozen_.store(false, std::memory_order_release);
}

void RedisWatch::CountRefused() {
  std::lock_guard lock(mutex_);
  ++refused_total_;
  if (!events_.empty()) ++events_.back().refused;
}

std::vector<RedisEvent> RedisWatch::Events() const {
  std::lock_guard lock(mutex_);
  return {events_.begin(), events_.end()};
}

std::string RedisWatch::Json() const {
  std::lock_guard lock(mutex_);
  base::JsonWriter w;
  w.BeginObject().Key("frozen").Bool(frozen_.load()).Key("run_id").String(seen_);
  w.Key("epoch").Int(epoch_.load()).Key("events").BeginArray();
  for (const auto& event : events_) {
    w.BeginObject().Key("from_run_id").String(event.from_run_id);
    w.Key("to_run_id").String(event.to_run_id).Key("lost_ms").Int(event.lost_ms);
    w.Key("back_ms").Int(event.back_ms).Key("repaired_ms").Int(event.repaired_ms);
    w.Key("frozen_ms")
        .Int((event.repaired_ms != 0 ? event.repaired_ms : clock_.NowMs()) - event.back_ms);
    w.Key("refused").Int(event.refused).Key("repair").Raw(event.summary.Json()).EndObject();
  }
  w.EndArray().EndObject();
  return std::move(w).Take();
}

void RedisWatch::AppendPrometheus(std::string& out) const {
  std::lock_guard lock(mutex_);
  const bool frozen = frozen_.load();
  int64_t frozen_ms = frozen_ms_total_;
  if (frozen && !events_.empty() && !events_.back().from_run_id.empty()) {
    frozen_ms += clock_.NowMs() - events_.back().back_ms;
  }
  out += fmt::format(
      "# HELP flashsale_redis_events_total Redis restarts or failovers seen (another run_id).\n"
      "# TYPE flashsale_redis_events_total counter\nflashsale_redis_events_total {}\n"
      "# HELP flashsale_redis_frozen 1 while purchases and draws wait for the lost-write repair.\n"
      "# TYPE flashsale_redis_frozen gauge\nflashsale_redis_frozen {}\n"
      "# HELP flashsale_redis_frozen_seconds_total Time frozen after Redis events.\n"
      "# TYPE flashsale_redis_frozen_seconds_total counter\n"
      "flashsale_redis_frozen_seconds_total {:.3f}\n"
      "# HELP flashsale_redis_frozen_refusals_total Purchases and draws refused while frozen.\n"
      "# TYPE flashsale_redis_frozen_refusals_total counter\n"
      "flashsale_redis_frozen_refusals_total {}\n"
      "# HELP flashsale_repair_orders_applied_total Orders of the record applied to Redis again.\n"
      "# TYPE flashsale_repair_orders_applied_total counter\n"
      "flashsale_repair_orders_applied_total {}\n"
      "# HELP flashsale_repair_units_applied_total Units of those orders.\n"
      "# TYPE flashsale_repair_units_applied_total counter\n"
      "flashsale_repair_units_applied_total {}\n"
      "# HELP flashsale_repair_oversold_units_total Units Redis had sold again before the repair.\n"
      "# TYPE flashsale_repair_oversold_units_total counter\n"
      "flashsale_repair_oversold_units_total {}\n"
      "# HELP flashsale_repair_acknowledged_lost_total Orders acknowledged to a buyer that exist "
      "nowhere (as far as surviving records prove).\n"
      "# TYPE flashsale_repair_acknowledged_lost_total counter\n"
      "flashsale_repair_acknowledged_lost_total {}\n",
      events_total_, frozen ? 1 : 0, static_cast<double>(frozen_ms) / 1000.0, refused_total_,
      totals_.orders_applied, totals_.units_applied, totals_.oversold_units,
      totals_.acknowledged_lost);
}

}  // namespace flashsale::service
