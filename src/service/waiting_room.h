#pragma once
// The waiting room's use cases (issue 37; rules in core/waiting_room.h, Redis in
// keyspace/waiting_room.h): joining, the buyer's view of their place (a long poll), and the pass
// a purchase must carry while an activity has a room.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "core/activity.h"
#include "service/context.h"

namespace flashsale::service {

enum class RoomState {
  kDrawing,      // joined before the start: the early places are drawn at the start
  kWaiting,      // a place, not admitted yet
  kAdmitted,     // admitted: `pass` lets the user buy
  kSoldOut,      // the stock is gone (said to everyone still in the room)
  kNotJoined,    // the user has no place (Wait only)
  kRateLimited,  // Join only: the activity's user_rate or address_rate refused it (nothing done)
};
std::string_view ToString(RoomState state);  // "drawing" | "waiting" | "admitted" | ...

struct RoomView {
  RoomState state = RoomState::kNotJoined;
  bool joined_now = false;  // Join: this call took the place
  int64_t place = 0;        // 1-based; 0 while kDrawing or kNotJoined
  int64_t ahead = 0;        // places before it not admitted yet
  int64_t size = 0;         // places taken
  int64_t admit_at_ms = 0;  // when the place is admitted (kWaiting, kAdmitted); the start while
                            // kDrawing
  int64_t estimate_ms = 0;  // admit_at_ms - now, at least 0
  std::string pass;         // kAdmitted
  int64_t pass_expires_ms = 0;
  int64_t retry_after_ms = 0;  // kRateLimited
  int64_t start_ms = 0;
  int64_t server_time_ms = 0;
};

// The longest wait a poll may ask for.
inline constexpr std::chrono::milliseconds kMaxRoomWait{25'000};

// POST .../join: kNotFound for an unknown activity or one without a room; kFailedPrecondition
// before the room opens or after the sale ended; kResourceExhausted when max_waiting places wait.
// Idempotent: a second join answers the place taken by the first. Joins are held to the
// activity's user_rate (per user) and address_rate (per `client_address`, when known), GCRA
// buckets of their own beside the purchase's (keyspace/rate_limiter.h): kRateLimited when
// refused.
boost::asio::awaitable<base::Result<RoomView>> JoinRoom(ServiceContext& context,
                                                        std::string_view activity_id,
                                                        std::string_view user_id,
                                                        std::string_view client_address = {});

// GET .../wait?wait_ms=N: the user's view, held up to `wait` (at most kMaxRoomWait) while it stays
// as it was (kDrawing or kWaiting); answered when it changes (the place drawn at the start,
// admitted, sold out) or the wait is over. kNotFound as JoinRoom.
boost::asio::awaitable<base::Result<RoomView>> WaitInRoom(ServiceContext& context,
                                                          std::string_view activity_id,
                                                          std::string_view user_id,
                                                          std::chrono::milliseconds wait);

// Whether a purchase of `activity` by `user_id` may go on: always without a room; with one, only
// with a pass issued to this user for this activity and not expired (kInvalidArgument saying why
// otherwise). No Redis call.
base::Status CheckRoomPass(const ServiceContext& context, const core::Activity& activity,
                           std::string_view user_id, std::string_view pass);

}  // namespace flashsale::service
