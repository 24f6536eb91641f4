#include "service/events.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace flashsale::service {

namespace asio = boost::asio;
using base::Result;

asio::awaitable<Result<EventsPage>> ReadEvents(ServiceContext& context, int64_t after,
                                               int64_t limit, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + std::min(wait, kMaxEventsWait);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    const auto read = [after, limit](store::Store& store) {
      return store.EventsAfter(after, limit);
    };
    auto events = co_await context.OnDb(read);
    if (!events.ok()) co_return std::move(events).error();
    if (!events->empty() || std::chrono::steady_clock::now() + kEventsPoll > until) {
      EventsPage page;
      page.next = events->empty() ? after : events->back().seq;
      page.events = std::move(*events);
      co_return page;
    }
    timer.expires_after(kEventsPoll);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<Result<std::vector<store::ParkedEvent>>> ListParked(ServiceContext& context,
                                                                    int64_t limit) {
  const auto read = [limit](store::Store& store) { return store.ParkedEvents("", limit); };
  co_return co_await context.OnDb(read);
}

asio::awaitable<Result<int64_t>> RetryParked(ServiceContext& context, std::string receiver) {
  const auto ask = [receiver = std::move(receiver)](store::Store& store) {
    return store.RequestRetry(receiver);
  };
  co_return co_await context.OnDb(ask);
}

void WriteEventJson(base::JsonWriter& w, const store::OrderEvent& event) {
  w.BeginObject()
      .Key("seq")
      .Int(event.seq)
      .Key("id")
      .String(event.event_id)
      .Key("order_id")
      .String(event.order_id)
      .Key("activity_id")
      .String(event.activity_id)
      .Key("state")
      .String(event.state)
      .Key("at_ms")
      .Int(event.at_ms)
      .EndObject();
}

}  // namespace flashsale::service
