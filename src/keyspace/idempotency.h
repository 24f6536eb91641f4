#pragma once
// What an Idempotency-Key's first request left in Redis, read for a retry that a local gate
// refused (service/replay.h): the idempotency record the reserve, draw and enqueue scripts write
// under the activity's key idem:<token> (activity_scripts.h, "Key layout"), and the order it names,
// as the order is now (idempotency_replay.lua, a read-only script).
//
// And the key's claim, service-wide (<ns>:idem:{<token>}, NamespaceKeys): the fingerprint of the
// request the key was first used with, so that the same user's key sent with another activity,
// action or quantity is refused. An activity's scripts see only that activity's keys (one Cluster
// slot), so this is a key of its own, one command before the script: SET NX GET, kept while the
// key's request made something, dropped after a refusal (a refusal keeps nothing).

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "core/outcome.h"
#include "keyspace/service_state.h"
#include "redis/scripts.h"

namespace flashsale::keyspace {

// A key's first outcome, as a replay reports it.
struct KeyReplay {
  enum class Kind {
    kNone,     // the key is not known here (never seen, expired, or its request was refused)
    kOutcome,  // an order as it is now (or an earlier refusal a previous version kept)
    kTicket,   // a queued draw's ticket (order_id)
  };
  Kind kind = Kind::kNone;
  core::Outcome outcome = core::Outcome::kUnknownActivity;  // kOutcome
  int64_t remaining = 0;                                    // units (prize units) left
  int64_t count = 0;     // a sale's order: its units (0: not known); a draw: the user's draws
  std::string order_id;  // the order's id, or the ticket's
  std::string detail;    // a sale's order: its item ids, space-separated; a win: its prize id
};

// What claiming a key found.
struct KeyClaim {
  enum class State {
    kClaimed,  // the key was free: claimed now for this request
    kSame,     // claimed before for a request with the same fingerprint (a retry)
    kOther,    // claimed for another request: `held` is its fingerprint
  };
  State state = State::kClaimed;
  std::string held;
};

class IdempotencyRecords {
 public:
  // `runner` must outlive this object; calls run on its connection's thread.
  IdempotencyRecords(redis::ScriptRunner& runner, std::string key_namespace);

  // The first outcome of the user's key `token` (HMAC of user and key) in the activity, for a
  // request of `quantity` (a sale's key kept with another quantity: kKeyReused).
  boost::asio::awaitable<base::Result<KeyReplay>> Replay(std::string_view activity_id,
                                                         std::string_view token,
                                                         std::string_view user_id,
                                                         int64_t quantity);

  // Claims the key for `fingerprint` for `ttl_ms` unless it is claimed (SET NX GET PX).
  boost::asio::awaitable<base::Result<KeyClaim>> Claim(std::string_view token,
                                                       std::string_view fingerprint,
                                                       int64_t ttl_ms);
  // The fingerprint the key is claimed for, if it is (GET).
  boost::asio::awaitable<base::Result<std::optional<std::string>>> Claimed(std::string_view token);
  // Drops the claim (DEL): its request made nothing.
  boost::asio::awaitable<base::Status> Unclaim(std::string_view token);

 private:
  redis::ScriptRunner& runner_;
  std::string namespace_;
  NamespaceKeys namespace_keys_;
  const redis::Script& replay_;
  redis::IntField found_, code_, remaining_, count_;
  redis::StrField order_id_, detail_;
};

}  // namespace flashsale::keyspace
