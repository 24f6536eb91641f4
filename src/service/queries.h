#pragma once
// Reads: public activity info (through the S0-6 cache) and a user's orders.

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_writer.h"
#include "base/result.h"
#include "keyspace/activity_scripts.h"
#include "service/context.h"

namespace flashsale::service {

struct ActivityInfo {
  std::string definition_json;  // the public definition, as cached
  bool cache_hit = false;
  int64_t remaining = -1;  // -1: Redis did not say (not loaded, or unavailable)
  bool sold_out = false;
  int64_t server_time_ms = 0;
};

// The public JSON of an activity's definition: what the cache stores.
std::string RenderActivityDefinition(const store::ActivityRecord& record);
// A lottery's fields of that JSON ("prizes", "no_prize_weight", "admission"), written into the
// object `w` is in; nothing for a sale.
void WriteLotteryFields(base::JsonWriter& w, const core::Activity& activity);
// "waiting_room": the activity's waiting room (core/waiting_room.h), or null.
void WriteWaitingRoomField(base::JsonWriter& w, const core::Activity& activity);

// kNotFound for an activity this instance does not know. The definition comes from the cache
// key <ns>:cache:seckill:activity:<md5({"activity_id":...})>:v<record version>, filled from the
// database on a miss; remaining stock comes live from Redis.
boost::asio::awaitable<base::Result<ActivityInfo>> GetActivityInfo(ServiceContext& context,
                                                                   std::string_view activity_id);

// A payment confirmation for the caller's order (the payment provider's callback, or the
// buyer's client after paying): reserved -> paid. A payment for an order the expire job cancelled
// is refused and flagged for a refund (kRefused); never an extra unit sold. kNotFound: no such
// order of this user in the record (a just-reserved order may not be recorded yet: retry).
boost::asio::awaitable<base::Result<store::PayOutcome>> ConfirmPayment(ServiceContext& context,
                                                                       std::string_view user_id,
                                                                       std::string_view order_id);

struct UserOrder {
  std::string activity_id;
  keyspace::RecordedOrder order;
  bool persisted = false;  // the database has it (state below is the database's then)
  // reserved | paid | cancelled | released | refused (released, refused: Redis only; refused: the
  // record refused it and its units went back to stock)
  std::string state;
};

// The user's orders: the database's, plus those Redis recorded that the order pipeline has not
// persisted yet, so a user told "reserved" always finds the order (newest first). Those are found
// on each activity's order stream (and dead-letter stream), which holds every intent until it is
// persisted (activity_user_orders.lua): the reserve script keeps no per-user index. When the
// database cannot answer, Redis's records of the orders not yet persisted alone (persisted =
// false).
boost::asio::awaitable<base::Result<std::vector<UserOrder>>> GetUserOrders(
    ServiceContext& context, std::string_view user_id);

// One page of an activity's orders, for the export (issue 35, point 3; store::Store::OrdersPage):
// kNotFound for an activity the record does not have, kInvalidArgument for a bad cursor or limit.
boost::asio::awaitable<base::Result<store::OrderPage>> ReadOrdersPage(ServiceContext& context,
                                                                      std::string activity_id,
                                                                      std::string cursor,
                                                                      int64_t limit,
                                                                      store::OrderStates states);

// The report after a sale (issue 35, point 4): the activity as the record holds it and its
// orders counted (store::Store::ReportOrders); kNotFound for an activity the record does not have.
struct ActivityReport {
  store::ActivityRecord activity;
  store::OrderReport orders;
};
boost::asio::awaitable<base::Result<ActivityReport>> ReadActivityReport(ServiceContext& context,
                                                                        std::string activity_id);

}  // namespace flashsale::service
