#include "base/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string_view>
#include <vector>

namespace flashsale::base {
namespace {

Result<int> Half(int value) {
  if (value % 2 != 0) return MakeError(ErrorCode::kInvalidArgument, "{} is odd", value);
  return value / 2;
}

TEST(ResultTest, CarriesValueOrError) {
  auto half = Half(8);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(*half, 4);

  auto odd = Half(7);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(odd.error().message, "7 is odd");
  EXPECT_EQ(odd.error().ToString(), "invalid argument: 7 is odd");
}

TEST(ResultTest, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> result(std::make_unique<int>(3));
  std::unique_ptr<int> taken = std::move(result).value();
  EXPECT_EQ(*taken, 3);
}

TEST(ResultTest, StatusIsOkByDefault) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  Status failed = Error{ErrorCode::kUnavailable, "down"};
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kUnavailable);
}

TEST(ResultTest, EveryCodeHasAName) {
  for (auto code : {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kAlreadyExists,
                    ErrorCode::kUnavailable, ErrorCode::kUnknownOutcome, ErrorCode::kRemote,
                    ErrorCode::kProtocol, ErrorCode::kResourceExhausted, ErrorCode::kCancelled,
                    ErrorCode::kInternal}) {
    EXPECT_NE(ToString(code), "unknown error code");
  }
}

// Issue 33 point 4: what kind of failure travels as a value beside the code, not in the text.
TEST(ResultTest, AnErrorCarriesItsDetailAndMostHaveNone) {
  const Error plain = MakeError(ErrorCode::kUnavailable, "{} is down", "redis");
  EXPECT_EQ(plain.detail, ErrorDetail::kNone);
  EXPECT_EQ((Error{ErrorCode::kRemote, "ERR"}).detail, ErrorDetail::kNone);

  Result<int> frozen = MakeError(ErrorCode::kUnavailable, ErrorDetail::kFrozen, "paused {}", 1);
  ASSERT_FALSE(frozen.ok());
  EXPECT_EQ(frozen.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(frozen.error().detail, ErrorDetail::kFrozen);
  EXPECT_EQ(frozen.error().message, "paused 1");
  // The detail is not part of the text people read.
  EXPECT_EQ(frozen.error().ToString(), "unavailable: paused 1");
  // It moves with the error.
  Status moved = std::move(frozen).error();
  EXPECT_EQ(moved.error().detail, ErrorDetail::kFrozen);
}

TEST(ResultTest, EveryDetailHasItsOwnName) {
  const std::vector<ErrorDetail> details = {ErrorDetail::kNone,     ErrorDetail::kNoGroup,
                                            ErrorDetail::kNoScript, ErrorDetail::kNoSuchKey,
                                            ErrorDetail::kFenced,   ErrorDetail::kFrozen,
                                            ErrorDetail::kDeadline, ErrorDetail::kEntriesLost};
  std::set<std::string_view> names;
  for (ErrorDetail detail : details) {
    EXPECT_NE(ToString(detail), "unknown error detail");
    names.insert(ToString(detail));
  }
  EXPECT_EQ(names.size(), details.size());
}

}  // namespace
}  // namespace flashsale::base
