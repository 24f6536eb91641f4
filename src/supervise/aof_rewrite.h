#pragma once
// When the private redis-server's append-only file is rewritten (BGREWRITEAOF), decided by
// flashsale instead of by Redis's own automatic rewrite (auto-aof-rewrite-percentage 0 on the
// server: supervise/embedded_server.h).
//
// A rewrite forks redis-server and writes the whole dataset out again: seconds of CPU on a large
// dataset, plus the copy-on-write faults it makes the parent take, all at the moment Redis's own
// rule fires, which under a flash sale is the middle of the burst (the burst is what grows the
// AOF). The rule here is Redis's own (due once the AOF is over `min_size` and has grown
// `growth_percent` over its size after the last rewrite), except that a due rewrite waits for
// a quiet moment: the AOF grew less than `quiet_bytes_per_second` since the last look. An
// overdue one runs at once, busy or not: once the AOF has grown `overdue_percent` over the larger
// of its size after the last rewrite and min_size. So the AOF, and with it the time a restart
// takes to replay it, stays bounded: at most 1 + overdue_percent / 100 times that size.

#include <cstdint>
#include <optional>
#include <string_view>

namespace flashsale::supervise {

struct AofRewritePolicy {
  uint64_t min_size = 64ull << 20;  // as Redis's auto-aof-rewrite-min-size default
  int64_t growth_percent = 100;     // as Redis's auto-aof-rewrite-percentage default
  int64_t overdue_percent = 400;    // rewritten at once from this growth on (see above)
  uint64_t quiet_bytes_per_second = 1ull << 20;  // grew less than this: quiet
};

// What INFO persistence says about the AOF (the fields this decision reads).
struct AofState {
  bool enabled = false;
  bool rewriting = false;  // aof_rewrite_in_progress or aof_rewrite_scheduled
  uint64_t current_size = 0;
  uint64_t base_size = 0;  // the AOF's size after the last rewrite (0: none yet)
};

// Parses INFO persistence's reply; nothing if a field this decision needs is missing.
std::optional<AofState> ParseAofState(std::string_view info);

enum class AofRewrite {
  kNotDue,   // not grown enough (or a rewrite is running, or no AOF)
  kWaiting,  // due, waiting for a quiet moment
  kQuiet,    // due and quiet: rewrite now
  kOverdue,  // overdue: rewrite now, busy or not
};

// `grown`: bytes the AOF grew over the last `seconds` (> 0) since the previous look.
AofRewrite DecideAofRewrite(const AofRewritePolicy& policy, const AofState& state, uint64_t grown,
                            double seconds);

std::string_view ToString(AofRewrite decision);

}  // namespace flashsale::supervise
