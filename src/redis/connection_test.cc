#include "redis/connection.h"

#include <gtest/gtest.h>

namespace flashsale::redis {
namespace {

using base::ErrorDetail;

// Issue 33 point 4: an error reply's first word is read once, where the reply becomes an error.
TEST(ErrorDetailOfTest, NamesTheRepliesCallersActOnByTheirFirstWord) {
  EXPECT_EQ(ErrorDetailOf("NOGROUP No such key 'fs:s' or consumer group 'persist' in XREADGROUP "
                          "with GROUP option"),
            ErrorDetail::kNoGroup);
  EXPECT_EQ(ErrorDetailOf("NOSCRIPT No matching script. Please use EVAL."), ErrorDetail::kNoScript);
  EXPECT_EQ(ErrorDetailOf("FENCED flashsale: a newer holder of the queue lock exists"),
            ErrorDetail::kFenced);
  EXPECT_EQ(ErrorDetailOf("FENCED"), ErrorDetail::kFenced);
  EXPECT_EQ(ErrorDetailOf("ERR no such key"), ErrorDetail::kNoSuchKey);
  // Anything else has none: other errors, a longer word that starts alike, the word elsewhere.
  EXPECT_EQ(ErrorDetailOf("ERR no such key 'x'"), ErrorDetail::kNone);
  EXPECT_EQ(ErrorDetailOf("ERR unknown command"), ErrorDetail::kNone);
  EXPECT_EQ(ErrorDetailOf("NOGROUPS x"), ErrorDetail::kNone);
  EXPECT_EQ(ErrorDetailOf("ERR script said FENCED"), ErrorDetail::kNone);
  EXPECT_EQ(ErrorDetailOf("nogroup lower case"), ErrorDetail::kNone);
  EXPECT_EQ(ErrorDetailOf(""), ErrorDetail::kNone);
}

}  // namespace
}  // namespace flashsale::redis
