#include "supervise/aof_rewrite.h"

#include <gtest/gtest.h>

namespace flashsale::supervise {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

AofState State(uint64_t current, uint64_t base) {
  AofState state;
  state.enabled = true;
  state.current_size = current;
  state.base_size = base;
  return state;
}

TEST(AofRewriteTest, ParsesInfoPersistence) {
  const std::string info =
      "# Persistence\r\nloading:0\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\n"
      "aof_rewrite_scheduled:1\r\naof_last_rewrite_time_sec:-1\r\naof_current_size:123456\r\n"
      "aof_base_size:789\r\naof_buffer_length:0\r\n";
  const auto state = ParseAofState(info);
  ASSERT_TRUE(state.has_value());
  EXPECT_TRUE(state->enabled);
  EXPECT_TRUE(state->rewriting) << "a scheduled rewrite counts as one in progress";
  EXPECT_EQ(state->current_size, 123456u);
  EXPECT_EQ(state->base_size, 789u);

  const auto off = ParseAofState("aof_enabled:0\r\naof_rewrite_in_progress:0\r\n");
  ASSERT_TRUE(off.has_value());
  EXPECT_FALSE(off->enabled);

  EXPECT_FALSE(ParseAofState("loading:0\r\n").has_value()) << "no aof_enabled";
  EXPECT_FALSE(ParseAofState("aof_enabled:1\r\naof_current_size:12\r\n").has_value())
      << "an AOF without its sizes";
  EXPECT_FALSE(ParseAofState("aof_enabled:1\r\naof_rewrite_in_progress:0\r\n"
                             "aof_rewrite_scheduled:0\r\naof_current_size:x\r\naof_base_size:1\r\n")
                   .has_value())
      << "a size that is not a number";
  // A field whose name another one starts with is not taken for it.
  const auto prefixed = ParseAofState(
      "aof_enabled:1\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\n"
      "aof_current_size_x:5\r\naof_current_size:6\r\naof_base_size:1\r\n");
  ASSERT_TRUE(prefixed.has_value());
  EXPECT_EQ(prefixed->current_size, 6u);
}

TEST(AofRewriteTest, DueAsRedisWouldBeButWaitsForAQuietMoment) {
  const AofRewritePolicy policy;  // 64 MiB, 100 %, overdue at 400 %, quiet below 1 MiB/s
  // Below the minimum size, however much it grew.
  EXPECT_EQ(DecideAofRewrite(policy, State(60 * kMiB, 1 * kMiB), 0, 1.0), AofRewrite::kNotDue);
  // Over the minimum, grown 50 %: not due.
  EXPECT_EQ(DecideAofRewrite(policy, State(150 * kMiB, 100 * kMiB), 0, 1.0), AofRewrite::kNotDue);
  // Grown 100 %: due; busy (5 MiB over the last second) it waits, quiet it runs.
  EXPECT_EQ(DecideAofRewrite(policy, State(200 * kMiB, 100 * kMiB), 5 * kMiB, 1.0),
            AofRewrite::kWaiting);
  EXPECT_EQ(DecideAofRewrite(policy, State(200 * kMiB, 100 * kMiB), kMiB / 2, 1.0),
            AofRewrite::kQuiet);
  // The rate is per second: 1.5 MiB over 2 s is quiet, over 1 s it is not.
  EXPECT_EQ(DecideAofRewrite(policy, State(200 * kMiB, 100 * kMiB), 3 * kMiB / 2, 2.0),
            AofRewrite::kQuiet);
  EXPECT_EQ(DecideAofRewrite(policy, State(200 * kMiB, 100 * kMiB), 3 * kMiB / 2, 1.0),
            AofRewrite::kWaiting);
  // Grown 400 %: overdue, rewritten however busy.
  EXPECT_EQ(DecideAofRewrite(policy, State(500 * kMiB, 100 * kMiB), 50 * kMiB, 1.0),
            AofRewrite::kOverdue);
  // Never rewritten (base 0, or the tiny base of a fresh server): due over the minimum size, as
  // in Redis, but overdue only at five times the minimum.
  EXPECT_EQ(DecideAofRewrite(policy, State(65 * kMiB, 0), 5 * kMiB, 1.0), AofRewrite::kWaiting);
  EXPECT_EQ(DecideAofRewrite(policy, State(65 * kMiB, 88), 0, 1.0), AofRewrite::kQuiet);
  EXPECT_EQ(DecideAofRewrite(policy, State(319 * kMiB, 88), 5 * kMiB, 1.0), AofRewrite::kWaiting);
  EXPECT_EQ(DecideAofRewrite(policy, State(320 * kMiB, 88), 5 * kMiB, 1.0), AofRewrite::kOverdue);
}

TEST(AofRewriteTest, NothingWhileARewriteRunsOrWithoutAnAof) {
  const AofRewritePolicy policy;
  AofState rewriting = State(900 * kMiB, 100 * kMiB);
  rewriting.rewriting = true;
  EXPECT_EQ(DecideAofRewrite(policy, rewriting, 0, 1.0), AofRewrite::kNotDue);
  AofState off = State(900 * kMiB, 100 * kMiB);
  off.enabled = false;
  EXPECT_EQ(DecideAofRewrite(policy, off, 0, 1.0), AofRewrite::kNotDue);
}

}  // namespace
}  // namespace flashsale::supervise
