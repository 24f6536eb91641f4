#include "base/result.h"

#include <gtest/gtest.h>

#include <memory>

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

}  // namespace
}  // namespace flashsale::base
