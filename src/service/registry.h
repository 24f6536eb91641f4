#pragma once
// The activities this instance knows, as an immutable snapshot of the database record that every
// I/O thread reads without locks. The purchase path answers unknown activities, closed ones,
// windows that are not open and (with LocalGate) sold-out ones from it, without a Redis round
// trip.
//
// Freshness across instances: every admin change bumps the Redis key <namespace>:registry:version
// (keyspace::ServiceState::BumpRegistryVersion); each instance polls it (registry-poll-ms) and
// reloads from the database when it moves. On the instance that made the change, the reload happens
// before the admin call answers.
//
// Reloads may overlap (the poll's and an admin call's): each list read from the database is
// numbered in the order of the reads, and a list read earlier than the one published already is
// dropped. Otherwise a poll that read the record just before an activity was created, and
// published just after the creating call's own reload, would put the older list back, and the new
// activity would be unknown here until the next poll.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
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

// The activities as one read of the database found them, and that read's place in the order of
// reads (ActivityRegistry::Read).
struct RegistryLoad {
  uint64_t read = 0;
  std::vector<store::ActivityRecord> records;  // without item lists
};

class ActivityRegistry {
 public:
  ActivityRegistry();

  // Lists the store's activities (on the database's thread): reads are serialised and numbered.
  base::Result<RegistryLoad> Read(store::Store& store);
  // Replaces the snapshot with `load`, unless a load read after it was published already (then
  // false, and nothing changes).
  bool Publish(RegistryLoad load);
  // Replaces the snapshot with `records`, as a read made now would.
  void Publish(std::vector<store::ActivityRecord> records);
  // The current snapshot. Cheap when `current` is still current (one atomic load).
  void Refresh(SnapshotPtr& current) const;
  SnapshotPtr Current() const;

 private:
  std::atomic<uint64_t> generation_{0};
  mutable std::mutex mutex_;
  SnapshotPtr current_;
  uint64_t published_read_ = 0;  // guarded by mutex_
  std::mutex read_mutex_;
  uint64_t reads_ = 0;  // guarded by read_mutex_
};

}  // namespace flashsale::service
