#pragma once
// After a sale: does it hold together? Checked against Redis (ActivityScripts::Status,
// OrderStream::Info) and the database of record (the Store interface), once the order pipeline
// has drained:
//
//   redis stock       units sold (reserved - released) == units loaded - units remaining
//   reserved replies  the load was told "reserved" no more often than Redis sold, each time with a
//                     different order id
//   pipeline drained  every order intent delivered and acknowledged (lag and pending 0) within the
//                     drain timeout
//   dead letters      no order intent parked in the dead-letter stream
//   db units          the database holds exactly the units sold, one row per Redis order record
//                     (a lottery's draws that won nothing left out: Redis records them so that a
//                     retry replays the draw, the database keeps no row for them)
//   per-user limit    no user holds more than the activity's per-user limit in the database
//   duplicate orders  no order intent recorded twice in the database
//   lost intents      every order id the load was told "reserved" is in the database
//
// A failed check is a finding, not an error: the result lists every check with what it saw.
// Errors are for what prevented checking (Redis or the database unreachable, unknown activity).

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/order_stream.h"
#include "store/store.h"

namespace flashsale::load {

struct VerifyOptions {
  std::string redis_url;  // redis://host:port/db or unix:///path/redis.sock
  std::string key_namespace = "fs";
  std::string db_url;  // sqlite:/path/flashsale.db or mysql://...
  std::string activity;
  int64_t reserved_replies = 0;                 // replies with code 1 the load received
  std::vector<std::string> reserved_order_ids;  // their order ids
  int64_t drain_timeout_ms = 30000;
  int64_t redis_timeout_ms = 2000;
};

struct VerifyCheck {
  std::string name;
  bool passed = false;
  std::string detail;
};

struct Verification {
  std::vector<VerifyCheck> checks;
  bool ok() const;
  // The names of the failed checks, comma-separated ("" when all passed).
  std::string Failed() const;
};

base::Result<Verification> VerifySale(const VerifyOptions& options);

// What the checks are made of: Redis and the database read after the drain.
struct SaleFacts {
  keyspace::ActivityStatus status;
  keyspace::GroupInfo pipeline;  // the last reading while waiting for the drain
  bool drained = false;
  int64_t no_prize_records = 0;  // of status.orders: a lottery's draws that won nothing
  store::OrderCounts counts;
  store::OrderAudit audit;
  int64_t missing = 0;          // order ids the load was told "reserved" not in the database
  std::string missing_example;  // the first of them
};

// The checks above from the facts (no I/O): every check, passed or not, with what it saw.
Verification CheckSale(const VerifyOptions& options, const SaleFacts& facts);

// One line per check, PASS or FAIL, then a verdict line.
std::string FormatVerification(const Verification& verification);

}  // namespace flashsale::load
