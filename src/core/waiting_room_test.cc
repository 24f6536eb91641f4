#include "core/waiting_room.h"

#include <gtest/gtest.h>

#include "base/crypto.h"

namespace flashsale::core {
namespace {

constexpr int64_t kStart = 1'800'000'000'000;

TEST(WaitingRoomTest, PassVerifiesForItsUserAndActivityUntilItExpires) {
  RoomPassSigner signer("a-secret-of-16-bytes-or-more");
  const std::string pass = signer.Issue("phone", "alice", kStart + 1000);
  EXPECT_TRUE(signer.Verify(pass, "phone", "alice", kStart + 999).ok());
  // Expired.
  EXPECT_FALSE(signer.Verify(pass, "phone", "alice", kStart + 1000).ok());
  // Another user's, another activity's.
  EXPECT_FALSE(signer.Verify(pass, "phone", "bob", kStart).ok());
  EXPECT_FALSE(signer.Verify(pass, "laptop", "alice", kStart).ok());
  // Signed under another secret.
  EXPECT_FALSE(
      RoomPassSigner("another-secret-of-16-bytes").Verify(pass, "phone", "alice", kStart).ok());
}

TEST(WaitingRoomTest, ForgedOrMangledPassesFail) {
  RoomPassSigner signer("a-secret-of-16-bytes-or-more");
  const std::string pass = signer.Issue("phone", "alice", kStart + 1000);
  const std::string signature = pass.substr(pass.find('.') + 1);
  // A later expiry with the old signature.
  EXPECT_FALSE(
      signer.Verify(std::to_string(kStart + 99'000) + "." + signature, "phone", "alice", kStart)
          .ok());
  // Signed with the raw secret instead of the derived key.
  const std::string raw = base::Base64UrlEncode(
      base::HmacSha256("a-secret-of-16-bytes-or-more",
                       "room-pass v1\nphone\nalice\n" + std::to_string(kStart + 1000)));
  EXPECT_FALSE(
      signer.Verify(std::to_string(kStart + 1000) + "." + raw, "phone", "alice", kStart).ok());
  // A token is not a pass: the same key never signs both.
  for (std::string_view bad : {"", ".", "x.y", "12", "12.", ".abc", "1e3.abc"}) {
    EXPECT_FALSE(signer.Verify(bad, "phone", "alice", kStart).ok()) << bad;
  }
  std::string flipped = pass;
  flipped.back() = flipped.back() == 'A' ? 'B' : 'A';
  EXPECT_FALSE(signer.Verify(flipped, "phone", "alice", kStart).ok());
}

TEST(WaitingRoomTest, AdmitAtIsWhenAdmittedThroughReachesThePlace) {
  for (int64_t rate : {1, 3, 7, 1000, 1'000'000}) {
    const WaitingRoom room{0, rate, 60'000, 100};
    EXPECT_EQ(AdmittedThrough(room, kStart, kStart - 1), 0);
    EXPECT_EQ(AdmittedThrough(room, kStart, kStart), 1);
    for (int64_t place : {1, 2, 3, 10, 999, 123'457}) {
      const int64_t at = AdmitAtMs(room, kStart, place);
      EXPECT_GE(AdmittedThrough(room, kStart, at), place) << rate << " " << place;
      if (at > kStart) {
        EXPECT_LT(AdmittedThrough(room, kStart, at - 1), place) << rate << " " << place;
      }
    }
  }
  // Far in the future at the highest rate: no overflow.
  const WaitingRoom fast{0, kMaxRoomAdmitPerS, 60'000, 100};
  EXPECT_GT(AdmittedThrough(fast, 0, 253'402'300'799'999), 0);
}

// Issue 37, point 6: the admission rate over a minute of simulated time, within 5 %.
TEST(WaitingRoomTest, AdmitsAtTheRateOverAMinuteOfSimulatedTime) {
  for (int64_t rate : {1, 7, 50, 333, 20'000}) {
    const WaitingRoom room{0, rate, 60'000, 100};
    const int64_t begin = kStart + 5'000;
    // Step the clock 1 ms at a time (a tenth of a ms is below the clock's resolution), and count
    // the places that become admitted in the minute [begin, begin + 60 s).
    int64_t admitted = 0;
    int64_t through = AdmittedThrough(room, kStart, begin - 1);
    for (int64_t now = begin; now < begin + 60'000; ++now) {
      const int64_t next = AdmittedThrough(room, kStart, now);
      admitted += next - through;
      through = next;
    }
    const double expected = 60.0 * static_cast<double>(rate);
    EXPECT_NEAR(static_cast<double>(admitted), expected, expected * 0.05) << rate;
  }
}

TEST(WaitingRoomTest, ValidatesAndRoundTripsItsColumn) {
  const WaitingRoom room{600'000, 50, 120'000, 10'000};
  EXPECT_TRUE(ValidateWaitingRoom(room).ok());
  auto back = DecodeWaitingRoom(EncodeWaitingRoom(room));
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ(**back, room);
  auto none = DecodeWaitingRoom(EncodeWaitingRoom(std::nullopt));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  for (std::string_view bad : {"1,2,3", "1,2,3,4,5", "a,b,c,d", "1,0,2000,4", ",1,2,3"}) {
    EXPECT_FALSE(DecodeWaitingRoom(bad).ok()) << bad;
  }
  EXPECT_FALSE(ValidateWaitingRoom({-1, 1, 60'000, 1}).ok());
  EXPECT_FALSE(ValidateWaitingRoom({0, 0, 60'000, 1}).ok());
  EXPECT_FALSE(ValidateWaitingRoom({0, 1, 999, 1}).ok());
  EXPECT_FALSE(ValidateWaitingRoom({0, 1, 60'000, 0}).ok());
}

}  // namespace
}  // namespace flashsale::core
