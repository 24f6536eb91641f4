#include "service/activity_guard.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/json_writer.h"

namespace flashsale::service {

namespace {

constexpr int kSeqBits = 40;
constexpr uint64_t kMaxSeq = (uint64_t{1} << kSeqBits) - 1;
constexpr uint64_t kMaxEpoch = (uint64_t{1} << (64 - kSeqBits - 1)) - 1;

void WriteSeqJson(base::JsonWriter& w, std::string_view key, core::WriteSeq seq) {
  w.Key(key).BeginObject().Key("epoch").Int(seq.epoch).Key("seq").Int(seq.seq).EndObject();
}

void FreezeJson(base::JsonWriter& w, const ActivityFreeze& freeze) {
  w.BeginObject().Key("activity_id").String(freeze.activity_id);
  w.Key("reason").String(ToString(freeze.reason));
  WriteSeqJson(w, "floor", freeze.floor);
  WriteSeqJson(w, "redis_holds", freeze.redis_holds);
  w.Key("node").String(freeze.node).Key("since_ms").Int(freeze.since_ms);
  w.Key("thawed_ms").Int(freeze.thawed_ms).Key("refused").Int(freeze.refused);
  w.Key("orders_applied").Int(freeze.orders_applied);
  w.Key("oversold_units").Int(freeze.oversold_units);
  w.Key("repair_epoch").Int(freeze.repair_epoch).EndObject();
}

}  // namespace

std::string_view ToString(FreezeReason reason) {
  switch (reason) {
    case FreezeReason::kNone:
      return "none";
    case FreezeReason::kBehind:
      return "sequence_behind";
    case FreezeReason::kServer:
      return "server_changed";
  }
  return "none";
}

uint64_t ActivityGuard::Pack(core::WriteSeq seq) {
  if (seq.epoch < 0 || seq.seq < 0) return 0;
  auto epoch = static_cast<uint64_t>(seq.epoch);
  auto count = static_cast<uint64_t>(seq.seq);
  if (epoch > kMaxEpoch) {
    epoch = kMaxEpoch;
    count = kMaxSeq;
  } else if (count > kMaxSeq) {
    count = kMaxSeq;
  }
  return (epoch << kSeqBits) | count;
}

core::WriteSeq ActivityGuard::Unpack(uint64_t packed) {
  return {static_cast<int64_t>(packed >> kSeqBits), static_cast<int64_t>(packed & kMaxSeq)};
}

void ActivityGuard::Raise(core::WriteSeq seen) {
  const uint64_t packed = Pack(seen);
  uint64_t current = floor_.load(std::memory_order_relaxed);
  while (packed > current &&
         !floor_.compare_exchange_weak(current, packed, std::memory_order_release,
                                       std::memory_order_relaxed)) {
  }
}

ActivityGuard& ActivityGuards::Of(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  return OfLocked(activity_id);
}

ActivityGuard& ActivityGuards::OfLocked(std::string_view activity_id) {
  auto found = guards_.find(activity_id);
  if (found == guards_.end()) {
    found = guards_.emplace(std::string(activity_id), std::make_unique<ActivityGuard>()).first;
  }
  return *found->second;
}

bool ActivityGuards::Freeze(std::string_view activity_id, FreezeReason reason,
                            core::WriteSeq redis_holds, std::string_view node) {
  std::lock_guard lock(mutex_);
  ActivityGuard& guard = OfLocked(activity_id);
  if (guard.frozen_.load(std::memory_order_relaxed)) return false;
  ActivityFreeze freeze;
  freeze.activity_id = std::string(activity_id);
  freeze.reason = reason;
  freeze.floor = guard.floor();
  freeze.redis_holds = redis_holds;
  freeze.node = std::string(node);
  freeze.since_ms = clock_.NowMs();
  frozen_.insert_or_assign(freeze.activity_id, freeze);
  ++freezes_total_[freeze.activity_id][reason];
  guard.frozen_.store(true, std::memory_order_release);
  frozen_count_.fetch_add(1, std::memory_order_acq_rel);
  if (reason == FreezeReason::kBehind) {
    spdlog::warn(
        "activity '{}': Redis holds write sequence {}.{}, below {}.{} that was acknowledged or "
        "persisted: it lost writes; the activity is frozen until its lost-write repair ran",
        activity_id, redis_holds.epoch, redis_holds.seq, freeze.floor.epoch, freeze.floor.seq);
  }
  return true;
}

void ActivityGuards::Thaw(std::string_view activity_id, core::WriteSeq redis_holds,
                          int64_t repair_epoch, int64_t orders_applied, int64_t oversold_units) {
  std::lock_guard lock(mutex_);
  ActivityGuard& guard = OfLocked(activity_id);
  guard.Raise(redis_holds);
  auto found = frozen_.find(activity_id);
  if (found == frozen_.end() || !guard.frozen_.load(std::memory_order_relaxed)) return;
  ActivityFreeze freeze = std::move(found->second);
  frozen_.erase(found);
  freeze.repair_epoch = repair_epoch;
  freeze.orders_applied = orders_applied;
  freeze.oversold_units = oversold_units;
  ThawLocked(guard, std::move(freeze));
}

void ActivityGuards::ThawNode(std::string_view node, int64_t repair_epoch) {
  std::lock_guard lock(mutex_);
  for (auto it = frozen_.begin(); it != frozen_.end();) {
    if (it->second.reason != FreezeReason::kServer || it->second.node != node) {
      ++it;
      continue;
    }
    ActivityGuard& guard = OfLocked(it->first);
    ActivityFreeze freeze = std::move(it->second);
    it = frozen_.erase(it);
    freeze.repair_epoch = repair_epoch;
    ThawLocked(guard, std::move(freeze));
  }
}

void ActivityGuards::ThawLocked(ActivityGuard& guard, ActivityFreeze freeze) {
  freeze.thawed_ms = clock_.NowMs();
  spdlog::info("activity '{}': repaired (epoch {}), selling again after {} ms frozen ({})",
               freeze.activity_id, freeze.repair_epoch, freeze.thawed_ms - freeze.since_ms,
               ToString(freeze.reason));
  history_.push_back(std::move(freeze));
  if (history_.size() > kKeep) history_.pop_front();
  guard.frozen_.store(false, std::memory_order_release);
  frozen_count_.fetch_sub(1, std::memory_order_acq_rel);
}

void ActivityGuards::CountRefused(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  if (auto found = frozen_.find(activity_id); found != frozen_.end()) ++found->second.refused;
}

std::vector<ActivityFreeze> ActivityGuards::Frozen() const {
  std::lock_guard lock(mutex_);
  std::vector<ActivityFreeze> out;
  out.reserve(frozen_.size());
  for (const auto& [id, freeze] : frozen_) out.push_back(freeze);
  return out;
}

FreezeReason ActivityGuards::ReasonOf(std::string_view activity_id) const {
  std::lock_guard lock(mutex_);
  const auto found = frozen_.find(activity_id);
  return found == frozen_.end() ? FreezeReason::kNone : found->second.reason;
}

std::vector<ActivityFreeze> ActivityGuards::History() const {
  std::lock_guard lock(mutex_);
  return {history_.begin(), history_.end()};
}

std::map<std::string, core::WriteSeq> ActivityGuards::FrozenFloors() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, core::WriteSeq> out;
  for (const auto& [id, freeze] : frozen_) {
    if (freeze.reason != FreezeReason::kServer) out.emplace(id, freeze.floor);
  }
  return out;
}

void ActivityGuards::AppendPrometheus(std::string& out) const {
  std::lock_guard lock(mutex_);
  out +=
      "# HELP flashsale_activity_freezes_total Times the activity's sale was frozen for a "
      "lost-write repair, by reason.\n"
      "# TYPE flashsale_activity_freezes_total counter\n";
  for (const auto& [id, by_reason] : freezes_total_) {
    for (const auto& [reason, count] : by_reason) {
      out += fmt::format("flashsale_activity_freezes_total{{activity=\"{}\",reason=\"{}\"}} {}\n",
                         id, ToString(reason), count);
    }
  }
}

std::string ActivityGuards::Json() const {
  std::lock_guard lock(mutex_);
  base::JsonWriter w;
  w.BeginObject().Key("frozen").BeginArray();
  for (const auto& [id, freeze] : frozen_) FreezeJson(w, freeze);
  w.EndArray().Key("recent").BeginArray();
  for (const auto& freeze : history_) FreezeJson(w, freeze);
  w.EndArray().EndObject();
  return std::move(w).Take();
}

}  // namespace flashsale::service
