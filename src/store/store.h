#pragma once
// The system of record: activity definitions (and, with the order pipeline, orders). One
// interface, two backends: SQLite (the embedded default) and MySQL/MariaDB.
//
// Calls block. They run on the service's database thread, never on an I/O thread, so a slow
// database never stalls the purchase path (which does not touch the database at all).
// Implementations are safe to call from several threads, one call at a time.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/activity.h"

namespace flashsale::store {

struct ActivityRecord {
  // For kCounted, activity.stock is total_units; for kItemised, activity.items holds every item
  // id ever added when asked for (GetActivity(id, true)), else it is empty.
  core::SeckillActivity activity;
  int64_t total_units = 0;  // units ever loaded or added
  int64_t version = 1;      // bumped on every change of the record
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
};

// A partial update: only the fields that are set change.
struct ActivityUpdate {
  std::optional<std::string> title;
  std::optional<int64_t> start_ms;
  std::optional<int64_t> end_ms;
  std::optional<int64_t> per_user_limit;
  std::optional<bool> open;
  std::optional<core::RateLimit> user_rate;
  std::optional<core::RateLimit> address_rate;
};

class Store {
 public:
  virtual ~Store() = default;

  // Creates or upgrades the schema to the newest version; idempotent.
  virtual base::Status Migrate() = 0;
  virtual base::Result<int> SchemaVersion() = 0;
  // Cheap round trip for readiness checks.
  virtual base::Status Ping() = 0;
  // "sqlite:/path/to.db", "mysql://user@host/db": for logs, without secrets.
  virtual std::string Describe() const = 0;

  virtual base::Result<std::vector<ActivityRecord>> ListActivities() = 0;
  // kNotFound if there is no such activity.
  virtual base::Result<ActivityRecord> GetActivity(std::string_view id, bool with_items) = 0;
  // kAlreadyExists if the id is taken. The activity must pass core::Validate.
  virtual base::Result<ActivityRecord> CreateActivity(const core::SeckillActivity& activity,
                                                      int64_t now_ms) = 0;
  // The updated record; the result must still pass core::Validate (else kInvalidArgument and
  // nothing changes).
  virtual base::Result<ActivityRecord> UpdateActivity(std::string_view id,
                                                      const ActivityUpdate& update,
                                                      int64_t now_ms) = 0;
  // Counted: `units` more; itemised: the given new item ids (units == items.size(); an id the
  // activity already has is kAlreadyExists and nothing is added).
  virtual base::Result<ActivityRecord> AddStock(std::string_view id, int64_t units,
                                                std::span<const std::string> items,
                                                int64_t now_ms) = 0;
};

}  // namespace flashsale::store
