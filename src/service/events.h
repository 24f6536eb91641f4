#pragma once
// The pull feed of order events (issue 35): the record's outbox (store::Store::EventsAfter) read
// after a cursor, with an optional long poll for consumers that follow it.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/json_writer.h"
#include "base/result.h"
#include "service/context.h"
#include "store/store.h"

namespace flashsale::service {

inline constexpr std::chrono::milliseconds kMaxEventsWait{25'000};
inline constexpr std::chrono::milliseconds kEventsPoll{100};

struct EventsPage {
  std::vector<store::OrderEvent> events;  // by seq
  int64_t next = 0;  // the cursor to read after next time: the last event's seq, or `after`
};

// The events after `after`, at most `limit`. With `wait` (capped at kMaxEventsWait) and none yet,
// the record is read again every kEventsPoll until some come or the wait is over (then an empty
// page). The record's errors as they are (kInvalidArgument for a bad cursor or limit).
boost::asio::awaitable<base::Result<EventsPage>> ReadEvents(ServiceContext& context, int64_t after,
                                                            int64_t limit,
                                                            std::chrono::milliseconds wait);

// The webhook deliveries parked (service/event_relay.h), of every receiver, at most `limit`.
boost::asio::awaitable<base::Result<std::vector<store::ParkedEvent>>> ListParked(
    ServiceContext& context, int64_t limit);
// Asks for the parked deliveries of `receiver` (empty: every receiver) to be tried again by the
// relay's next pass; the number newly asked for.
boost::asio::awaitable<base::Result<int64_t>> RetryParked(ServiceContext& context,
                                                          std::string receiver);

// One event as a JSON object, the same in the pull feed, the parked list and a webhook's body:
// {"seq", "id", "order_id", "activity_id", "state", "at_ms"}.
void WriteEventJson(base::JsonWriter& w, const store::OrderEvent& event);

}  // namespace flashsale::service
