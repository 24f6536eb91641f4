#pragma once
// Reconciliation (S3-9): evaluates the invariant of docs/design.md for an activity, reports every
// term, repairs what it can prove, and reports what it cannot. In the form checked here (the
// record's total is the initial stock; a cancelled order's unit, once returned, is part of the
// remaining stock again):
//
//   initial (record's total units) = remaining (Redis)
//                                  + units of intents not yet in the record (Redis reserved)
//                                  + units of live orders in the record (reserved or paid)
//                                  + units of cancelled orders not yet returned to Redis
//
// The reads are ordered so that sales going on meanwhile cannot create phantom drift: the record
// first, then one atomic status of Redis's counters, then Redis's order records (only used to
// find which of them the record already has).
//
// Repairs, each provably safe while the sale runs:
//   - an order the record cancelled whose unit Redis still holds: released (sale_release.lua:
//     once, the record moves R -> X with the units);
//   - an order Redis reserved that is in neither the stream, the dead letters nor the record (its
//     intent was lost): its intent is appended again from the order record;
//   - a live order of the record that Redis does not hold (Redis lost acknowledged writes: a
//     restart from a cut AOF or an older snapshot, a replica promoted before it had them): applied
//     again (activity_reapply_orders.lua, idempotent by order id): its record, the buyer's units
//     (a lottery's draw count from draw_no), the units taken from stock; units Redis had sold
//     again meanwhile are oversold: the activity is closed and those orders flagged for
//     compensation in the record;
//   - an activity Redis does not have at all (data lost, or wiped): the sale is stopped already
//     (the scripts answer "unknown activity"); it is rebuilt from the record: loaded closed with
//     its whole stock, its live orders applied as above, then opened as the record says.
//     Intents that were in the lost stream and never reached the record are gone with it; they
//     are not re-sold either.
// Drift that none of these explains is reported, never "fixed" by adding or removing stock.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "keyspace/inspect.h"
#include "service/context.h"

namespace flashsale::service {

struct ReconcileReport {
  std::string activity_id;
  bool loaded = false;  // Redis had the activity when the job started
  int64_t initial = 0;
  int64_t remaining = 0;
  int64_t not_in_db = 0;
  int64_t db_live = 0;
  int64_t cancelled_not_returned = 0;
  int64_t drift = 0;  // initial - (the other terms); 0 when the invariant holds
  // Repairs made by this run.
  int64_t returned = 0;    // units released for orders the record cancelled
  int64_t reappended = 0;  // lost intents appended again
  bool rebuilt = false;    // Redis state rebuilt from the record
  // The lost-write repair (activity_reapply_orders.lua): live orders of the record Redis did not
  // hold, applied again; units Redis had resold meanwhile (the activity is then closed) and the
  // orders flagged for compensation; orders a surviving idempotency record or stream entry says
  // a buyer was told about, found neither in Redis nor in the record.
  int64_t reapplied_orders = 0;
  int64_t reapplied_units = 0;
  int64_t oversold_units = 0;
  int64_t flagged_orders = 0;
  int64_t acknowledged_lost = 0;
  std::vector<std::string> notes;  // what was found and could not be repaired, and why

  // The report as one JSON object.
  std::string Json() const;
};

// The invariant's terms from Redis's counters (`status`) and order records against the record's
// orders, with report.initial and report.db_live filled: sets remaining, not_in_db,
// cancelled_not_returned and drift, and notes what cannot be repaired. What a repair may act on:
struct Accounting {
  // Reserved in Redis, cancelled in the record: the units go back (sale_release.lua).
  std::vector<const keyspace::OrderRecordEntry*> to_release;
  // Reserved in Redis, not in the record: lost intents, unless on their way.
  std::vector<const keyspace::OrderRecordEntry*> lost_candidates;
};
Accounting Account(const keyspace::ActivityStatus& status,
                   const std::vector<keyspace::OrderRecordEntry>& records,
                   const std::vector<store::OrderRecord>& orders, ReconcileReport& report);

// One activity; repairs only when `repair`. `after_event`: Redis restarted or failed over
// (service/redis_repair.h) and the record's fence was advanced, so no batch read before can
// still be written: an activity Redis lost is rebuilt at once (no grace), and what survives of
// replies to buyers is checked for acknowledged orders that exist nowhere.
boost::asio::awaitable<base::Result<ReconcileReport>> Reconcile(ServiceContext& context,
                                                                const store::ActivityRecord& record,
                                                                bool repair,
                                                                bool after_event = false);

}  // namespace flashsale::service
