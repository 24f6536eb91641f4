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
#include "redis/scripts.h"
#include "redis/seckill.h"

namespace flashsale::redis {

// An order record with its state: 'R' reserved, 'X' released, 'N' a draw that won nothing.
struct OrderRecordEntry {
  char state = 'R';
  std::string user_id;
  RecordedOrder order;
};

// A live order of the record, to restore into a rebuilt activity.
struct RestoredOrder {
  std::string order_id;
  std::string user_id;
  int64_t quantity = 1;
  int64_t created_ms = 0;
  std::vector<std::string> items;
};

class ActivityInspector {
 public:
  ActivityInspector(ScriptRunner& runner, std::string key_namespace);

  // Every record of the `orders` hash (HSCAN, in pages).
  boost::asio::awaitable<base::Result<std::vector<OrderRecordEntry>>> Orders(
      std::string_view activity_id);
  // The order ids of every entry in the order stream and in the dead-letter stream.
  boost::asio::awaitable<base::Result<std::set<std::string>>> OrderIdsInStreams(
      std::string_view activity_id);
  // order_reappend.lua: true if appended (the record was still reserved).
  boost::asio::awaitable<base::Result<bool>> Reappend(std::string_view activity_id,
                                                      std::string_view order_id);
  // activity_restore_orders.lua, in chunks: the number of orders restored.
  boost::asio::awaitable<base::Result<int64_t>> RestoreOrders(
      std::string_view activity_id, std::span<const RestoredOrder> orders);

 private:
  ScriptRunner& runner_;
  std::string namespace_;
  const Script& reappend_;
  const Script& restore_;
  IntField appended_, restored_;  // reply fields (RETURNS)
};

}  // namespace flashsale::redis
