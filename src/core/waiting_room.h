#pragma once
// A sale's waiting room (issue 37): from `start - opens_before_ms` buyers join and get a place;
// the places taken before the start are in a uniformly random order (each got a random rank when
// it joined, src/keyspace/lua/room_join.lua), the later ones behind them in arrival order. From
// the start, places are admitted in order at `admit_per_s`: place p at
// start + ceil((p - 1) * 1000 / admit_per_s), a function of the place and the start alone, so
// every instance agrees without asking anyone. An admitted buyer gets a pass (RoomPassSigner
// below) that a purchase must carry while the room is on. Pure rules; Redis is in keyspace/, the
// use cases in service/waiting_room.h.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashsale::core {

struct WaitingRoom {
  int64_t opens_before_ms = 0;      // joins are taken from start_ms - opens_before_ms
  int64_t admit_per_s = 1;          // places admitted per second from the start
  int64_t pass_ttl_ms = 60'000;     // how long a pass is valid after it is issued
  int64_t max_waiting = 1'000'000;  // places not admitted yet, at most; beyond it a join is 503

  friend bool operator==(const WaitingRoom&, const WaitingRoom&) = default;
};

inline constexpr int64_t kMaxRoomOpensBeforeMs = int64_t{7} * 24 * 3600 * 1000;  // a week
inline constexpr int64_t kMaxRoomAdmitPerS = 1'000'000;
inline constexpr int64_t kMinRoomPassTtlMs = 1'000;
inline constexpr int64_t kMaxRoomPassTtlMs = int64_t{24} * 3600 * 1000;  // a day
inline constexpr int64_t kMaxRoomWaiting = 100'000'000;

// kInvalidArgument naming the field when a value is out of its range.
base::Status ValidateWaitingRoom(const WaitingRoom& room);

// When the room takes joins: from start_ms - opens_before_ms (never below 0).
int64_t RoomOpensAtMs(const WaitingRoom& room, int64_t start_ms);

// The highest place admitted at `now_ms` (places count from 1): 0 before the start, then
// floor((now - start) * admit_per_s / 1000) + 1. Exact in 64 bits over every valid time and rate.
int64_t AdmittedThrough(const WaitingRoom& room, int64_t start_ms, int64_t now_ms);

// When place `place` (>= 1) is admitted: the first ms at which AdmittedThrough reaches it.
int64_t AdmitAtMs(const WaitingRoom& room, int64_t start_ms, int64_t place);

// The room's persisted form (one text column): "opens_before_ms,admit_per_s,pass_ttl_ms,
// max_waiting", "" for no room; and back (kInvalidArgument for text this code did not write).
std::string EncodeWaitingRoom(const std::optional<WaitingRoom>& room);
base::Result<std::optional<WaitingRoom>> DecodeWaitingRoom(std::string_view text);

// Passes: `<expiry, unix ms>.<base64url(HMAC-SHA256)>`, the HMAC of the activity, the user and
// the expiry under a key derived from the server secret for passes only (base::DeriveKey
// "room-pass"): bound to one user of one activity, stateless (any instance with the secret checks
// it), short-lived.
class RoomPassSigner {
 public:
  explicit RoomPassSigner(std::string_view secret);

  std::string Issue(std::string_view activity_id, std::string_view user_id,
                    int64_t expires_ms) const;
  // Ok when `pass` was issued for this user and activity and has not expired at `now_ms`;
  // kInvalidArgument saying why otherwise (malformed, bad signature, expired).
  base::Status Verify(std::string_view pass, std::string_view activity_id, std::string_view user_id,
                      int64_t now_ms) const;

 private:
  std::string Sign(std::string_view activity_id, std::string_view user_id,
                   std::string_view expiry) const;
  std::string key_;
};

}  // namespace flashsale::core
