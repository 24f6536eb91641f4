#pragma once
// RabbitMQ as a receiver of the order events (issue 35, point 1; service/event_relay.h): each
// event published to an exchange with publisher confirms, through librabbitmq (rabbitmq-c).
//
// Design note.
//   - The message: the event's JSON (the feed's, WriteEventJson) as the body, content-type
//     application/json, delivery mode 2 (persistent), message-id the event's id, type its state,
//     timestamp its time (Unix seconds); the routing key is the event's activity id, so a queue
//     can be bound to one activity's events (a topic or direct exchange) or to all of them.
//   - Delivered means confirmed: the channel is in confirm mode (confirm.select) and a publish
//     counts only when the broker's basic.ack for it arrives within the timeout. A basic.nack, a
//     basic.return (published `mandatory`: no queue took the message), a closed channel or
//     connection, or no confirm within the timeout means not delivered: the relay tries it again
//     with its backoff and parks it as it does a webhook's. After any failure the connection is
//     dropped and the next attempt opens a new one (no late confirm is ever taken for another
//     message).
//   - librabbitmq blocks: every call runs on a thread of the publisher's own, and the relay's
//     coroutine waits on its own thread (service/blocking.h). Every call there is bounded by the
//     timeout: the TCP connect (amqp_socket_open_noblock), the login (handshake timeout), each
//     RPC (rpc timeout) and the wait for the confirm (amqp_simple_wait_frame_noblock). The host
//     name's lookup and a send into a full socket buffer are not (a numeric address resolves at
//     once; one event is far below a socket buffer).
//   - The exchange is not declared here: the operator declares it (and binds the queues), as the
//     owner of the broker's topology. Publishing to a missing exchange fails (404 NOT_FOUND).
//   - The receiver's name in the record is "amqp://host:port/vhost#exchange" (the vhost
//     percent-encoded; never the user or the password), so changing the password keeps the
//     cursor. The URL itself is amqp://user:password@host:port/vhost (amqp_parse_url's syntax,
//     guest:guest@localhost:5672/ by default); amqps:// is not supported.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "service/event_receiver.h"
#include "store/store.h"

namespace flashsale::service {

struct AmqpOptions {
  std::string url;                            // amqp://user:password@host:port/vhost; empty: none
  std::string exchange = "flashsale.events";  // where events are published
};

// A broker's address as amqp_parse_url reads it.
struct AmqpTarget {
  std::string host;
  int port = 5672;
  std::string user;
  std::string password;
  std::string vhost;
};
// kInvalidArgument naming what is wrong (not amqp://, amqps://, a bad port, over 512 bytes), the
// URL redacted (base::RedactUrl).
base::Result<AmqpTarget> ParseAmqpUrl(std::string_view url);
// kInvalidArgument unless 1..255 characters of A-Z a-z 0-9 - _ . : (AMQP's exchange names; the
// default exchange "" routes by queue name and is refused).
base::Status CheckExchangeName(std::string_view exchange);

// "amqp://host:port/vhost#exchange": the receiver's name in the record.
std::string AmqpReceiverName(const AmqpTarget& target, std::string_view exchange);

class AmqpReceiver final : public EventReceiver {
 public:
  // The URL and exchange checked (ParseAmqpUrl, CheckExchangeName); nothing is connected yet.
  static base::Result<std::unique_ptr<AmqpReceiver>> Create(const AmqpOptions& options,
                                                            std::chrono::milliseconds timeout);
  // Waits for the call in progress, if any (bounded by the timeout), and closes the connection.
  ~AmqpReceiver() override;
  AmqpReceiver(const AmqpReceiver&) = delete;
  AmqpReceiver& operator=(const AmqpReceiver&) = delete;

  const std::string& name() const override { return name_; }
  std::string_view kind() const override { return "amqp"; }
  const std::string& activity() const override { return every_activity_; }
  // Connects when not connected, publishes, waits for the confirm.
  boost::asio::awaitable<base::Status> Send(const store::OrderEvent& event) override;

  class Link;  // the connection, used on the publisher's thread only

 private:
  AmqpReceiver(std::string name, std::shared_ptr<Link> link, std::chrono::milliseconds timeout);

  std::string name_;
  const std::string every_activity_;
  std::chrono::milliseconds timeout_;
  boost::asio::thread_pool thread_{1};
  std::shared_ptr<Link> link_;
};

}  // namespace flashsale::service
