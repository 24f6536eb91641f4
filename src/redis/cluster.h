#pragma once
// Redis Cluster: the key slot function and the router, the Connection (redis/connection.h) made
// from a redis+cluster:// URL: a sibling of the single server's NodeConnection, whose instances it
// holds, one per node.
//
// The router follows the Redis Cluster specification. 16384 slots; a key's slot is the CRC16
// (XMODEM: polynomial 0x1021, initial value 0) of the key, or of its hash tag (the bytes between
// the first '{' and the first '}' after it, when that is not empty), modulo 16384. The slot map
// comes from CLUSTER SHARDS (Redis 7.0); each command is sent to the primary of its first key's
// slot, on one pipelined Connection per primary (per I/O thread: each Connection has its own
// router). Replies by which the cluster says "not here, not now":
//   MOVED <slot> <host:port>  the command did not run; the slot lives elsewhere for good. The
//                             slot is pointed at that node at once, the command resent there, and
//                             the whole map refreshed (one refresh for many MOVED replies).
//   ASK <slot> <host:port>    the slot is being migrated and this key has moved already: ASKING
//                             then the command, on that node, back to back on its pipeline; the
//                             map is unchanged.
//   TRYAGAIN, CLUSTERDOWN     did not run: retried after a backoff (at most kMaxRetries times and
//                             never past the command's deadline), then kUnavailable.
// Everything else is the node connection's answer, unchanged: kUnknownOutcome when the link broke
// after the command was written (never resent), kUnavailable when it was not written (a map
// refresh follows: a failover may have moved the slot), NOSCRIPT for the script runner (which
// reloads: SCRIPT commands go to every primary, ahead of what follows on each pipeline).
// A script call (EVAL/EVALSHA/FCALL) whose keys are in more than one slot is refused before
// anything is sent (kInvalidArgument). Commands without a key (PING, INFO) go to any primary;
// SCAN, which has none either but answers from the node's own keys, is refused unless sent to a
// node of Primaries (Connection::AsyncPrimaries, SendToNode): each primary scanned in turn.
// With ConnectionOptions::on_server (the restart watch), the router passes on what its node
// connections' handshakes report only for nodes that serve slots: a node that holds none (a
// failed primary come back as a replica) is not watched, and a node that starts serving slots
// (a replica promoted) is reported with its run_id when its connection comes up, or, if it was
// up already, when the map makes it a primary.

#include <array>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "redis/connection.h"
#include "redis/node_connection.h"

namespace flashsale::redis {

inline constexpr int kClusterSlots = 16384;

// The slot of a key (hash tags honoured).
uint16_t KeySlot(std::string_view key);

// Where a command in wire form goes. kNode: to one node, named by the id Primaries gave (a command
// without a key that reads that node's own data, such as SCAN: nothing routes it by key).
struct Route {
  enum class Kind { kSlot, kAnyPrimary, kAllPrimaries, kNode };
  Kind kind = Kind::kAnyPrimary;
  uint16_t slot = 0;
  size_t node = 0;  // kNode
};
// kInvalidArgument for a script call or XREAD whose keys span slots, or wire that is not a RESP
// array of bulk strings.
base::Result<Route> RouteOf(std::string_view wire);

class ClusterRouter final : public Connection, public std::enable_shared_from_this<ClusterRouter> {
 public:
  static constexpr int kMaxRedirects = 5;
  static constexpr int kMaxRetries = 8;

  ClusterRouter(boost::asio::any_io_executor executor, ConnectionOptions options);
  ~ClusterRouter() override;

  void Start() override;  // loads the slot map
  void Stop() override;   // stops every node connection; calls waiting for the map are cancelled
  // The primaries of the slot map, once it is loaded (a call before that waits for it, until
  // `deadline`): what a command that reads each node's own keys (SCAN) must visit, one by one with
  // SendToNode. Ids stay valid for the router's life (a node once known keeps its id).
  void Primaries(Deadline deadline, NodesHandler handler) override;
  const ClusterRouter* cluster() const override { return this; }

  // For tests and status: slot map refreshes completed, MOVED/ASK/TRYAGAIN replies seen.
  uint64_t refreshes() const { return refreshes_; }
  uint64_t moved() const { return moved_; }
  uint64_t asked() const { return asked_; }
  uint64_t retried() const { return retried_; }
  size_t primaries() const;
  // The node serving `slot` in the current map, as "host:port" (what its connection reports as its
  // node); empty when no primary is known for it.
  std::string NodeOfSlot(uint16_t slot) const;

 private:
  struct Node {
    std::string host;
    uint16_t port = 0;
    std::shared_ptr<NodeConnection> connection;
    bool primary = false;  // holds slots in the current map
    std::string run_id;    // reported by its connection's last handshake (with on_server)
  };
  struct Call {
    // (A constructor, not assignment: move-assigning an any_completion_handler wraps it in
    // itself in Boost 1.81.)
    Call(ReplyHandler h, Deadline d) : deadline(d), handler(std::move(h)) {}
    std::string wire;
    Route route;
    Deadline deadline;
    ReplyHandler handler;
    Clock::time_point sent_at;
    int redirects = 0;
    int retries = 0;
  };
  using CallPtr = std::unique_ptr<Call>;

  void DoSend(std::string_view wire, Deadline deadline, ReplyHandler handler) override;
  void DoSendToNodeOf(std::string_view key, std::string_view wire, Deadline deadline,
                      ReplyHandler handler) override;
  void DoSendToNode(const ServerNode& node, std::string_view wire, Deadline deadline,
                    ReplyHandler handler) override;
  // `route`: where it goes, instead of its first key's slot (a keyless WAIT to a slot's node, a
  // SCAN to one node).
  void SendRouted(std::string_view wire, Deadline deadline, ReplyHandler handler,
                  std::optional<Route> route);

  void Dispatch(CallPtr call);
  void SendTo(size_t node, CallPtr call, bool asking);
  void Broadcast(CallPtr call);
  void OnReply(CallPtr call, base::Result<Reply> result);
  void Retry(CallPtr call, std::string reason);
  void Finish(CallPtr call, base::Result<Reply> result);
  void Fail(CallPtr call, base::Error error);  // posted, for calls not yet given to a node

  size_t NodeFor(const std::string& host, uint16_t port);
  void RequestRefresh();
  void Refresh(size_t attempt);
  base::Status ApplyShards(const Reply& reply);
  void MapFailed(const std::string& reason);

  bool started_ = false;
  bool stopped_ = false;
  std::vector<Node> nodes_;
  std::array<int16_t, kClusterSlots> slots_{};  // node index; -1: no primary known
  bool map_loaded_ = false;
  bool refreshing_ = false;
  bool refresh_again_ = false;
  Clock::time_point last_refresh_{};
  boost::asio::steady_timer refresh_timer_;
  bool refresh_timer_armed_ = false;
  std::vector<CallPtr> waiting_for_map_;
  size_t next_any_ = 0;
  std::string last_error_ = "slot map not loaded yet";
  uint64_t refreshes_ = 0, moved_ = 0, asked_ = 0, retried_ = 0;
};

}  // namespace flashsale::redis
