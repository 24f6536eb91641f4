#pragma once
// What reconciliation reads and repairs of one activity in Redis, beyond the hot-path scripts:
// every order record, the order ids still in the stream and the dead-letter stream, and the two
// repairs that go through scripts (an intent appended again from its record; the live orders of
// a rebuilt activity restored before its stock).

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "keyspace/activity_scripts.h"
#include "redis/scripts.h"

namespace flashsale::keyspace {

// An order record with its state: 'R' reserved, 'X' released, 'F' refused (dead-lettered, its
// units returned), 'N' a draw that won nothing.
struct OrderRecordEntry {
  char state = 'R';
  std::string user_id;
  RecordedOrder order;
};

// A live order of the record, to apply again to an activity Redis lost it from.
struct RestoredOrder {
  std::string order_id;
  std::string user_id;
  int64_t quantity = 1;
  int64_t created_ms = 0;
  std::vector<std::string> items;
  int64_t draw_no = 0;  // a lottery win's draw number (0 for a sale)
};

// What activity_reapply_orders.lua did.
struct ReapplyResult {
  int64_t applied = 0;      // orders applied again now
  int64_t units = 0;        // their units
  int64_t present = 0;      // orders Redis held already (nothing done)
  int64_t short_units = 0;  // units no longer in stock: oversold (the activity was closed)
  std::vector<std::string> short_orders;  // the orders those units belong to
};

// What activity_write_rebase.lua did.
struct RebaseResult {
  enum class Outcome { kRebased, kAlready, kBehind, kNotLoaded };
  Outcome outcome = Outcome::kNotLoaded;
  WriteSeq now;  // the sequence Redis holds after the call
};

class ActivityInspector {
 public:
  ActivityInspector(redis::ScriptRunner& runner, std::string key_namespace);

  // Every record of the `orders` hash (HSCAN, in pages).
  boost::asio::awaitable<base::Result<std::vector<OrderRecordEntry>>> Orders(
      std::string_view activity_id);
  // The order ids of every entry in the order stream and in the dead-letter stream.
  boost::asio::awaitable<base::Result<std::set<std::string>>> OrderIdsInStreams(
      std::string_view activity_id);
  // order_reappend.lua: true if appended (the record was still reserved).
  boost::asio::awaitable<base::Result<bool>> Reappend(std::string_view activity_id,
                                                      std::string_view order_id);
  // activity_reapply_orders.lua, in chunks: the record's live orders applied again to a loaded
  // activity that lost them (each once, by order id), stock taken; see the script.
  boost::asio::awaitable<base::Result<ReapplyResult>> ReapplyOrders(
      std::string_view activity_id, std::span<const RestoredOrder> orders);
  // activity_write_rebase.lua: the last step of a repair, the activity's write sequence on from
  // (epoch, 0), unless Redis holds less than `seen` (what the repair read before it began: it
  // lost writes again meanwhile) or an epoch at or past `epoch` already.
  boost::asio::awaitable<base::Result<RebaseResult>> Rebase(std::string_view activity_id,
                                                            int64_t epoch, WriteSeq seen);
  // Idempotency records of the activity that name an order id (SCAN): order id -> the record's
  // outcome code. What survives of replies given to buyers.
  boost::asio::awaitable<base::Result<std::vector<std::string>>> IdempotentOrderIds(
      std::string_view activity_id);

 private:
  redis::ScriptRunner& runner_;
  std::string namespace_;
  const redis::Script& reappend_;
  const redis::Script& reapply_;
  const redis::Script& rebase_;
  redis::IntField appended_;  // reply fields (RETURNS)
  redis::IntField applied_, units_, present_, short_units_;
  redis::StrField short_order_id_;
  redis::IntField rebase_code_, rebase_epoch_, rebase_seq_;
};

}  // namespace flashsale::keyspace
