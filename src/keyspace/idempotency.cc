#include "keyspace/idempotency.h"

#include <charconv>

#include "base/ids.h"
#include "keyspace/activity_scripts.h"

namespace flashsale::keyspace {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

IdempotencyRecords::IdempotencyRecords(redis::ScriptRunner& runner, std::string key_namespace)
    : runner_(runner),
      namespace_(std::move(key_namespace)),
      namespace_keys_(namespace_),
      replay_(runner.scripts().Get("idempotency_replay")),
      found_(replay_, "found"),
      code_(replay_, "code"),
      remaining_(replay_, "remaining"),
      count_(replay_, "count"),
      order_id_(replay_, "order_id"),
      detail_(replay_, "detail") {}

asio::awaitable<Result<KeyReplay>> IdempotencyRecords::Replay(std::string_view activity_id,
                                                              std::string_view token,
                                                              std::string_view user_id,
                                                              int64_t quantity) {
  if (!core::IsValidActivityId(activity_id) || !base::IsValidId(token) ||
      !base::IsValidId(user_id)) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "replay: the activity id, the key's token and the user must be ids");
  }
  const ActivityKeys keys(namespace_, activity_id);
  const std::string idem = keys.Idempotency(token);
  redis::ScriptCall call(replay_);
  call.Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Key("prizes", keys.prizes())
      .Key("orders", keys.orders())
      .Key("idem", idem)
      .Arg("user_id", user_id)
      .Arg("quantity", quantity);
  auto reply = co_await redis::Await(runner_, call);
  auto read = redis::ScriptReply::Read(replay_, reply);
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

namespace {

base::Status CheckToken(std::string_view token) {
  if (base::IsValidId(token)) return {};
  return MakeError(ErrorCode::kInvalidArgument, "an idempotency key's token must be an id");
}

}  // namespace

asio::awaitable<Result<KeyClaim>> IdempotencyRecords::Claim(std::string_view token,
                                                            std::string_view fingerprint,
                                                            int64_t ttl_ms) {
  if (auto valid = CheckToken(token); !valid) co_return std::move(valid).error();
  if (ttl_ms < 1) co_return MakeError(ErrorCode::kInvalidArgument, "claim ttl must be >= 1 ms");
  char ttl[24];
  const auto end = std::to_chars(ttl, ttl + sizeof ttl, ttl_ms).ptr;
  const std::string key = namespace_keys_.IdempotencyClaim(token);
  const redis::Command set(
      {"SET", key, fingerprint, "NX", "GET", "PX", std::string_view(ttl, end - ttl)});
  auto reply = co_await redis::Await(runner_.connection(), set);
  if (!reply.ok()) co_return std::move(reply).error();
  if (reply->is_nil()) co_return KeyClaim{};
  if (!reply->is_string()) {
    co_return MakeError(ErrorCode::kProtocol, "SET NX GET: unexpected {}", reply->Describe());
  }
  if (reply->str() == fingerprint) co_return KeyClaim{.state = KeyClaim::State::kSame};
  co_return KeyClaim{.state = KeyClaim::State::kOther, .held = std::string(reply->str())};
}

asio::awaitable<Result<std::optional<std::string>>> IdempotencyRecords::Claimed(
    std::string_view token) {
  if (auto valid = CheckToken(token); !valid) co_return std::move(valid).error();
  const std::string key = namespace_keys_.IdempotencyClaim(token);
  const redis::Command get({"GET", key});
  auto reply = co_await redis::Await(runner_.connection(), get);
  if (!reply.ok()) co_return std::move(reply).error();
  if (reply->is_nil()) co_return std::optional<std::string>();
  if (!reply->is_string()) {
    co_return MakeError(ErrorCode::kProtocol, "GET: unexpected {}", reply->Describe());
  }
  co_return std::optional<std::string>(std::string(reply->str()));
}

asio::awaitable<base::Status> IdempotencyRecords::Unclaim(std::string_view token) {
  if (auto valid = CheckToken(token); !valid) co_return std::move(valid).error();
  const std::string key = namespace_keys_.IdempotencyClaim(token);
  const redis::Command del({"DEL", key});
  auto reply = co_await redis::Await(runner_.connection(), del);
  if (!reply.ok()) co_return std::move(reply).error();
  co_return base::Status();
}

}  // namespace flashsale::keyspace
