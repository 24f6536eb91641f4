#pragma once
// The relay (issue 35, point 1): the record's order events (store::Store::EventsAfter) delivered to
// the receivers an operator configured, at least once and, per receiver, in order per activity.
// A receiver (EventReceiver) is a webhook URL (`--webhook-url`, below) or a RabbitMQ exchange
// (`--amqp-url`, service/amqp_publisher.h), each getting every activity's events, or a webhook
// URL of one activity's definition (core::Activity::webhook_urls, read from the record at each
// pass), getting that activity's events only, under its own name "<url>#activity=<id>"; the
// relay's loop, cursors, backoff and parking are the same for all.
//
// Design note. One relay runs across all instances: it holds the job lock "webhooks"
// (redis/lock.h, kept alive by a LeaseKeeper) while it relays, and stops when the lock is lost.
// For each receiver the record keeps a delivery cursor (store::DeliveryUpdate, under the
// receiver's name()); a pass reads the events after it and sends them one at a time, in seq
// order:
//   - the receiver's acknowledgement (a webhook's 2xx answer, the broker's publisher confirm)
//     marks the event delivered and the cursor moves past it (saved after each event, so a relay
//     that dies delivers at most that event again);
//   - anything else (a refused connection, a non-2xx status, a nack, no answer within the
//     timeout) is tried again after a pause that doubles from backoff_initial to backoff_max, up to
//     max_attempts in all; then the event is parked (kept in the record with its last error,
//     listed by the admin route and the CLI, never dropped) and the cursor moves on;
//   - an event of an activity that has a parked event is parked behind it, untried: a receiver
//     never gets an activity's events out of order.
// RequestRetry (admin route, CLI) asks for a receiver's parked events to be tried again; the
// next pass does so first, in seq order, and an activity whose earlier event fails again keeps
// its later ones parked. So an event reaches a receiver twice only when a delivery was not
// acknowledged (it failed, timed out, or the relay died before saving it), and always with the
// same id.
//
// A webhook's request: POST <url>, Content-Type: application/json, the body one event
// {"id","seq","order_id","activity_id","state","at_ms"}, and the headers
//   X-Flashsale-Event-Id   the event's id
//   X-Flashsale-Timestamp  Unix seconds when it was sent
//   X-Flashsale-Signature  "v1=" + hex(HMAC-SHA256(key, timestamp + "." + body))
// where key is WebhookKey(secret): derived from the service secret (base::DeriveKey, purpose
// "webhook-signing"), so a receiver holds a key that signs nothing else. https:// URLs are
// checked as every TLS client does (the system's CAs, or those SSL_CERT_FILE names; the
// certificate must name the host); http:// is taken too, for receivers on a private network.
//
// Limits: one event per request, one receiver after another, so a receiver that keeps timing out
// slows the others (max_attempts x timeout per event before it is parked); the host name is
// resolved outside the timeout (a numeric address or /etc/hosts resolves at once); every instance
// that may relay must hold the same secret, or receivers see signatures under another key after
// the lock moves.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/metrics.h"
#include "base/result.h"
#include "service/amqp_publisher.h"
#include "service/context.h"
#include "service/event_receiver.h"
#include "service/http_client.h"
#include "store/store.h"

namespace flashsale::service {

class LeaseKeeper;

// A receiver's URL, https://host[:port][/path] or http://host[:port][/path] (port 443 or 80 when
// not given; target "/" when no path is).
using WebhookUrl = HttpTarget;
// kInvalidArgument naming what is wrong (neither https:// nor http://, no host, a bad port, over
// 512 bytes).
base::Result<WebhookUrl> ParseWebhookUrl(std::string_view url);

// The name in the record of an activity's own webhook receiver: "<url>#activity=<id>" (a
// webhook URL has no fragment, so it never names a global receiver).
std::string ActivityWebhookName(std::string_view url, std::string_view activity);

// The signing key for receivers: DeriveKey(secret, "webhook-signing"), raw bytes.
std::string WebhookKey(std::string_view secret);
// "v1=" + lower-case hex of HMAC-SHA256(key, timestamp + "." + body).
std::string WebhookSignature(std::string_view key, std::string_view timestamp,
                             std::string_view body);
// The JSON body of one event.
std::string WebhookBody(const store::OrderEvent& event);

// What the relay did, by receiver kind ("webhook", "amqp"), for /metrics: events acknowledged,
// attempts that failed (each retried or, the last, parked), events parked (after their attempts,
// or held behind an earlier parked event of their activity).
struct RelayMetrics {
  struct Kind {
    base::Counter delivered;
    base::Counter failed_attempts;
    base::Counter parked;
  };
  Kind webhook;
  Kind amqp;

  Kind& Of(std::string_view kind) { return kind == "amqp" ? amqp : webhook; }
  void AppendPrometheus(std::string& out) const;
};

struct RelayOptions {
  std::vector<std::string> urls;  // the webhook receivers of every activity's events
  // Also the activities' own webhook URLs (core::Activity::webhook_urls), read from the record
  // at each pass; serve sets it.
  bool activity_webhooks = false;
  AmqpOptions amqp;      // the broker; an empty url: none
  std::string key;       // WebhookKey(secret)
  int64_t batch = 100;   // events read at once per receiver
  int max_attempts = 5;  // deliveries of one event in a pass before it is parked
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{10'000};
  std::chrono::milliseconds timeout{5'000};  // one delivery: connect, send, the answer
  std::chrono::milliseconds idle_poll{200};  // pause when nothing was relayed
  RelayMetrics* metrics = nullptr;           // counted when set

  // Whether there may be a receiver; none: the relay does not run.
  bool HasReceivers() const { return !urls.empty() || !amqp.url.empty() || activity_webhooks; }
};

class EventRelay {
 public:
  // `context` belongs to the calling thread (its Redis connection, database executor, clock).
  EventRelay(ServiceContext& context, RelayOptions options);

  // Until *stop: takes the "webhooks" job lock (or waits for the instance that holds it), then
  // relays while it holds it.
  boost::asio::awaitable<void> Run(const bool* stop);

  // The receivers of every activity's events, webhooks first (in the order of `urls`), then the
  // broker. (The activities' own receivers come after them in a pass.)
  const std::vector<std::unique_ptr<EventReceiver>>& receivers() const { return receivers_; }

  // One pass over every receiver (retries asked for, then new events); the number of events
  // delivered or parked. Stops early when *stop or the keeper (if any) lost the lock. Without the
  // lock: for tests, and callers that hold it.
  boost::asio::awaitable<base::Result<int64_t>> Pass(const bool* stop,
                                                     const LeaseKeeper* keeper = nullptr);

 private:
  enum class Delivery { kDelivered, kFailed, kStopped };
  // Up to max_attempts sends of one event, with backoff; `error` says why the last one failed.
  boost::asio::awaitable<Delivery> Deliver(EventReceiver& receiver, const store::OrderEvent& event,
                                           int& attempts, std::string& error, const bool* stop);
  boost::asio::awaitable<base::Result<int64_t>> PassOne(EventReceiver& receiver, const bool* stop,
                                                        const LeaseKeeper* keeper);

  ServiceContext& context_;
  RelayOptions options_;
  // The https receivers' TLS: the system's CAs (or SSL_CERT_FILE's), the host's name checked.
  boost::asio::ssl::context tls_;
  // Reads the activities' own webhook URLs (core::Activity::webhook_urls) into
  // activity_receivers_, keeping the receivers still configured.
  boost::asio::awaitable<base::Status> RefreshActivityReceivers();

  std::vector<std::unique_ptr<EventReceiver>> receivers_;
  std::map<std::string, std::unique_ptr<EventReceiver>> activity_receivers_;  // by name
  std::vector<base::Error> invalid_;  // receivers that could not be made (a bad URL): each pass
                                      // fails with the first
};

}  // namespace flashsale::service
