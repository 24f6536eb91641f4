#pragma once
// The activities this instance knows, as an immutable snapshot of the database record that every
// I/O thread reads without locks. The purchase path answers unknown activities, closed ones,
// windows that are not open and (with LocalGate) sold-out ones from it, without a Redis round
// trip.
//
// Freshness across instances: every admin change bumps the Redis key <namespace>:registry:version
// (redis::ServiceState::BumpRegistryVersion); each instance polls it (registry-poll-ms) and reloads
// from the database when it moves. On the instance that made the change, the reload happens before
// the admin call answers.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/store.h"

namespace flashsale::service {

class ActivitySnapshot {
 public:
  ActivitySnapshot(std::vector<store::ActivityRecord> records, uint64_t generation);

  const store::ActivityRecord* Find(std::string_view id) const;
  const std::vector<store::ActivityRecord>& all() const { return records_; }
  uint64_t generation() const { return generation_; }

 private:
  std::vector<store::ActivityRecord> records_;
  std::unordered_map<std::string_view, size_t> index_;
  uint64_t generation_;
};

using SnapshotPtr = std::shared_ptr<const ActivitySnapshot>;

class ActivityRegistry {
 public:
  ActivityRegistry();

  // Replaces the snapshot (records without item lists).
  void Publish(std::vector<store::ActivityRecord> records);
  // The current snapshot. Cheap when `current` is still current (one atomic load).
  void Refresh(SnapshotPtr& current) const;
  SnapshotPtr Current() const;

 private:
  std::atomic<uint64_t> generation_{0};
  mutable std::mutex mutex_;
  SnapshotPtr current_;
};

}  // namespace flashsale::service
