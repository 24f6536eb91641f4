#include "service/registry.h"

#include <fmt/format.h>

namespace flashsale::service {

ActivitySnapshot::ActivitySnapshot(std::vector<store::ActivityRecord> records, uint64_t generation)
    : records_(std::move(records)), generation_(generation) {
  for (size_t i = 0; i < records_.size(); ++i) index_[records_[i].activity.id] = i;
}

const store::ActivityRecord* ActivitySnapshot::Find(std::string_view id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &records_[it->second];
}

ActivityRegistry::ActivityRegistry()
    : current_(std::make_shared<ActivitySnapshot>(std::vector<store::ActivityRecord>{}, 0)) {}

base::Result<RegistryLoad> ActivityRegistry::Read(store::Store& store) {
  std::lock_guard lock(read_mutex_);
  auto records = store.ListActivities();
  if (!records.ok()) return std::move(records).error();
  return RegistryLoad{.read = ++reads_, .records = std::move(*records)};
}

bool ActivityRegistry::Publish(RegistryLoad load) {
  std::lock_guard lock(mutex_);
  if (load.read <= published_read_) return false;
  published_read_ = load.read;
  const uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;
  current_ = std::make_shared<ActivitySnapshot>(std::move(load.records), generation);
  generation_.store(generation, std::memory_order_release);
  return true;
}

void ActivityRegistry::Publish(std::vector<store::ActivityRecord> records) {
  uint64_t read = 0;
  {
    std::lock_guard lock(read_mutex_);
    read = ++reads_;
  }
  Publish(RegistryLoad{.read = read, .records = std::move(records)});
}

void ActivityRegistry::Refresh(SnapshotPtr& current) const {
  if (current && current->generation() == generation_.load(std::memory_order_acquire)) return;
  current = Current();
}

SnapshotPtr ActivityRegistry::Current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

}  // namespace flashsale::service
