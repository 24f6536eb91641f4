#include "service/redis_watch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>

#include "base/json_writer.h"

namespace flashsale::service {

void RepairSummary::AddCounts(const RepairSummary& other) {
  orders_applied += other.orders_applied;
  units_applied += other.units_applied;
  rebuilt += other.rebuilt;
  oversold_units += other.oversold_units;
  flagged_orders += other.flagged_orders;
  acknowledged_lost += other.acknowledged_lost;
}

std::string RepairSummary::Json() const {
  base::JsonWriter w;
  w.BeginObject().Key("activities").Strings(activities);
  w.Key("orders_applied").Int(orders_applied).Key("units_applied").Int(units_applied);
  w.Key("rebuilt").Int(rebuilt).Key("oversold_units").Int(oversold_units);
  w.Key("flagged_orders").Int(flagged_orders).Key("acknowledged_lost").Int(acknowledged_lost);
  w.Key("epoch").Int(epoch).EndObject();
  return std::move(w).Take();
}

RedisWatch::RedisWatch(const base::Clock& clock) : clock_(clock), activities_(clock) {}

void RedisWatch::Hook(redis::ConnectionOptions& options) {
  options.on_server = [this](std::string_view node, std::string_view run_id) {
    return OnServer(node, run_id);
  };
  options.on_promoted = [this](std::string_view node, std::string_view run_id) {
    OnPromoted(node, run_id);
  };
  options.on_link_lost = [this] { OnLinkLost(); };
}

void RedisWatch::OpenEvent(std::string_view node_name, Node& node, std::string_view run_id,
                           std::string_view what) {
  const int64_t now = clock_.NowMs();
  const bool open_event = frozen_.load(std::memory_order_relaxed) && !events_.empty() &&
                          events_.back().repaired_ms == 0;
  const std::string_view where = node_name.empty() ? std::string_view("the endpoint") : node_name;
  const std::string_view before =
      node.seen.empty() ? std::string_view("none") : std::string_view(node.seen);
  if (!open_event) {
    RedisEvent event;
    event.node = std::string(node_name);
    event.from_run_id = node.seen;
    event.to_run_id = std::string(run_id);
    event.startup = !any_confirmed_;
    event.lost_ms = lost_ms_;
    event.back_ms = now;
    events_.push_back(std::move(event));
    if (events_.size() > kKeep) events_.pop_front();
    event_fence_ = -1;
    if (any_confirmed_) {
      ++events_total_;
      spdlog::warn(
          "redis: {} behind {} (run_id {} -> {}): it may have lost acknowledged writes; "
          "purchases and draws of its activities are frozen until the repair ran",
          what, where, before, run_id);
    }
  } else {
    if (events_.back().node == node_name) {
      events_.back().to_run_id = std::string(run_id);  // changed again while frozen
    } else if (events_.back().to_run_id.find(run_id) == std::string::npos) {
      events_.back().to_run_id += " " + std::string(run_id);  // another node, same freeze
      if (events_.back().node.find(node_name) == std::string::npos) {
        events_.back().node += " " + std::string(node_name);
      }
    }
    if (any_confirmed_) {
      spdlog::warn("redis: {} behind {} (run_id {} -> {}) while frozen", what, where, before,
                   run_id);
    }
  }
  node.seen = std::string(run_id);
  node.pending = true;
  last_ = node.seen;
  generation_.fetch_add(1, std::memory_order_acq_rel);
  frozen_.store(true, std::memory_order_release);
}

bool RedisWatch::OnServer(std::string_view node_name, std::string_view run_id) {
  std::lock_guard lock(mutex_);
  auto found = nodes_.find(node_name);
  if (found == nodes_.end()) found = nodes_.emplace(std::string(node_name), Node{}).first;
  Node& node = found->second;
  if (run_id == node.seen && !node.pending) return true;  // the same server, repaired
  if (run_id != node.seen) OpenEvent(node_name, node, run_id, "another server");
  // At startup nothing was confirmed yet: let the first commands through (nothing sells while
  // frozen); after an event, nothing queued for the old server goes to the new one.
  return !any_confirmed_;
}

void RedisWatch::OnPromoted(std::string_view node_name, std::string_view run_id) {
  std::lock_guard lock(mutex_);
  auto found = nodes_.find(node_name);
  if (found == nodes_.end()) found = nodes_.emplace(std::string(node_name), Node{}).first;
  Node& node = found->second;
  if (node.pending && node.seen == run_id) return;  // its event is open already
  OpenEvent(node_name, node, run_id, "a replica promoted");
}

bool RedisWatch::NodeFrozen(std::string_view node_name) const {
  std::lock_guard lock(mutex_);
  if (!any_confirmed_) return true;
  auto found = nodes_.find(node_name);
  return found != nodes_.end() && found->second.pending;
}

void RedisWatch::FreezeForNode(std::string_view activity_id, std::string_view node_name) {
  std::lock_guard lock(mutex_);  // so a Confirm of the node either comes after and thaws it, or
                                 // came before and it is not frozen here
  if (!any_confirmed_) return;   // the startup's freeze: nothing sold yet, nothing to show
  // One server (no node named): the node its connections reported.
  auto found = !node_name.empty()
                   ? nodes_.find(node_name)
                   : std::find_if(nodes_.begin(), nodes_.end(),
                                  [](const auto& node) { return node.second.pending; });
  if (found == nodes_.end() || !found->second.pending) return;
  activities_.Freeze(activity_id, FreezeReason::kServer, {}, found->first);
}

void RedisWatch::AdoptEpoch(int64_t epoch) {
  int64_t current = epoch_.load(std::memory_order_relaxed);
  while (epoch > current && !epoch_.compare_exchange_weak(current, epoch, std::memory_order_release,
                                                          std::memory_order_relaxed)) {
  }
}

bool RedisWatch::startup_open() const {
  std::lock_guard lock(mutex_);
  return !events_.empty() && events_.back().repaired_ms == 0 && events_.back().startup;
}

int64_t RedisWatch::event_fence() const {
  std::lock_guard lock(mutex_);
  return event_fence_;
}

void RedisWatch::SetEventFence(int64_t fence) {
  std::lock_guard lock(mutex_);
  if (event_fence_ < 0) event_fence_ = fence;
}

std::map<std::string, std::string> RedisWatch::PendingNodes() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, std::string> out;
  for (const auto& [name, node] : nodes_) {
    if (node.pending) out.emplace(name, node.seen);
  }
  return out;
}

void RedisWatch::OnLinkLost() {
  std::lock_guard lock(mutex_);
  lost_ms_ = clock_.NowMs();
}

std::string RedisWatch::run_id() const {
  std::lock_guard lock(mutex_);
  return last_;
}

std::vector<std::string> RedisWatch::Pending() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [name, node] : nodes_) {
    if (node.pending) out.push_back(node.seen);
  }
  return out;
}

std::vector<std::string> RedisWatch::Seen() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [name, node] : nodes_) out.push_back(node.seen);
  return out;
}

void RedisWatch::Confirm(const std::vector<std::string>& run_ids, int64_t epoch,
                         const RepairSummary& summary) {
  std::lock_guard lock(mutex_);
  // Only for the servers still seen, and only once (a node may also have gone back to a server
  // repaired before: its marker confirms it again).
  if (!frozen_.load(std::memory_order_relaxed)) return;
  bool confirmed = false;
  bool left = false;
  for (auto& [name, node] : nodes_) {
    if (!node.pending) continue;
    if (std::find(run_ids.begin(), run_ids.end(), node.seen) != run_ids.end()) {
      node.pending = false;
      confirmed = true;
      activities_.ThawNode(name, epoch);
    } else {
      left = true;
    }
  }
  if (!confirmed) return;
  any_confirmed_ = true;
  AdoptEpoch(epoch);
  if (left) return;  // another node is still to be repaired: still frozen
  const int64_t now = clock_.NowMs();
  if (!events_.empty() && events_.back().repaired_ms == 0) {
    RedisEvent& event = events_.back();
    event.repaired_ms = now;
    event.summary = summary;
    if (!event.startup) {
      lost_check_due_ = true;
      frozen_ms_total_ += now - event.back_ms;
      // Each repair counted once (its epoch names it): an event confirmed by the markers of a
      // repair counted already (another thread's router reporting the same promotion after that
      // repair ran) shows its figures but does not add them again.
      if (std::find(counted_epochs_.begin(), counted_epochs_.end(), summary.epoch) ==
          counted_epochs_.end()) {
        counted_epochs_.push_back(summary.epoch);
        if (counted_epochs_.size() > kKeep) counted_epochs_.pop_front();
        totals_.AddCounts(summary);
      }
      spdlog::warn(
          "redis {}: repaired (epoch {}) after {} ms frozen: {} orders ({} units) applied again, "
          "{} activities rebuilt, {} units oversold, {} acknowledged orders lost",
          event.to_run_id, epoch, now - event.back_ms, summary.orders_applied,
          summary.units_applied, summary.rebuilt, summary.oversold_units,
          summary.acknowledged_lost);
    }
  }
  frozen_.store(false, std::memory_order_release);
}

void RedisWatch::Acknowledged(std::string_view activity_id, std::string_view order_id) {
  if (order_id.empty() || order_id.size() > kIdBytes) return;
  const int64_t now = clock_.NowMs();
  std::lock_guard lock(mutex_);
  if (!acks_) acks_ = std::make_unique_for_overwrite<Ack[]>(kAcknowledgedKept);
  auto known = ack_activity_index_.find(activity_id);
  if (known == ack_activity_index_.end()) {
    const auto index = static_cast<uint32_t>(ack_activities_.size());
    ack_activities_.emplace_back(activity_id);
    known = ack_activity_index_.emplace(std::string(activity_id), index).first;
  }
  while (ack_size_ > 0 && AckAt(0).at_ms < now - kAcknowledgedMaxAgeMs) {
    ack_head_ = (ack_head_ + 1) % kAcknowledgedKept;
    --ack_size_;
  }
  if (ack_size_ == kAcknowledgedKept) {  // full: the oldest goes
    ack_head_ = (ack_head_ + 1) % kAcknowledgedKept;
    --ack_size_;
  }
  Ack& ack = AckAt(ack_size_++);
  ack.at_ms = now;
  ack.activity = known->second;
  ack.order_size = static_cast<uint8_t>(order_id.size());
  std::copy(order_id.begin(), order_id.end(), ack.order_id);
}

void RedisWatch::RequestLostCheck() {
  std::lock_guard lock(mutex_);
  lost_check_due_ = true;
}

void RedisWatch::CountActivityRepair(const RepairSummary& summary) {
  std::lock_guard lock(mutex_);
  totals_.AddCounts(summary);
}

bool RedisWatch::TakeLostCheckDue() {
  std::lock_guard lock(mutex_);
  return std::exchange(lost_check_due_, false);
}

std::map<std::string, std::vector<std::string>> RedisWatch::AcknowledgedOrders() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, std::vector<std::string>> out;
  for (size_t i = 0; i < ack_size_; ++i) {
    const Ack& ack = AckAt(i);
    if (ack.order_size > 0) out[ack_activities_[ack.activity]].emplace_back(ack.order());
  }
  return out;
}

void RedisWatch::CountAcknowledgedLost(const std::vector<std::string>& order_ids) {
  if (order_ids.empty()) return;
  std::lock_guard lock(mutex_);
  const std::set<std::string_view> lost(order_ids.begin(), order_ids.end());
  for (size_t i = 0; i < ack_size_; ++i) {
    Ack& ack = AckAt(i);
    if (ack.order_size > 0 && lost.contains(ack.order())) ack.order_size = 0;
  }
  const int64_t count = static_cast<int64_t>(lost.size());
  totals_.acknowledged_lost += count;
  if (!events_.empty()) events_.back().summary.acknowledged_lost += count;
  spdlog::warn(
      "redis: {} orders this instance acknowledged to buyers exist neither in Redis nor in the "
      "record (lost with the writes Redis lost), e.g. {}",
      count, order_ids.front());
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
  w.BeginObject().Key("frozen").Bool(frozen_.load()).Key("run_id").String(last_);
  w.Key("epoch").Int(epoch_.load()).Key("activities").Raw(activities_.Json());
  w.Key("events").BeginArray();
  for (const auto& event : events_) {
    w.BeginObject().Key("node").String(event.node).Key("startup").Bool(event.startup);
    w.Key("from_run_id").String(event.from_run_id);
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
  if (frozen && !events_.empty() && !events_.back().startup) {
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
  activities_.AppendPrometheus(out);
}

}  // namespace flashsale::service
