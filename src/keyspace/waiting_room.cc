#include "keyspace/waiting_room.h"

#include <fmt/format.h>

#include <boost/asio/use_awaitable.hpp>

#include "base/ids.h"
#include "keyspace/activity_scripts.h"

namespace flashsale::keyspace {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

RoomKeys::RoomKeys(std::string_view key_namespace, std::string_view activity_id)
    // The same prefix and hash tag as ActivityKeys: the room's slot is its activity's.
    : room(fmt::format("{}:seckill:{{{}}}:room", key_namespace, activity_id)), seq(room + ":seq") {}

WaitingRoomStore::WaitingRoomStore(redis::ScriptRunner& runner, std::string key_namespace)
    : runner_(runner),
      namespace_(std::move(key_namespace)),
      join_(runner.scripts().Get("room_join")),
      place_(runner.scripts().Get("room_place")),
      join_code_(join_, "code"),
      join_rank_(join_, "rank"),
      join_size_(join_, "size"),
      place_rank_(place_, "rank"),
      place_size_(place_, "size"),
      place_remaining_(place_, "remaining") {}

asio::awaitable<Result<RoomJoinResult>> WaitingRoomStore::Join(std::string_view activity_id,
                                                               const RoomJoinRequest& request) {
  if (!base::IsValidId(request.user_id) || request.draw >= kDrawBound || request.max_waiting < 1) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "room join: user, draw and max_waiting must be valid");
  }
  const RoomKeys keys(namespace_, activity_id);
  const std::string draw = std::to_string(request.draw);
  redis::ScriptCall call(join_);
  call.Key("room", keys.room)
      .Key("seq", keys.seq)
      .Arg("user_id", request.user_id)
      .Arg("now_ms", request.now_ms)
      .Arg("start_ms", request.start_ms)
      .Arg("draw", draw)
      .Arg("admitted", request.admitted)
      .Arg("max_waiting", request.max_waiting);
  auto reply = co_await redis::Await(runner_, call);
  auto read = redis::ScriptReply::Read(join_, reply);
  if (!read) co_return std::move(read).error();
  RoomJoinResult result;
  switch (read->Int(join_code_)) {
    case 1:
      result.outcome = RoomJoinResult::Outcome::kJoined;
      break;
    case 2:
      result.outcome = RoomJoinResult::Outcome::kAlreadyJoined;
      break;
    default:
      result.outcome = RoomJoinResult::Outcome::kFull;
      break;
  }
  result.rank = read->Int(join_rank_);
  result.size = read->Int(join_size_);
  co_return result;
}

asio::awaitable<Result<RoomPlace>> WaitingRoomStore::Place(std::string_view activity_id,
                                                           std::string_view user_id, int64_t now_ms,
                                                           int64_t start_ms) {
  const RoomKeys keys(namespace_, activity_id);
  const ActivityKeys activity(namespace_, activity_id);
  redis::ScriptCall call(place_);
  call.Key("room", keys.room)
      .Key("seq", keys.seq)
      .Key("meta", activity.meta())
      .Key("stock", activity.stock())
      .Key("items", activity.items())
      .Arg("user_id", user_id)
      .Arg("now_ms", now_ms)
      .Arg("start_ms", start_ms);
  auto reply = co_await redis::Await(runner_, call);
  auto read = redis::ScriptReply::Read(place_, reply);
  if (!read) co_return std::move(read).error();
  co_return RoomPlace{read->Int(place_rank_), read->Int(place_size_), read->Int(place_remaining_)};
}

}  // namespace flashsale::keyspace
