#pragma once
// Drives many concurrent reserve (or lottery draw) calls at one activity, from several I/O threads
// (one pipelined connection each) with many coroutine callers per connection, and records every
// attempt's final outcome. A call that fails is retried with the SAME order id (the reserve script
// is idempotent on it) until it has a definite outcome, so the report can be checked exactly
// against Redis.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/outcome.h"

namespace flashsale::testing {

struct ReserveLoadOptions {
  std::string url;
  std::string key_namespace;
  std::string activity_id;
  int connections = 4;
  int callers_per_connection = 16;
  int64_t attempts = 100000;
  int64_t users = 20000;  // user ids u0 .. u<users-1>, picked at random
  int64_t quantity = 1;
  int64_t now_ms = 0;
  bool draw = false;  // lottery draws (the activity is a lottery) instead of reservations
  uint64_t seed = 1;
  std::chrono::milliseconds call_timeout{2000};
  // How long one attempt may keep retrying before it is reported unresolved.
  std::chrono::milliseconds retry_for{60000};
  // Called on the test thread once, when `midway_at` attempts have finished, while the load goes
  // on (e.g. to flush scripts or kill the server).
  int64_t midway_at = -1;
  std::function<void()> midway;
};

struct AttemptRecord {
  std::string order_id;
  std::string user_id;
  bool resolved = false;
  core::Outcome outcome = core::Outcome::kUnknownActivity;
  bool replayed = false;
  int calls = 0;                   // 1 + retries
  std::vector<std::string> items;  // a draw: the prize won
  int64_t draws = 0;               // a draw: the user's draws after it
};

struct ReserveLoadReport {
  std::vector<AttemptRecord> attempts;
  int64_t failed_calls = 0;                        // calls that returned an error
  std::map<base::ErrorCode, int64_t> error_codes;  // per code
  std::vector<std::string> sample_errors;          // the first few messages
  uint64_t script_reloads = 0;                     // SCRIPT LOADs after NOSCRIPT, all connections
  int caller_exceptions = 0;                       // callers that ended by an exception (a bug)
  std::chrono::duration<double> elapsed{};

  int64_t Count(core::Outcome outcome) const;
  int64_t Unresolved() const;
};

ReserveLoadReport RunReserveLoad(const ReserveLoadOptions& options);

}  // namespace flashsale::testing
