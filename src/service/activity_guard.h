#pragma once
// Per activity, for the whole process: the lowest write sequence its Redis may hold (the floor),
// and whether its sale is frozen and why (docs/durability.md, "Lost writes caught from the data").
//
// Design note. Every reserve or draw call sends the activity's floor, and the script refuses,
// before writing anything, when Redis holds less (keyspace::WriteSeq, sale_reserve.lua): that
// Redis lost writes someone saw acknowledged. The floor is the highest sequence this process saw
// in any reply for the activity, and at least what the record persisted (the order pipeline
// raises it as it commits; the registry poll reads the record's for what other processes
// persisted). A refusal freezes that activity, and only it: the purchase and draw gates answer 503
// with Retry-After, batches waiting to be sent are not sent, the order and queue consumers leave
// its streams alone, until its lost-write repair (service/redis_repair.h) re-based its sequence to
// a new epoch. An instance that did not run the repair sees it done when Redis holds an epoch
// above the floor it froze at: only a repair writes the epoch.
//
// Hot path: the guard of an activity is found once per thread (ServiceContext keeps a pointer),
// then a purchase reads one atomic (frozen) and a reply raises the floor with one load and, when
// it grew, one compare-and-swap. Guards live as long as the process (one per activity it sold
// in; an activity's guard is a few dozen bytes).

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "core/write_seq.h"

namespace flashsale::service {

// Why an activity is frozen.
enum class FreezeReason {
  kNone,
  kBehind,  // Redis held less of its write sequence than the floor (a script said so)
  kServer,  // its Redis server changed (another run_id, or a replica promoted): an early warning
};
std::string_view ToString(FreezeReason reason);  // "none" | "sequence_behind" | "server_changed"

class ActivityGuard {
 public:
  // The lowest sequence Redis may hold for the activity.
  core::WriteSeq floor() const { return Unpack(floor_.load(std::memory_order_acquire)); }
  // Raises the floor to `seen` (a sequence Redis held); never lowers it.
  void Raise(core::WriteSeq seen);
  bool frozen() const { return frozen_.load(std::memory_order_acquire); }

  // The floor in one word: epoch in the top 23 bits, seq in the low 40 (a value past either is
  // kept as the largest that fits below it: a lower floor is always safe, it only checks less).
  static uint64_t Pack(core::WriteSeq seq);
  static core::WriteSeq Unpack(uint64_t packed);

 private:
  friend class ActivityGuards;
  std::atomic<uint64_t> floor_{0};
  std::atomic<bool> frozen_{false};
};

// One frozen activity, or the last freeze of one, for admin status and /metrics.
struct ActivityFreeze {
  std::string activity_id;
  FreezeReason reason = FreezeReason::kNone;
  core::WriteSeq floor;        // the floor when it froze
  core::WriteSeq redis_holds;  // what Redis said it held (kBehind)
  std::string node;            // kServer: the server that changed
  int64_t since_ms = 0;
  int64_t thawed_ms = 0;  // 0: still frozen
  int64_t refused = 0;    // purchases and draws refused meanwhile
  // The repair that thawed it: orders applied again, units oversold (from its report).
  int64_t orders_applied = 0;
  int64_t oversold_units = 0;
  int64_t repair_epoch = 0;
};

class ActivityGuards {
 public:
  explicit ActivityGuards(const base::Clock& clock) : clock_(clock) {}

  // The activity's guard, made on first use; the reference stays valid for the process's life.
  ActivityGuard& Of(std::string_view activity_id);

  // Freezes the activity (if it is not already): true if this call froze it.
  bool Freeze(std::string_view activity_id, FreezeReason reason, core::WriteSeq redis_holds,
              std::string_view node = {});
  // Thaws it after its repair (or once Redis shows another's), the floor raised to `redis_holds`.
  void Thaw(std::string_view activity_id, core::WriteSeq redis_holds, int64_t repair_epoch,
            int64_t orders_applied, int64_t oversold_units);
  // Thaws the activities frozen for `node`'s server event (kServer) once that event's repair is
  // confirmed (RedisWatch::Confirm); their floors stay. The repair's figures are the event's
  // (admin status, events[].repair), not split per activity.
  void ThawNode(std::string_view node, int64_t repair_epoch);
  void CountRefused(std::string_view activity_id);

  // The activities frozen now, and the last kKeep freezes (thawed or not), oldest first.
  std::vector<ActivityFreeze> Frozen() const;
  std::vector<ActivityFreeze> History() const;
  bool any_frozen() const { return frozen_count_.load(std::memory_order_acquire) > 0; }
  // Why the activity is frozen (kNone: it is not).
  FreezeReason ReasonOf(std::string_view activity_id) const;
  // The activities frozen now for their write sequence (kBehind), by id: where the floor stood
  // when each froze. A kServer freeze ends with its server's repair (ThawNode), not on its own.
  std::map<std::string, core::WriteSeq> FrozenFloors() const;

  // flashsale_activity_freezes_total{activity,reason}: freezes since start (the gauge of a frozen
  // activity, flashsale_activity_frozen, is the server's, per activity of the registry).
  void AppendPrometheus(std::string& out) const;
  std::string Json() const;  // {"frozen": [...], "recent": [...]}

  static constexpr size_t kKeep = 50;

 private:
  ActivityGuard& OfLocked(std::string_view activity_id);
  // Moves a freeze of frozen_ to history_ and thaws its guard. Under mutex_.
  void ThawLocked(ActivityGuard& guard, ActivityFreeze freeze);

  const base::Clock& clock_;
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<ActivityGuard>, std::less<>> guards_;
  std::map<std::string, ActivityFreeze, std::less<>> frozen_;  // by activity
  std::deque<ActivityFreeze> history_;
  std::map<std::string, std::map<FreezeReason, int64_t>, std::less<>> freezes_total_;
  std::atomic<int64_t> frozen_count_{0};
};

}  // namespace flashsale::service
