#include "core/waiting_room.h"

#include <fmt/format.h>

#include <charconv>

#include "base/crypto.h"

namespace flashsale::core {

using base::ErrorCode;
using base::MakeError;

base::Status ValidateWaitingRoom(const WaitingRoom& room) {
  if (room.opens_before_ms < 0 || room.opens_before_ms > kMaxRoomOpensBeforeMs) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "waiting_room.opens_before_ms must be 0 to {} (a week)",
                     kMaxRoomOpensBeforeMs);
  }
  if (room.admit_per_s < 1 || room.admit_per_s > kMaxRoomAdmitPerS) {
    return MakeError(ErrorCode::kInvalidArgument, "waiting_room.admit_per_s must be 1 to {}",
                     kMaxRoomAdmitPerS);
  }
  if (room.pass_ttl_ms < kMinRoomPassTtlMs || room.pass_ttl_ms > kMaxRoomPassTtlMs) {
    return MakeError(ErrorCode::kInvalidArgument, "waiting_room.pass_ttl_ms must be {} to {}",
                     kMinRoomPassTtlMs, kMaxRoomPassTtlMs);
  }
  if (room.max_waiting < 1 || room.max_waiting > kMaxRoomWaiting) {
    return MakeError(ErrorCode::kInvalidArgument, "waiting_room.max_waiting must be 1 to {}",
                     kMaxRoomWaiting);
  }
  return {};
}

int64_t RoomOpensAtMs(const WaitingRoom& room, int64_t start_ms) {
  return start_ms > room.opens_before_ms ? start_ms - room.opens_before_ms : 0;
}

int64_t AdmittedThrough(const WaitingRoom& room, int64_t start_ms, int64_t now_ms) {
  if (now_ms < start_ms) return 0;
  const int64_t elapsed = now_ms - start_ms;  // < 2^48 for valid times
  // elapsed * rate / 1000 without overflow: whole seconds times the rate (< 2^38 * 2^20), plus
  // the rest of a second times the rate over 1000.
  return (elapsed / 1000) * room.admit_per_s + (elapsed % 1000) * room.admit_per_s / 1000 + 1;
}

int64_t AdmitAtMs(const WaitingRoom& room, int64_t start_ms, int64_t place) {
  if (place <= 1) return start_ms;
  // The first t with floor(t * rate / 1000) >= place - 1: whole seconds for each `rate` places,
  // then ceil(rest * 1000 / rate) ms.
  const int64_t before = place - 1;
  const int64_t whole = before / room.admit_per_s;
  const int64_t rest = before % room.admit_per_s;
  return start_ms + whole * 1000 + (rest * 1000 + room.admit_per_s - 1) / room.admit_per_s;
}

std::string EncodeWaitingRoom(const std::optional<WaitingRoom>& room) {
  if (!room) return "";
  return fmt::format("{},{},{},{}", room->opens_before_ms, room->admit_per_s, room->pass_ttl_ms,
                     room->max_waiting);
}

base::Result<std::optional<WaitingRoom>> DecodeWaitingRoom(std::string_view text) {
  if (text.empty()) return std::optional<WaitingRoom>();
  int64_t values[4] = {0, 0, 0, 0};
  const char* at = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 4; ++i) {
    auto [next, ec] = std::from_chars(at, end, values[i]);
    const bool last = i == 3;
    if (ec != std::errc() || (last ? next != end : (next == end || *next != ','))) {
      return MakeError(ErrorCode::kInvalidArgument, "waiting room column '{}' is not valid", text);
    }
    at = last ? next : next + 1;
  }
  WaitingRoom room{values[0], values[1], values[2], values[3]};
  if (auto valid = ValidateWaitingRoom(room); !valid) return valid.error();
  return std::optional<WaitingRoom>(room);
}

RoomPassSigner::RoomPassSigner(std::string_view secret)
    : key_(base::DeriveKey(secret, "room-pass")) {}

std::string RoomPassSigner::Sign(std::string_view activity_id, std::string_view user_id,
                                 std::string_view expiry) const {
  // Ids hold no '\n' (core::IsValidActivityId, base::IsValidId), so the fields cannot run into
  // each other.
  const std::string message = fmt::format("room-pass v1\n{}\n{}\n{}", activity_id, user_id, expiry);
  return base::Base64UrlEncode(base::HmacSha256(key_, message));
}

std::string RoomPassSigner::Issue(std::string_view activity_id, std::string_view user_id,
                                  int64_t expires_ms) const {
  const std::string expiry = std::to_string(expires_ms);
  return fmt::format("{}.{}", expiry, Sign(activity_id, user_id, expiry));
}

base::Status RoomPassSigner::Verify(std::string_view pass, std::string_view activity_id,
                                    std::string_view user_id, int64_t now_ms) const {
  const size_t dot = pass.find('.');
  if (pass.empty() || pass.size() > 200 || dot == std::string_view::npos || dot == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "the pass is malformed");
  }
  const std::string_view expiry = pass.substr(0, dot);
  int64_t expires_ms = 0;
  auto [end, ec] = std::from_chars(expiry.data(), expiry.data() + expiry.size(), expires_ms);
  if (ec != std::errc() || end != expiry.data() + expiry.size()) {
    return MakeError(ErrorCode::kInvalidArgument, "the pass is malformed");
  }
  if (!base::ConstantTimeEquals(pass.substr(dot + 1), Sign(activity_id, user_id, expiry))) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the pass is not valid for this user and activity");
  }
  if (expires_ms <= now_ms) {
    return MakeError(ErrorCode::kInvalidArgument, "the pass expired at {} (now {})", expires_ms,
                     now_ms);
  }
  return {};
}

}  // namespace flashsale::core
