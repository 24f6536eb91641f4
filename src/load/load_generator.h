#pragma once
// The load generator: many HTTP/1.1 keep-alive connections on Asio sending purchases (or draws)
// to a flashsale server, and a report of what came back.
//
//   closed loop  each connection sends its next request as soon as the previous one is answered:
//                the concurrency is fixed, the rate is whatever the server sustains; latency is
//                measured from the actual send.
//   open loop    requests are due at a fixed rate (OpenLoopSchedule), whatever the server does;
//                latency is measured from the intended send time. A burst is the open loop with
//                N requests within T seconds.
//
// Every wait is bounded: connecting and each request have a deadline (swept every 100 ms; a
// request past its deadline is counted as a timeout and its connection closed). Connection
// errors are counted and reported, the connection reopened after a short pause; nothing throws.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "load/histogram.h"
#include "load/schedule.h"

namespace flashsale::load {

enum class LoadMode { kClosed, kOpen };

struct LoadOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  // Further servers of the same sale (instances behind no balancer): the connections are spread
  // over host:port and these, round robin.
  std::vector<std::pair<std::string, uint16_t>> more_targets;
  std::string activity = "demo";
  std::string action = "purchase";  // purchase | draw: POST /api/v1/activities/{id}/{action}

  LoadMode mode = LoadMode::kClosed;
  int connections = 64;
  int threads = 1;        // I/O threads; the connections are spread over them
  int64_t requests = 0;   // stop after this many requests; 0: only the duration bounds the run
  double duration_s = 0;  // stop sending after this long; 0: only `requests` bounds the run
  double rate = 0;        // open loop: requests per second (> 0)

  int64_t users = 1000000;    // user ids are <user_prefix><n>, n in [0, users)
  bool random_users = false;  // false: request i is user i mod users
  std::string user_prefix = "u";
  uint64_t seed = 1;  // random users: thread t draws from SeededRandom(seed + t)

  // Identity: X-User-Id (gateway mode) unless a token secret is given, then a bearer token
  // signed with it (core::TokenSigner), valid for an hour from `wall_clock`'s now.
  std::string token_secret;

  int64_t connect_timeout_ms = 5000;
  int64_t request_timeout_ms = 10000;
  bool keep_order_ids = false;  // keep the order id of every "reserved" reply (for --verify)

  // Progress: called on the caller's thread every `progress_interval_ms` while the run lasts.
  std::function<void(const struct LoadProgress&)> progress;
  int64_t progress_interval_ms = 1000;

  const MonotonicClock* clock = &SteadyClock::Instance();
  const base::Clock* wall_clock = &base::SystemClock::Instance();
};

struct LoadProgress {
  double elapsed_s = 0;
  int64_t sent = 0;
  int64_t completed = 0;  // answered (any HTTP status)
  int64_t errors = 0;     // connection errors and timeouts
  int64_t reserved = 0;   // code 1
};

struct LoadReport {
  double elapsed_s = 0;                         // first send to last answer
  int64_t sent = 0;                             // requests written (or attempted)
  int64_t completed = 0;                        // answered with an HTTP response
  Histogram latency;                            // of answered requests, ns
  std::map<int64_t, int64_t> codes;             // reply `code` -> count
  std::map<int64_t, std::string> statuses;      // reply `code` -> its `status` word
  int64_t no_code = 0;                          // answered, but no integer `code` in the body
  std::map<int, int64_t> http_statuses;         // HTTP status -> count
  std::map<std::string, int64_t> errors;        // "connect", "timeout", "closed", "write", ...
  std::vector<std::string> reserved_order_ids;  // with keep_order_ids

  int64_t Count(int64_t code) const;
  int64_t ErrorCount() const;
  double RequestsPerSecond() const { return elapsed_s > 0 ? completed / elapsed_s : 0; }
};

// Runs the load to completion (bounded by `requests` and/or `duration_s`, and the timeouts).
// kInvalidArgument for options that make no run (no bound, an open loop without a rate, ...),
// kUnavailable if the host does not resolve. Connection failures are in the report, not errors.
base::Result<LoadReport> RunLoad(const LoadOptions& options);

// A human-readable report: throughput, latency percentiles, outcomes by code and HTTP status,
// errors. `title` is the first line.
std::string FormatReport(const LoadReport& report, const std::string& title);

// One line of progress, without a line end.
std::string FormatProgress(const LoadProgress& progress);

}  // namespace flashsale::load
