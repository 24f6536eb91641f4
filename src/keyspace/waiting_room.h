#pragma once
// An activity's waiting room in Redis (issue 37; the rules are core/waiting_room.h): a sorted set
// of places and an arrival counter, both in the activity's slot (the hash tag of ActivityKeys), so
// a room works on Redis Cluster, and each join or poll is one script call of O(log n)
// (lua/room_join.lua, lua/room_place.lua).

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "redis/scripts.h"

namespace flashsale::keyspace {

// <ns>:seckill:{<id>}:room (the places) and :room:seq (the arrival counter, and the seal).
struct RoomKeys {
  RoomKeys(std::string_view key_namespace, std::string_view activity_id);
  std::string room, seq;
};

struct RoomJoinRequest {
  std::string_view user_id;
  int64_t now_ms = 0;
  int64_t start_ms = 0;
  uint64_t draw = 0;        // uniform in [0, 2^52): the place's rank among the early ones
  int64_t admitted = 0;     // core::AdmittedThrough at now_ms
  int64_t max_waiting = 1;  // places not admitted yet, at most
};

struct RoomJoinResult {
  enum class Outcome { kJoined, kAlreadyJoined, kFull };
  Outcome outcome = Outcome::kFull;
  int64_t rank = -1;  // 0-based
  int64_t size = 0;   // places taken
};

struct RoomPlace {
  int64_t rank = -1;  // 0-based; -1: not in the room
  int64_t size = 0;
  int64_t remaining = -1;  // units left; -1: the activity is not loaded
};

class WaitingRoomStore {
 public:
  // The early places' draws are below this: 2^52, the scores stay exact in a double.
  static constexpr uint64_t kDrawBound = uint64_t{1} << 52;

  WaitingRoomStore(redis::ScriptRunner& runner, std::string key_namespace);

  boost::asio::awaitable<base::Result<RoomJoinResult>> Join(std::string_view activity_id,
                                                            const RoomJoinRequest& request);
  boost::asio::awaitable<base::Result<RoomPlace>> Place(std::string_view activity_id,
                                                        std::string_view user_id, int64_t now_ms,
                                                        int64_t start_ms);

 private:
  redis::ScriptRunner& runner_;
  std::string namespace_;
  const redis::Script& join_;
  const redis::Script& place_;
  redis::IntField join_code_, join_rank_, join_size_;
  redis::IntField place_rank_, place_size_, place_remaining_;
};

}  // namespace flashsale::keyspace
