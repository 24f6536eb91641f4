#pragma once
// A pipelined connection to Redis, owned by one I/O thread and shared by every request on it.
//
// Design note. A flash sale is thousands of tiny script calls per second from one process, so
// the connection never waits for a reply before sending the next command: commands are appended
// to an output buffer, written together in one syscall when the current handler finishes
// (coalescing), and replies are matched to commands in order (Redis answers in order on a
// connection). hiredis is used only to format commands and to parse replies; all I/O is Asio.
//
// Every command has a deadline. What a failure means for the caller is spelled out in the error
// code, because it decides whether a retry is safe:
//   kUnavailable     the command was never written: it did not run, a retry is safe.
//   kUnknownOutcome  the command was written but no reply came (timeout, connection lost): it may
//                    or may not have run. Never retry it blindly; make it idempotent (the reserve
//                    script is idempotent on its order id) or reconcile.
//   kRemote          Redis replied with an error (the message is Redis's own text), except the
//                    replies by which Redis says it cannot run anything right now (LOADING,
//                    BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN): those did not run either and are
//                    kUnavailable.
//   kResourceExhausted / kCancelled  too many commands queued / the connection was stopped.
// Where a caller acts on which failure it was, the error's detail says it (base::ErrorDetail):
// kDeadline on the two deadline errors, and an error reply's first word read once, here
// (ErrorDetailOf: NOGROUP, NOSCRIPT, FENCED, no such key), never searched for in the message
// later.
// The connection itself never retries a command. When the link breaks it reconnects in the
// background with exponential backoff; while it waits, calls fail at once (kUnavailable) instead
// of piling up, so a flash sale with Redis down answers quickly and loses nothing.
//
// A redis+cluster:// endpoint makes a cluster client with the same interface and the same
// failure codes (redis/cluster.h): commands are routed by key slot to one pipelined connection per
// primary, redirections followed. The single server's connection is redis/node_connection.h.
//
// Threading: all member functions must be called on the connection's executor (one thread).
// Completion handlers run through their associated executor.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/metrics.h"
#include "base/result.h"
#include "redis/command.h"
#include "redis/reply.h"
#include "redis/url.h"

namespace flashsale::redis {

class ClusterRouter;

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
using ReplyHandler = boost::asio::any_completion_handler<void(base::Result<Reply>)>;

// One server a command can be sent to by itself (Connection::SendToNode): on a cluster one of its
// primaries, on a single server the server.
struct ServerNode {
  size_t id = 0;        // the cluster router's node id; 0 on a single server
  std::string address;  // host:port, or the socket path: for messages
};
using NodesHandler =
    boost::asio::any_completion_handler<void(base::Result<std::vector<ServerNode>>)>;

struct ConnectionOptions {
  Endpoint endpoint;
  std::chrono::milliseconds connect_timeout{1000};  // TCP connect + AUTH/SELECT
  std::chrono::milliseconds command_timeout{1000};  // default deadline of a command
  // With commands in flight and no byte read for this long, the link is declared dead (a peer
  // that vanished without a reset): in-flight commands are reported unknown and a new
  // connection is made.
  std::chrono::milliseconds stall_timeout{10000};
  std::chrono::milliseconds backoff_initial{20};
  std::chrono::milliseconds backoff_max{1000};
  size_t max_queued = 100000;  // commands waiting + in flight; more is kResourceExhausted
  uint64_t jitter_seed = 0;    // 0: seeded from std::random_device
  // Which Redis is behind each new link (a restart or a failover changes it): when set, the
  // handshake also sends INFO server and calls this with the server's run_id before any other
  // command goes out. It returns false when commands queued before the link was up must not be
  // sent to this server (it may have lost writes and is not repaired yet): they fail with
  // kUnavailable (never sent). Called on the connection's thread; must be thread-safe when the
  // options are shared by several connections.
  // `node` names the server's address (host:port, or the socket path), so a watch over a
  // cluster's node connections tells its nodes apart.
  std::function<bool(std::string_view node, std::string_view run_id)> on_server;
  // Cluster only: a node the router had met (its connection up, its run_id reported) that the
  // slot map now makes a primary (a replica promoted, a failed primary promoted back): it may
  // lack writes its old primary acknowledged, whatever its run_id. Called on the router's thread.
  std::function<void(std::string_view node, std::string_view run_id)> on_promoted;
  // Called when an established link breaks (on the connection's thread).
  std::function<void()> on_link_lost;
  // Set by the cluster router on its node connections: TRYAGAIN and CLUSTERDOWN come back as
  // kRemote with Redis's text (the router retries them), not as kUnavailable.
  bool cluster_node = false;
};

// Written by the connection's thread, readable from any thread (the /metrics scraper).
struct ConnectionStats {
  base::Counter commands;          // accepted by Send
  base::Counter replies;           // replies read (including ones for timed-out commands)
  base::Counter writes;            // write syscalls started (commands / writes = coalescing)
  base::Counter timeouts;          // commands that hit their deadline
  base::Counter connects;          // successful connects (handshake done)
  base::Counter connect_failures;  // failed connect attempts
  base::Counter disconnects;       // established links that broke
  base::Counter unavailable;       // calls answered kUnavailable (did not run)
  base::Counter unknown_outcome;   // calls answered kUnknownOutcome
  base::Counter remote_errors;     // error replies
  base::LatencyHistogram latency;  // Send to reply, for commands that got one

  // A call answered with an error of this code: unavailable, unknown_outcome or remote_errors
  // (others are not counted here). The single-node connection and the cluster router both count
  // with it.
  void CountError(base::ErrorCode code);
};

// The detail of an error reply, from its first word: NOGROUP -> kNoGroup, NOSCRIPT -> kNoScript,
// FENCED (our scripts' refusal of a stale fencing token) -> kFenced, "ERR no such key" (XINFO on a
// missing key) -> kNoSuchKey; any other -> kNone.
base::ErrorDetail ErrorDetailOf(std::string_view error_reply);

// The value of `name` in an INFO reply ("run_id:abc\r\n" -> "abc"); empty if absent.
std::string InfoField(std::string_view info, std::string_view name);

// A connection to Redis as its users see it, whatever is behind it: one server (NodeConnection,
// redis/node_connection.h) or a cluster (ClusterRouter, redis/cluster.h), siblings made by
// Create from the endpoint. Both keep the failure codes above.
class Connection {
 public:
  // A NodeConnection for a single server, a ClusterRouter for a redis+cluster:// endpoint.
  static std::shared_ptr<Connection> Create(boost::asio::any_io_executor executor,
                                            ConnectionOptions options);
  virtual ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Begins connecting (a cluster: loading its slot map). Commands sent before the link is up wait
  // for it (until their deadline).
  virtual void Start() = 0;
  // Closes the link for good. Commands in flight complete with kUnknownOutcome, queued ones with
  // kCancelled. Idempotent.
  virtual void Stop() = 0;

  // Sends one command in wire form (the bytes are copied before Send returns). The handler is
  // called exactly once, never from inside Send.
  void Send(std::string_view wire, Deadline deadline, ReplyHandler handler) {
    ++sequence_;
    DoSend(wire, deadline, std::move(handler));
  }
  // The same, for a command without a key that must reach the node serving `key`'s slot on a
  // cluster (WAIT after a write to that key: WAIT covers the writes of its own client, the node
  // connection). On a single server, Send.
  void SendToNodeOf(std::string_view key, std::string_view wire, Deadline deadline,
                    ReplyHandler handler) {
    ++sequence_;
    DoSendToNodeOf(key, wire, deadline, std::move(handler));
  }

  // The servers that hold the data between them, for a command without a key that reads or acts
  // on one server's own keys (SCAN): on a cluster the primaries of the slot map (waiting for the
  // map up to `deadline` when it is not loaded yet), on a single server the server itself. Such a
  // command goes to each of them in turn by SendToNode. The handler is called exactly once, never
  // from inside Primaries.
  virtual void Primaries(Deadline deadline, NodesHandler handler) = 0;
  // Sends one command to one of those servers (on a single server, Send).
  void SendToNode(const ServerNode& node, std::string_view wire, Deadline deadline,
                  ReplyHandler handler) {
    ++sequence_;
    DoSendToNode(node, wire, deadline, std::move(handler));
  }

  template <typename Token>
  auto AsyncPrimaries(Deadline deadline, Token&& token) {
    return boost::asio::async_initiate<Token, void(base::Result<std::vector<ServerNode>>)>(
        [this](auto handler, Deadline d) { Primaries(d, NodesHandler(std::move(handler))); }, token,
        deadline);
  }
  template <typename Token>
  auto AsyncSendToNode(const ServerNode& node, const Command& command, Deadline deadline,
                       Token&& token) {
    return boost::asio::async_initiate<Token, void(base::Result<Reply>)>(
        [this](auto handler, const ServerNode& n, std::string_view wire, Deadline d) {
          SendToNode(n, wire, d, ReplyHandler(std::move(handler)));
        },
        token, node, command.wire(), deadline);
  }

  template <typename Token>
  auto AsyncSend(const Command& command, Deadline deadline, Token&& token) {
    return boost::asio::async_initiate<Token, void(base::Result<Reply>)>(
        [this](auto handler, std::string_view wire, Deadline d) {
          Send(wire, d, ReplyHandler(std::move(handler)));
        },
        token, command.wire(), deadline);
  }
  template <typename Token>
  auto AsyncSend(const Command& command, Token&& token) {
    return AsyncSend(command, DefaultDeadline(), std::forward<Token>(token));
  }

  Deadline DefaultDeadline() const { return Clock::now() + options_.command_timeout; }
  // The sequence number the next Send will get. Sequence order is wire order, so a command with a
  // higher number runs after one with a lower number on this connection.
  uint64_t next_sequence() const { return sequence_; }
  // Every call through this connection: commands, replies, errors by kind, timeouts, latency (on a
  // cluster, link events happen on its node connections and are logged, not counted here).
  const ConnectionStats& stats() const { return stats_; }
  const ConnectionOptions& options() const { return options_; }
  // The cluster router when this is one, else null.
  virtual const ClusterRouter* cluster() const { return nullptr; }
  const boost::asio::any_io_executor& executor() const { return executor_; }

 protected:
  Connection(boost::asio::any_io_executor executor, ConnectionOptions options)
      : executor_(std::move(executor)), options_(std::move(options)) {}

  virtual void DoSend(std::string_view wire, Deadline deadline, ReplyHandler handler) = 0;
  virtual void DoSendToNodeOf(std::string_view key, std::string_view wire, Deadline deadline,
                              ReplyHandler handler) = 0;
  virtual void DoSendToNode(const ServerNode& node, std::string_view wire, Deadline deadline,
                            ReplyHandler handler) = 0;

  boost::asio::any_io_executor executor_;
  ConnectionOptions options_;
  ConnectionStats stats_;

 private:
  uint64_t sequence_ = 1;
};

}  // namespace flashsale::redis
