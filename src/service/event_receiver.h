#pragma once
// One destination of the order events (service/event_relay.h): a webhook URL or a RabbitMQ
// exchange. The relay keeps a delivery cursor and parked events per receiver, under its name();
// the receiver only sends one event and says whether it was acknowledged.

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>

#include "base/result.h"
#include "store/store.h"

namespace flashsale::service {

class EventReceiver {
 public:
  virtual ~EventReceiver() = default;

  // Its name in the record (delivery cursor, parked events), the admin route, the CLI and the
  // logs: it never holds a password. Stable for the same configuration, so a restart resumes at
  // the same cursor.
  virtual const std::string& name() const = 0;
  // "webhook" or "amqp", for the logs.
  virtual std::string_view kind() const = 0;
  // The one activity whose events it gets (an activity's own webhook, core::Activity::
  // webhook_urls); empty: every activity's. The relay moves its cursor past the others' events.
  virtual const std::string& activity() const = 0;

  // One delivery of `event`, bounded by the relay's timeout: ok when the receiver acknowledged it
  // (a webhook's 2xx, the broker's publisher confirm), else an error saying why not. Runs on the
  // relay's thread and must not block it.
  virtual boost::asio::awaitable<base::Status> Send(const store::OrderEvent& event) = 0;
};

}  // namespace flashsale::service
