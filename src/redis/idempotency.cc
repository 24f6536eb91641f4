#include "redis/idempotency.h"

#include "base/ids.h"
#include "redis/seckill.h"

namespace flashsale::redis {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

IdempotencyRecords::IdempotencyRecords(ScriptRunner& runner, std::string key_namespace)
    : runner_(runner),
      namespace_(std::move(key_namespace)),
      replay_(runner.scripts().Get("idempotency_replay")),
      found_(replay_, "found"),
      code_(replay_, "code"),
      remaining_(replay_, "remaining"),
      count_(replay_, "count"),
      order_id_(replay_, "order_id"),
      detail_(replay_, "detail") {}

asio::awaitable<Result<KeyReplay>> IdempotencyRecords::Replay(std::string_view activity_id,
                                                              std::string_view token,
                                                              std::string_view user_id) {
  if (!core::IsValidActivityId(activity_id) || !base::IsValidId(token) ||
      !base::IsValidId(user_id)) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "replay: the activity id, the key's token and the user must be ids");
  }
  const SeckillKeys keys(namespace_, activity_id);
  const std::string idem = keys.Idempotency(token);
  ScriptCall call(replay_);
  call.Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Key("prizes", keys.prizes())
      .Key("orders", keys.orders())
      .Key("idem", idem)
      .Arg("user_id", user_id);
  auto reply = co_await Await(runner_, call);
  auto read = ScriptReply::Read(replay_, reply);
  if (!read) co_return std::move(read).error();
  KeyReplay replay;
  const int64_t found = read->Int(found_);
  if (found == 0) co_return replay;
  if (found != 1 && found != 2) {
    co_return MakeError(ErrorCode::kProtocol, "script {} returned unknown code {}", replay_.name,
                        found);
  }
  if (auto tail = read->NeedTail(); !tail) co_return tail.error();
  replay.order_id = read->Str(order_id_);
  if (found == 2) {
    replay.kind = KeyReplay::Kind::kTicket;
    co_return replay;
  }
  auto outcome = core::OutcomeFromCode(read->Int(code_));
  if (!outcome) {
    co_return MakeError(ErrorCode::kProtocol, "script {} returned unknown code {}", replay_.name,
                        read->Int(code_));
  }
  replay.kind = KeyReplay::Kind::kOutcome;
  replay.outcome = *outcome;
  replay.remaining = read->Int(remaining_);
  replay.count = read->Int(count_);
  replay.detail = read->Str(detail_);
  co_return replay;
}

}  // namespace flashsale::redis
