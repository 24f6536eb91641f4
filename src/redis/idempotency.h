#pragma once
// What an Idempotency-Key's first request left in Redis, read for a retry that a local gate
// refused (service/replay.h): the idempotency record the reserve, draw and enqueue scripts write
// under the activity's key idem:<token> (seckill.h, "Key layout"), and the order it names, as the
// order is now (idempotency_replay.lua, a read-only script).

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "core/outcome.h"
#include "redis/scripts.h"

namespace flashsale::redis {

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

class IdempotencyRecords {
 public:
  // `runner` must outlive this object; calls run on its connection's thread.
  IdempotencyRecords(ScriptRunner& runner, std::string key_namespace);

  // The first outcome of the user's key `token` (HMAC of user and key) in the activity.
  boost::asio::awaitable<base::Result<KeyReplay>> Replay(std::string_view activity_id,
                                                         std::string_view token,
                                                         std::string_view user_id);

 private:
  ScriptRunner& runner_;
  std::string namespace_;
  const Script& replay_;
  IntField found_, code_, remaining_, count_;
  StrField order_id_, detail_;
};

}  // namespace flashsale::redis
