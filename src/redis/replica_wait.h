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
// Threading: the connection's executor only, like the connection.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
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
    return boost::asio::async_initiate<Token, void(base::Result<int64_t>)>(
        [this](auto handler) { Confirm(Handler(std::move(handler))); }, token);
  }

  uint64_t waits_sent() const { return waits_sent_.value(); }
  uint64_t unconfirmed() const { return unconfirmed_.value(); }  // answered < replicas or failed

 private:
  using Group = std::vector<Handler>;
  void Confirm(Handler handler);
  void SendWait();

  Connection& connection_;
  int64_t replicas_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<Group> open_;  // confirmations waiting for the next WAIT to be sent
  base::Counter waits_sent_;
  base::Counter unconfirmed_;
};

}  // namespace flashsale::redis
