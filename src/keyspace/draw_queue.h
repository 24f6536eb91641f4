#pragma once
// A lottery's admission queue (S3-3, S3-4): a request carries only its user and activity into the
// activity's queue stream and gets a ticket; queue consumers (service/draw_queue_consumer.h) run
// the same draw script for each entry, with the ticket as the draw's idempotency key, so the
// outcome is stored on the ticket in the same atomic call that decides it. Entries are read
// through the consumer group "draw" and claimed from dead consumers (not BRPOP: an entry a
// consumer took is never lost with it). A decided entry is acknowledged and deleted, so the
// stream's length is the queue's length, which is capped.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/outcome.h"
#include "keyspace/order_stream.h"
#include "redis/scripts.h"

namespace flashsale::keyspace {

struct EnqueueRequest {
  std::string_view ticket_id;  // a fresh id; the entry's draw uses it as its order id
  std::string_view user_id;
  int64_t now_ms = 0;    // admission time: the draw checks the window against it
  int64_t capacity = 0;  // entries waiting, at most
  int64_t ticket_ttl_ms = 0;
  // With a token (HMAC of user and Idempotency-Key), a retry gets the first request's ticket.
  std::string_view idempotency_token;
  int64_t idempotency_ttl_ms = 0;
  // HMAC of the user (no user id in a key name): names the set of the user's pending tickets,
  // at most as many as draws left to the user.
  std::string_view user_token;
};

enum class EnqueueOutcome { kQueued, kReplayed, kLimitReached, kFull, kUnknownActivity };

struct EnqueueResult {
  EnqueueOutcome outcome = EnqueueOutcome::kUnknownActivity;
  std::string ticket_id;  // kQueued, kReplayed
  int64_t draws = 0;      // kLimitReached: the draws the user made
};

struct TicketState {
  enum class State { kUnknown, kPending, kDecided };
  State state = State::kUnknown;
  core::Outcome outcome = core::Outcome::kUnknownActivity;  // kDecided
  int64_t draws = 0;
  std::string order_id;
  std::string prize_id;  // outcome kReserved (won)
};

class DrawQueue {
 public:
  static constexpr std::string_view kGroup = "draw";

  DrawQueue(redis::ScriptRunner& runner, std::string key_namespace);

  boost::asio::awaitable<base::Result<EnqueueResult>> Enqueue(std::string_view activity_id,
                                                              const EnqueueRequest& request);
  // The ticket as its owner sees it; kUnknown for another user's ticket or an expired one.
  boost::asio::awaitable<base::Result<TicketState>> Ticket(std::string_view activity_id,
                                                           std::string_view ticket_id,
                                                           std::string_view user_id);

  boost::asio::awaitable<base::Status> EnsureGroup(std::string_view activity_id);
  boost::asio::awaitable<base::Result<std::vector<StreamEntry>>> ReadNew(
      std::string_view activity_id, std::string_view consumer, int64_t count);
  boost::asio::awaitable<base::Result<std::vector<StreamEntry>>> Claim(std::string_view activity_id,
                                                                       std::string_view consumer,
                                                                       int64_t min_idle_ms,
                                                                       int64_t count);
  // Acknowledges and deletes decided entries (XACK, XDEL).
  boost::asio::awaitable<base::Status> Done(std::string_view activity_id,
                                            std::span<const std::string> ids);
  // Entries waiting or being drawn.
  boost::asio::awaitable<base::Result<int64_t>> Length(std::string_view activity_id);

 private:
  redis::ScriptRunner& runner_;
  std::string namespace_;
  const redis::Script& enqueue_;
  const redis::Script& ticket_;
  // Reply fields (each script's RETURNS).
  redis::IntField enqueue_code_;
  redis::StrField enqueue_ticket_id_;
  redis::IntField enqueue_draws_;
  redis::IntField ticket_state_, ticket_code_, ticket_draws_;
  redis::StrField ticket_order_id_, ticket_prize_id_;
};

}  // namespace flashsale::keyspace
