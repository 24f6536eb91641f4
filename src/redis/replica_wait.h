#pragma once
// Durability mode `wait`: a write acknowledged to a buyer only once a replica has it.
//
// Redis's WAIT numreplicas timeout blocks the calling client until the replicas have
// acknowledged every write that client made before it, and answers how many did. So one WAIT,
// sent on the same connection after several writes' replies, covers them all: ReplicaWait
// gathers the confirmations asked for while one event-loop turn runs (the replies read together)
// and sends one WAIT for the lot. The connection's later commands queue behind the WAIT in Redis
// (a blocked client), which is the price of the mode: each connection's throughput is bounded by
// the replica's acknowledgement round trip.
//
// A confirmation answers the number of replicas that acknowledged (>= replicas: durable on them),
// or the connection's error: kUnavailable (WAIT never sent: the write's durability is unknown),
// kUnknownOutcome (sent, no reply). Fewer replicas than asked within the timeout is not an
// error here; the caller decides (the buyer is told the outcome is unknown, never plain success).
//
// On a Redis Cluster the write went to the primary of its key's slot, on the router's connection
// to that node, and WAIT must go there too (to another node it would count that node's replicas
// for writes it never took): AsyncConfirm(key, ...) groups the confirmations per slot and sends
// each group's WAIT to the node of that slot (Connection::SendToNodeOf). A write redirected by
// ASK during a slot migration went to the importing node, and its WAIT to the slot's owner: its
// confirmation is then not proof (a migration is an operator's act, not a failure).
//
// Threading: the connection's executor only, like the connection.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/metrics.h"
#include "base/result.h"
#include "redis/connection.h"

namespace flashsale::redis {

class ReplicaWait {
 public:
  using Handler = boost::asio::any_completion_handler<void(base::Result<int64_t>)>;

  ReplicaWait(Connection& connection, int64_t replicas, std::chrono::milliseconds timeout);
  ReplicaWait(const ReplicaWait&) = delete;
  ReplicaWait& operator=(const ReplicaWait&) = delete;

  int64_t replicas() const { return replicas_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Call after a write's reply arrived on the connection: completes when a WAIT sent after this
  // call has answered, with the number of replicas that acknowledged.
  template <typename Token>
  auto AsyncConfirm(Token&& token) {
    return AsyncConfirm(std::string_view(), std::forward<Token>(token));
  }
  // `key`: a key the write touched (on a cluster, its slot's node gets the WAIT).
  template <typename Token>
  auto AsyncConfirm(std::string_view key, Token&& token) {
    return boost::asio::async_initiate<Token, void(base::Result<int64_t>)>(
        [this](auto handler, std::string_view k) { Confirm(k, Handler(std::move(handler))); },
        token, key);
  }

  uint64_t waits_sent() const { return waits_sent_.value(); }
  uint64_t unconfirmed() const { return unconfirmed_.value(); }  // answered < replicas or failed

 private:
  using Group = std::vector<Handler>;
  void Confirm(std::string_view key, Handler handler);
  void SendWait(int slot);

  Connection& connection_;
  int64_t replicas_;
  std::chrono::milliseconds timeout_;
  // Confirmations waiting for the next WAIT to be sent, by slot (-1: no key, a single server).
  std::map<int, std::shared_ptr<Group>> open_;
  std::map<int, std::string> key_of_;  // a key of each open slot, to route its WAIT
  base::Counter waits_sent_;
  base::Counter unconfirmed_;
};

}  // namespace flashsale::redis
