#pragma once
// Redis restarting or failing over (issue "When Redis fails", points 4 and 7): a process-wide
// watch that notices the event, freezes the sale until the lost-write repair
// (service/redis_repair.h) has run for the Redis now behind the endpoint, and keeps what
// happened for admin status, /metrics and the dashboard.
//
// Design note. A Redis that restarted (from its AOF or an RDB snapshot, cut back or not) or a
// replica promoted in its place is another process, with another `run_id`; every link to the
// old one broke. So every connection of the process reports the run_id it finds in its handshake
// (redis::ConnectionOptions::on_server), before any other command goes out on the new link. A
// run_id this process has not seen confirmed freezes it at once: the purchase and draw gates
// (service/admission.cc) answer 503 with Retry-After, counted, and queue consumers do not draw;
// commands queued on the link before it was up are not sent to that server. Each instance
// freezes on its own connections: none relies on another instance having seen the event, and an
// instance started after the event starts frozen.
//
// The freeze ends when Redis itself says the repair for this run_id is done: the repair writes
// the marker hash <namespace>:redis:repaired {run_id, epoch, summary} as its last step, and every
// instance polls it while frozen (the marker restored from a snapshot, or replicated to a promoted
// replica, names an older run_id, so it never ends a freeze it should not). The epoch is the
// record's fence (store::Store::AdvanceFence): bumped before the repair reads the record, it
// refuses order batches read from a Redis before the event.
//
// On a Redis Cluster every primary is a server of its own: the watch follows one run_id per node
// (the node connection's address, as each connection reports it with its run_id), so a primary
// restarted in place (same address, another run_id), a replica promoted in a failed primary's
// place (a node the router had not used, now serving its slots) and a node the router knew that
// the cluster makes a primary again (the same run_id: it may lack what its primary had) are all
// events. A node's event freezes the activities whose slots it serves (the gate asks the thread's
// router which node serves an activity, ServiceContext::Frozen); the others keep selling. On one
// server, its event freezes every activity. The repair writes a marker only for the servers it
// repaired (their run_ids when it began, unchanged when it ended).
//
// These run_id events are early warnings: they freeze first and ask questions after. What the
// correctness rests on is the data: every activity's write sequence, checked by the scripts
// against a floor (service/activity_guard.h), whose per-activity freezes this watch holds too
// (activities()).

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
#include "redis/connection.h"
#include "service/activity_guard.h"

namespace flashsale::service {

// What one repair found and did, summed over the activities.
struct RepairSummary {
  std::vector<std::string> activities;  // the activities that were frozen and repaired
  int64_t orders_applied = 0;           // live orders of the record applied to Redis again
  int64_t units_applied = 0;
  int64_t rebuilt = 0;            // activities Redis no longer had at all, rebuilt
  int64_t oversold_units = 0;     // units applied that Redis had sold again meanwhile
  int64_t flagged_orders = 0;     // orders flagged for compensation in the record
  int64_t acknowledged_lost = 0;  // replies that said "reserved" whose order exists nowhere
  int64_t epoch = 0;
  std::string Json() const;
  // Adds `other`'s counts to these (not its activities or epoch): the process's totals.
  void AddCounts(const RepairSummary& other);
};

struct RedisEvent {
  std::string node;         // the node it happened on (its address); "" for a single server
  std::string from_run_id;  // empty: the first server this process saw (or a new cluster node)
  std::string to_run_id;    // the new run_id (on a cluster, the new run_ids, space-separated)
  bool startup = false;     // the servers found at startup, not a restart or failover
  int64_t lost_ms = 0;      // the last link lost before it (0: none seen)
  int64_t back_ms = 0;      // the new server seen: frozen from here
  int64_t repaired_ms = 0;  // the repair confirmed: unfrozen (0: still frozen)
  int64_t refused = 0;      // purchases and draws refused while frozen
  RepairSummary summary;
};

class RedisWatch {
 public:
  explicit RedisWatch(const base::Clock& clock);

  // Sets on_server and on_link_lost of `options` to this watch.
  void Hook(redis::ConnectionOptions& options);
  // From any connection's handshake, with the node it is connected to (a single server: one node,
  // ""): false when queued commands must not be sent.
  bool OnServer(std::string_view node, std::string_view run_id);
  bool OnServer(std::string_view run_id) { return OnServer("", run_id); }
  // A cluster node the router knew that now serves slots (a replica promoted): an event even with
  // the run_id seen before, since it may lack writes its primary acknowledged.
  void OnPromoted(std::string_view node, std::string_view run_id);
  void OnLinkLost();

  // Some node's event is not repaired yet (or nothing was confirmed since the start).
  bool frozen() const { return frozen_.load(std::memory_order_acquire); }
  // Whether `node`'s event is not repaired yet (or nothing was confirmed since the start). A node
  // the watch has not met is not frozen (its connection's handshake reports it first).
  bool NodeFrozen(std::string_view node) const;
  // The fence epoch of the last repair this process confirmed or learned of (0: none yet): what
  // order batches are written under.
  int64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  // `activity_id` is served by `node`, whose server changed after startup and is not repaired
  // yet: the activity's freeze is kept as its own (reason server_changed: admin status's
  // activities, /metrics) until that repair is confirmed. Nothing when the node is not frozen.
  // `node` empty: one server, the node its connections reported.
  void FreezeForNode(std::string_view activity_id, std::string_view node);
  // A repair elsewhere advanced the record's fence to `epoch` (the record refused a batch read
  // under an older one): batches read from now on carry it.
  void AdoptEpoch(int64_t epoch);
  // Bumped whenever a node's server changes (another run_id, a promotion): a repair that saw it
  // change while it ran starts over.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  std::string run_id() const;  // the server seen last
  // The servers seen and not confirmed yet (what a repair must confirm): their run_ids, and by
  // node (address -> run_id).
  std::vector<std::string> Pending() const;
  std::map<std::string, std::string> PendingNodes() const;
  std::vector<std::string> Seen() const;
  // The record's fence when the open event was first handled (-1: not yet): a marker written
  // under an older epoch predates the event and confirms nothing.
  int64_t event_fence() const;
  // The open event is the servers found at startup (not a restart or failover seen live).
  bool startup_open() const;
  void SetEventFence(int64_t fence);

  // Per-activity floors and freezes (service/activity_guard.h).
  ActivityGuards& activities() { return activities_; }
  const ActivityGuards& activities() const { return activities_; }

  // The repair for these run_ids is done (here or elsewhere): the nodes still on one of them are
  // confirmed; unfrozen when no node is left unconfirmed.
  void Confirm(const std::vector<std::string>& run_ids, int64_t epoch,
               const RepairSummary& summary);
  void Confirm(std::string_view run_id, int64_t epoch, const RepairSummary& summary) {
    Confirm(std::vector<std::string>{std::string(run_id)}, epoch, summary);
  }
  void CountRefused();

  // Acknowledged orders: every reservation answered "reserved" to a buyer is kept a while
  // (bounded: the last kAcknowledgedKept, none older than kAcknowledgedMaxAgeMs), so that after
  // an event the orders this instance acknowledged that exist neither in Redis nor in the record
  // can be counted (CountAcknowledgedLost in service/redis_repair.h) where no trace survived.
  // On every reservation's path: a fixed ring allocated once, activity ids interned, so a call
  // allocates nothing in steady state (an id over kIdBytes is not kept).
  void Acknowledged(std::string_view activity_id, std::string_view order_id);
  // True once after each event's repair was confirmed, or an activity thawed (the check is due).
  bool TakeLostCheckDue();
  void RequestLostCheck();
  // A per-activity repair's figures, added to the totals /metrics shows (an event's repair adds
  // its own through Confirm).
  void CountActivityRepair(const RepairSummary& summary);
  // The acknowledged orders kept, by activity.
  std::map<std::string, std::vector<std::string>> AcknowledgedOrders() const;
  // These orders were found nowhere: counted on the last event (and the totals), forgotten.
  void CountAcknowledgedLost(const std::vector<std::string>& order_ids);

  std::vector<RedisEvent> Events() const;  // oldest first, at most kKeep
  std::string Json() const;                // {"frozen":..., "run_id":..., "events":[...]}
  void AppendPrometheus(std::string& out) const;

  static constexpr size_t kKeep = 20;
  static constexpr size_t kAcknowledgedKept = 100'000;
  static constexpr int64_t kAcknowledgedMaxAgeMs = 600'000;
  static constexpr size_t kIdBytes = 64;  // base::IsValidId's longest id

 private:
  const base::Clock& clock_;
  std::atomic<bool> frozen_{true};  // nothing confirmed yet
  std::atomic<int64_t> epoch_{0};
  std::atomic<uint64_t> generation_{0};
  ActivityGuards activities_;
  int64_t event_fence_ = -1;
  struct Node {
    std::string seen;      // run_id of the server seen last on this node
    bool pending = false;  // seen and not confirmed since
  };
  // A node's server changed (another run_id, or promoted): freezes it, opening an event or
  // joining the open one. Under mutex_.
  void OpenEvent(std::string_view node_name, Node& node, std::string_view run_id,
                 std::string_view what);
  mutable std::mutex mutex_;
  std::map<std::string, Node, std::less<>> nodes_;
  std::string last_;            // run_id seen last, on any node
  bool any_confirmed_ = false;  // a repair was confirmed once (after startup)
  int64_t lost_ms_ = 0;
  std::deque<RedisEvent> events_;
  int64_t frozen_ms_total_ = 0;
  int64_t refused_total_ = 0;
  int64_t events_total_ = 0;
  RepairSummary totals_;
  std::deque<int64_t> counted_epochs_;  // the epochs of the last repairs added to totals_
  struct Ack {
    int64_t at_ms;
    uint32_t activity;   // index into ack_activities_
    uint8_t order_size;  // 0: forgotten (counted lost)
    char order_id[kIdBytes];
    std::string_view order() const { return {order_id, order_size}; }
  };
  // The ring: ack_size_ entries from ack_head_, allocated on the first acknowledgement.
  std::unique_ptr<Ack[]> acks_;
  size_t ack_head_ = 0;
  size_t ack_size_ = 0;
  Ack& AckAt(size_t i) const { return acks_[(ack_head_ + i) % kAcknowledgedKept]; }
  std::vector<std::string> ack_activities_;
  std::map<std::string, uint32_t, std::less<>> ack_activity_index_;
  bool lost_check_due_ = false;
};

// The message of the 503 a frozen gate answers (no internal detail).
inline constexpr std::string_view kFrozenMessage =
    "the sale is paused while its stock is checked against the record (at the service's start, "
    "or after Redis restarted, failed over or lost writes); retry shortly";
// The error a frozen gate answers (kUnavailable: nothing was done; a 503 with Retry-After).
inline base::Error FrozenError() {
  return base::MakeError(base::ErrorCode::kUnavailable, base::ErrorDetail::kFrozen, "{}",
                         kFrozenMessage);
}

}  // namespace flashsale::service
