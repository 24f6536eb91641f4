#include "service/waiting_room.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>
#include <vector>

#include "core/waiting_room.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/rate_limiter.h"
#include "keyspace/waiting_room.h"

namespace flashsale::service {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

// How often a held poll reads the room again: it learns a sell-out within this, and its place
// (fixed after the start) only changes state at admit_at_ms, which it sleeps until.
constexpr std::chrono::milliseconds kRoomPoll{500};

// The activity with a room, or why not.
Result<store::ActivityRecord> RoomActivity(ServiceContext& context, std::string_view activity_id) {
  const SnapshotPtr snapshot = context.snapshot();
  const store::ActivityRecord* record = snapshot->Find(activity_id);
  if (record == nullptr) return MakeError(ErrorCode::kNotFound, "no activity '{}'", activity_id);
  if (!record->activity.waiting_room) {
    return MakeError(ErrorCode::kNotFound, "activity '{}' has no waiting room", activity_id);
  }
  return *record;
}

// The view of a place (`rank` 0-based, -1: none) at `now`.
RoomView ViewOf(const core::Activity& activity, int64_t rank, int64_t size, int64_t remaining,
                int64_t now) {
  const core::WaitingRoom& room = *activity.waiting_room;
  RoomView view;
  view.size = size;
  view.start_ms = activity.start_ms;
  view.server_time_ms = now;
  if (rank < 0) {
    view.state = RoomState::kNotJoined;
    return view;
  }
  if (remaining == 0) {
    view.state = RoomState::kSoldOut;
    if (now >= activity.start_ms) view.place = rank + 1;
    return view;
  }
  if (now < activity.start_ms) {
    view.state = RoomState::kDrawing;
    view.admit_at_ms = activity.start_ms;
    view.estimate_ms = activity.start_ms - now;
    return view;
  }
  view.place = rank + 1;
  const int64_t admitted = core::AdmittedThrough(room, activity.start_ms, now);
  view.admit_at_ms = core::AdmitAtMs(room, activity.start_ms, view.place);
  if (view.place <= admitted) {
    view.state = RoomState::kAdmitted;
    view.pass_expires_ms = now + room.pass_ttl_ms;  // the pass itself: ViewFor
    return view;
  }
  view.state = RoomState::kWaiting;
  view.ahead = view.place - 1 - admitted;
  view.estimate_ms = std::max<int64_t>(0, view.admit_at_ms - now);
  return view;
}

}  // namespace

std::string_view ToString(RoomState state) {
  switch (state) {
    case RoomState::kDrawing:
      return "drawing";
    case RoomState::kWaiting:
      return "waiting";
    case RoomState::kAdmitted:
      return "admitted";
    case RoomState::kSoldOut:
      return "sold_out";
    case RoomState::kNotJoined:
      return "not_joined";
    case RoomState::kRateLimited:
      return "rate_limited";
  }
  return "not_joined";
}

namespace {

// ViewOf with the pass issued to `user_id`.
RoomView ViewFor(ServiceContext& context, const core::Activity& activity, std::string_view user_id,
                 int64_t rank, int64_t size, int64_t remaining, int64_t now) {
  RoomView view = ViewOf(activity, rank, size, remaining, now);
  if (view.state == RoomState::kAdmitted) {
    view.pass = core::RoomPassSigner(context.settings().secret)
                    .Issue(activity.id, user_id, view.pass_expires_ms);
  }
  return view;
}

}  // namespace

asio::awaitable<Result<RoomView>> JoinRoom(ServiceContext& context, std::string_view activity_id,
                                           std::string_view user_id,
                                           std::string_view client_address) {
  auto record = RoomActivity(context, activity_id);
  if (!record) co_return std::move(record).error();
  const core::Activity& activity = record->activity;
  const core::WaitingRoom& room = *activity.waiting_room;
  const int64_t now = context.clock().NowMs();
  const int64_t opens_at = core::RoomOpensAtMs(room, activity.start_ms);
  if (now < opens_at) {
    co_return MakeError(ErrorCode::kFailedPrecondition,
                        "the waiting room of '{}' opens at {} (now {})", activity.id, opens_at,
                        now);
  }
  if (now >= activity.end_ms) {
    co_return MakeError(ErrorCode::kFailedPrecondition, "the sale '{}' ended at {}", activity.id,
                        activity.end_ms);
  }
  // Bots held at the door (issue 37, point 4): the activity's per-user and per-address rates,
  // in buckets of the joins' own.
  const keyspace::ActivityKeys keys(context.settings().key_namespace, activity.id);
  std::vector<keyspace::Limiter> limiters;
  if (activity.user_rate.enabled()) {
    limiters.push_back(
        {keys.RateLimit("join-user", context.KeyToken(user_id)), activity.user_rate});
  }
  if (activity.address_rate.enabled() && !client_address.empty()) {
    limiters.push_back(
        {keys.RateLimit("join-address", context.KeyToken(client_address)), activity.address_rate});
  }
  if (!limiters.empty()) {
    auto decision = co_await context.limiter().AsyncCheck(limiters, now, asio::use_awaitable);
    if (!decision.ok()) co_return std::move(decision).error();
    if (!decision->allowed) {
      RoomView refused;
      refused.state = RoomState::kRateLimited;
      refused.retry_after_ms = decision->retry_after_ms;
      refused.start_ms = activity.start_ms;
      refused.server_time_ms = now;
      co_return refused;
    }
  }
  keyspace::WaitingRoomStore store(context.runner(), context.settings().key_namespace);
  keyspace::RoomJoinRequest request{
      .user_id = user_id,
      .now_ms = now,
      .start_ms = activity.start_ms,
      .draw = context.random().Uniform(keyspace::WaitingRoomStore::kDrawBound),
      .admitted = core::AdmittedThrough(room, activity.start_ms, now),
      .max_waiting = room.max_waiting,
  };
  auto joined = co_await store.Join(activity.id, request);
  if (!joined) co_return std::move(joined).error();
  if (joined->outcome == keyspace::RoomJoinResult::Outcome::kFull) {
    co_return MakeError(ErrorCode::kResourceExhausted,
                        "the waiting room of '{}' is full ({} waiting)", activity.id,
                        room.max_waiting);
  }
  // The units left, and the seal at the start (room_place.lua): one more O(log n) call.
  auto place = co_await store.Place(activity.id, user_id, now, activity.start_ms);
  if (!place) co_return std::move(place).error();
  RoomView view =
      ViewFor(context, activity, user_id, place->rank, place->size, place->remaining, now);
  view.joined_now = joined->outcome == keyspace::RoomJoinResult::Outcome::kJoined;
  co_return view;
}

asio::awaitable<Result<RoomView>> WaitInRoom(ServiceContext& context, std::string_view activity_id,
                                             std::string_view user_id,
                                             std::chrono::milliseconds wait) {
  auto record = RoomActivity(context, activity_id);
  if (!record) co_return std::move(record).error();
  const core::Activity& activity = record->activity;
  const auto until = std::chrono::steady_clock::now() + std::clamp(wait, {}, kMaxRoomWait);
  keyspace::WaitingRoomStore store(context.runner(), context.settings().key_namespace);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  std::optional<RoomState> first;
  for (;;) {
    const int64_t now = context.clock().NowMs();
    auto place = co_await store.Place(activity.id, user_id, now, activity.start_ms);
    if (!place) co_return std::move(place).error();
    RoomView view =
        ViewFor(context, activity, user_id, place->rank, place->size, place->remaining, now);
    if (view.state != RoomState::kDrawing && view.state != RoomState::kWaiting) co_return view;
    // A change (drawing -> waiting: the place is known now) is news too. While it waits, the
    // number ahead needs no answer: it follows from the place, the start and the rate
    // (core::AdmittedThrough), which a page computes itself.
    if (first && *first != view.state) co_return view;
    first = view.state;
    const auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::milliseconds(0)) co_return view;
    // Until the place's turn, a poll period, or the end of the wait, whichever comes first.
    const auto turn = std::chrono::milliseconds(std::max<int64_t>(1, view.admit_at_ms - now));
    timer.expires_after(std::min<std::chrono::steady_clock::duration>({left, kRoomPoll, turn}));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

base::Status CheckRoomPass(const ServiceContext& context, const core::Activity& activity,
                           std::string_view user_id, std::string_view pass) {
  if (!activity.waiting_room) return {};
  if (pass.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'{}' has a waiting room: join it (POST .../join), wait for your turn (GET "
                     ".../wait) and buy with the pass in the X-Waiting-Room-Pass header",
                     activity.id);
  }
  return core::RoomPassSigner(context.settings().secret)
      .Verify(pass, activity.id, user_id, context.clock().NowMs());
}

}  // namespace flashsale::service
