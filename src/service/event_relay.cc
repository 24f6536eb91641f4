#include "service/event_relay.h"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <charconv>
#include <csignal>
#include <map>
#include <memory>
#include <set>

#include "base/crypto.h"
#include "base/failpoint.h"
#include "base/json_writer.h"
#include "base/redact.h"
#include "keyspace/lock.h"
#include "keyspace/service_state.h"
#include "service/events.h"
#include "service/lease_keeper.h"

namespace flashsale::service {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr std::chrono::milliseconds kLease{10'000};
constexpr std::chrono::milliseconds kExtendEvery{3'000};
constexpr std::chrono::milliseconds kLockRetry{2'000};  // another instance relays: look again
constexpr int64_t kMaxParkedRead = 10'000;
constexpr size_t kMaxAnswerBytes = 64 * 1024;

asio::awaitable<void> Sleep(std::chrono::milliseconds duration) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(duration);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

}  // namespace

Result<WebhookUrl> ParseWebhookUrl(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return MakeError(ErrorCode::kInvalidArgument, "webhook URL '{}': {}",
                     base::RedactUrl(url.substr(0, 100)), why);
  };
  if (url.size() > 512) return bad("over 512 bytes");
  WebhookUrl parsed;
  parsed.tls = url.starts_with("https://");
  if (!parsed.tls && !url.starts_with("http://")) return bad("must start with https:// or http://");
  std::string_view rest = url.substr(parsed.tls ? 8 : 7);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  parsed.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (authority.find('@') != std::string_view::npos) return bad("user info is not supported");
  const size_t colon = authority.rfind(':');
  parsed.port = parsed.tls ? "443" : "80";
  if (colon != std::string_view::npos) {
    const std::string_view port = authority.substr(colon + 1);
    int value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 1 ||
        value > 65535) {
      return bad("the port must be 1..65535");
    }
    parsed.port = std::string(port);
    authority = authority.substr(0, colon);
  }
  if (authority.empty() || authority.find_first_of(" []") != std::string_view::npos) {
    return bad("needs a host name or IPv4 address");
  }
  if (parsed.target.find_first_of(" \r\n#") != std::string::npos) {
    return bad("the path holds a space, a line break or a fragment");
  }
  parsed.host = std::string(authority);
  return parsed;
}

std::string WebhookKey(std::string_view secret) {
  return base::DeriveKey(secret, "webhook-signing");
}

std::string WebhookSignature(std::string_view key, std::string_view timestamp,
                             std::string_view body) {
  std::string signed_text;
  signed_text.reserve(timestamp.size() + 1 + body.size());
  signed_text.append(timestamp).append(".").append(body);
  return "v1=" + base::HexEncode(base::HmacSha256(key, signed_text));
}

std::string WebhookBody(const store::OrderEvent& event) {
  base::JsonWriter w;
  WriteEventJson(w, event);
  return std::move(w).Take();
}

namespace {

// A webhook: POST <url>, signed; a 2xx answer acknowledges. An activity's own (with `activity`)
// is named "<url>#activity=<id>" in the record: a URL given to both keeps two cursors.
class WebhookReceiver final : public EventReceiver {
 public:
  WebhookReceiver(std::string url, WebhookUrl parsed, ServiceContext& context,
                  const RelayOptions& options, asio::ssl::context& tls, std::string activity = {})
      : name_(activity.empty() ? url : ActivityWebhookName(url, activity)),
        activity_(std::move(activity)),
        parsed_(std::move(parsed)),
        context_(context),
        tls_(tls),
        key_(options.key),
        timeout_(options.timeout) {}

  const std::string& name() const override { return name_; }
  std::string_view kind() const override { return "webhook"; }
  const std::string& activity() const override { return activity_; }

  asio::awaitable<base::Status> Send(const store::OrderEvent& event) override {
    const std::string body = WebhookBody(event);
    const std::string timestamp = std::to_string(context_.clock().NowMs() / 1000);
    HttpRequest request{
        .method = http::verb::post,
        .headers = {{"User-Agent", "flashsale-webhooks"},
                    {"Content-Type", "application/json"},
                    {"X-Flashsale-Event-Id", event.event_id},
                    {"X-Flashsale-Timestamp", timestamp},
                    {"X-Flashsale-Signature", WebhookSignature(key_, timestamp, body)}},
        .body = body,
        .timeout = timeout_,
        .max_answer_bytes = kMaxAnswerBytes};
    auto answer = co_await HttpExchange(parsed_, request, &tls_);
    if (!answer.ok()) co_return std::move(answer).error();
    if (answer->status < 200 || answer->status >= 300) {
      co_return MakeError(ErrorCode::kUnavailable, "answered {}", answer->status);
    }
    co_return base::Status{};
  }

 private:
  const std::string name_;
  const std::string activity_;
  const WebhookUrl parsed_;
  ServiceContext& context_;
  asio::ssl::context& tls_;
  const std::string key_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace

void RelayMetrics::AppendPrometheus(std::string& out) const {
  out +=
      "# HELP flashsale_events_delivered_total Order events a receiver acknowledged (a webhook's "
      "2xx, the broker's confirm).\n"
      "# TYPE flashsale_events_delivered_total counter\n"
      "# HELP flashsale_event_attempts_failed_total Deliveries of order events that failed (tried "
      "again, or the event parked).\n"
      "# TYPE flashsale_event_attempts_failed_total counter\n"
      "# HELP flashsale_events_parked_total Order events parked: kept in the record, listed by "
      "flashsale webhooks, sent again on demand.\n"
      "# TYPE flashsale_events_parked_total counter\n";
  for (const auto& [name, kind] : {std::pair<std::string_view, const Kind*>{"webhook", &webhook},
                                   std::pair<std::string_view, const Kind*>{"amqp", &amqp}}) {
    out += fmt::format(
        "flashsale_events_delivered_total{{receiver=\"{0}\"}} {1}\n"
        "flashsale_event_attempts_failed_total{{receiver=\"{0}\"}} {2}\n"
        "flashsale_events_parked_total{{receiver=\"{0}\"}} {3}\n",
        name, kind->delivered.value(), kind->failed_attempts.value(), kind->parked.value());
  }
}

std::string ActivityWebhookName(std::string_view url, std::string_view activity) {
  return fmt::format("{}#activity={}", url, activity);
}

EventRelay::EventRelay(ServiceContext& context, RelayOptions options)
    : context_(context), options_(std::move(options)), tls_(MakeTlsClientContext()) {
  for (const std::string& url : options_.urls) {
    auto parsed = ParseWebhookUrl(url);
    if (!parsed.ok()) {
      invalid_.push_back(std::move(parsed).error());
      continue;
    }
    receivers_.push_back(
        std::make_unique<WebhookReceiver>(url, std::move(*parsed), context_, options_, tls_));
  }
  if (!options_.amqp.url.empty()) {
    auto broker = AmqpReceiver::Create(options_.amqp, options_.timeout);
    if (broker.ok()) {
      receivers_.push_back(std::move(*broker));
    } else {
      invalid_.push_back(std::move(broker).error());
    }
  }
}

asio::awaitable<EventRelay::Delivery> EventRelay::Deliver(EventReceiver& receiver,
                                                          const store::OrderEvent& event,
                                                          int& attempts, std::string& error,
                                                          const bool* stop) {
  auto backoff = options_.backoff_initial;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    if (*stop) co_return Delivery::kStopped;
    ++attempts;
    auto sent = co_await receiver.Send(event);
    if (sent.ok()) {
      if (options_.metrics != nullptr) options_.metrics->Of(receiver.kind()).delivered.Add();
      co_return Delivery::kDelivered;
    }
    if (options_.metrics != nullptr) options_.metrics->Of(receiver.kind()).failed_attempts.Add();
    error = sent.error().message;
    spdlog::warn("{} {} to {} (attempt {} of {}): {}", receiver.kind(), event.event_id,
                 base::RedactUrl(receiver.name()), attempt, options_.max_attempts, error);
    if (attempt == options_.max_attempts) break;
    co_await Sleep(backoff);
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
  co_return Delivery::kFailed;
}

asio::awaitable<Result<int64_t>> EventRelay::PassOne(EventReceiver& receiver, const bool* stop,
                                                     const LeaseKeeper* keeper) {
  const std::string& url = receiver.name();
  const auto save = [&](store::DeliveryUpdate update) -> asio::awaitable<base::Status> {
    const auto write = [update = std::move(update), now = context_.clock().NowMs()](
                           store::Store& store) { return store.SaveDelivery(update, now); };
    co_return co_await context_.OnDb(write);
  };
  const auto lost = [&] { return *stop || (keeper != nullptr && keeper->lost()); };
  const auto count_parked = [&] {
    if (options_.metrics != nullptr) options_.metrics->Of(receiver.kind()).parked.Add();
  };
  int64_t handled = 0;
  // Activities with a parked event: their later events wait behind it.
  std::set<std::string> blocked;

  // 1. The parked events, in seq order: those an operator asked for are tried again.
  const auto read_parked = [url](store::Store& store) {
    return store.ParkedEvents(url, kMaxParkedRead);
  };
  auto parked = co_await context_.OnDb(read_parked);
  if (!parked.ok()) co_return std::move(parked).error();
  for (const store::ParkedEvent& held : *parked) {
    if (lost()) co_return handled;
    const std::string& activity = held.event.activity_id;
    store::DeliveryUpdate update{.receiver = url};
    if (!held.retry || blocked.contains(activity)) {
      if (held.retry) {  // an earlier event of its activity failed again: it stays behind it
        store::ParkedEvent again = held;
        again.attempts = 0;
        update.parked.push_back(std::move(again));
        if (auto saved = co_await save(std::move(update)); !saved.ok()) {
          co_return std::move(saved).error();
        }
      }
      blocked.insert(activity);
      continue;
    }
    int attempts = 0;
    std::string error;
    const Delivery delivery = co_await Deliver(receiver, held.event, attempts, error, stop);
    if (delivery == Delivery::kStopped) co_return handled;
    if (delivery == Delivery::kDelivered) {
      update.delivered.push_back(held.event.seq);
    } else {
      store::ParkedEvent again = held;
      again.attempts = attempts;
      again.last_error = error;
      update.parked.push_back(std::move(again));
      count_parked();
      blocked.insert(activity);
    }
    if (auto saved = co_await save(std::move(update)); !saved.ok()) {
      co_return std::move(saved).error();
    }
    ++handled;
  }

  // 2. New events after the receiver's cursor.
  const auto read_cursor = [url](store::Store& store) { return store.DeliveryCursor(url); };
  auto cursor = co_await context_.OnDb(read_cursor);
  if (!cursor.ok()) co_return std::move(cursor).error();
  const auto read_events = [after = *cursor, limit = options_.batch](store::Store& store) {
    return store.EventsAfter(after, limit);
  };
  auto events = co_await context_.OnDb(read_events);
  if (!events.ok()) co_return std::move(events).error();
  // Events of other activities (for an activity's own receiver): passed over, the cursor moved
  // past them with the next save, or at the end.
  int64_t passed_over = 0;
  for (const store::OrderEvent& event : *events) {
    if (lost()) break;
    if (!receiver.activity().empty() && event.activity_id != receiver.activity()) {
      passed_over = event.seq;
      ++handled;
      continue;
    }
    passed_over = 0;
    store::DeliveryUpdate update{.receiver = url, .cursor = event.seq};
    if (blocked.contains(event.activity_id)) {
      store::ParkedEvent held{.receiver = url, .event = event};
      held.last_error = "held behind an earlier undelivered event of activity " + event.activity_id;
      update.parked.push_back(std::move(held));
      count_parked();
    } else {
      int attempts = 0;
      std::string error;
      const Delivery delivery = co_await Deliver(receiver, event, attempts, error, stop);
      if (delivery == Delivery::kStopped) break;
      // A fault test: killed after the receiver's 2xx, before the cursor is saved.
      if (delivery == Delivery::kDelivered && base::FailpointHit("kill-after-webhook")) {
        ::raise(SIGKILL);
      }
      if (delivery == Delivery::kFailed) {
        spdlog::error("{} {} to {} parked after {} attempts: {}", receiver.kind(), event.event_id,
                      base::RedactUrl(url), attempts, error);
        store::ParkedEvent failed{.receiver = url, .event = event, .attempts = attempts};
        failed.last_error = error;
        update.parked.push_back(std::move(failed));
        count_parked();
        blocked.insert(event.activity_id);
      }
    }
    if (auto saved = co_await save(std::move(update)); !saved.ok()) {
      co_return std::move(saved).error();
    }
    ++handled;
  }
  if (passed_over > 0) {
    // (A named update: GCC 12 destroys a temporary argument twice inside a co_await.)
    store::DeliveryUpdate moved{.receiver = url, .cursor = passed_over};
    if (auto saved = co_await save(std::move(moved)); !saved.ok()) {
      co_return std::move(saved).error();
    }
  }
  co_return handled;
}

asio::awaitable<base::Status> EventRelay::RefreshActivityReceivers() {
  const auto read = [](store::Store& store) { return store.ListActivities(); };
  auto activities = co_await context_.OnDb(read);
  if (!activities.ok()) co_return std::move(activities).error();
  std::map<std::string, std::unique_ptr<EventReceiver>> now;
  for (const store::ActivityRecord& record : *activities) {
    const core::Activity& activity = record.activity;
    for (const std::string& url : activity.webhook_urls) {
      const std::string name = ActivityWebhookName(url, activity.id);
      if (auto kept = activity_receivers_.find(name); kept != activity_receivers_.end()) {
        now.emplace(name, std::move(kept->second));
        continue;
      }
      auto parsed = ParseWebhookUrl(url);
      if (!parsed.ok()) {  // the admin API checks them: one from elsewhere is logged, not sent to
        spdlog::warn("webhooks: activity {}: {}", activity.id, parsed.error().message);
        continue;
      }
      now.emplace(name, std::make_unique<WebhookReceiver>(url, std::move(*parsed), context_,
                                                          options_, tls_, activity.id));
    }
  }
  activity_receivers_ = std::move(now);
  co_return base::Status{};
}

asio::awaitable<Result<int64_t>> EventRelay::Pass(const bool* stop, const LeaseKeeper* keeper) {
  if (!invalid_.empty()) co_return invalid_.front();
  if (options_.activity_webhooks) {
    if (auto refreshed = co_await RefreshActivityReceivers(); !refreshed.ok()) {
      co_return std::move(refreshed).error();
    }
  }
  int64_t handled = 0;
  for (const auto& receiver : receivers_) {
    auto one = co_await PassOne(*receiver, stop, keeper);
    if (!one.ok()) co_return std::move(one).error();
    handled += *one;
  }
  for (const auto& [name, receiver] : activity_receivers_) {
    auto one = co_await PassOne(*receiver, stop, keeper);
    if (!one.ok()) co_return std::move(one).error();
    handled += *one;
  }
  co_return handled;
}

asio::awaitable<void> EventRelay::Run(const bool* stop) {
  const keyspace::NamespaceKeys keys(context_.settings().key_namespace);
  while (!*stop) {
    auto lock = std::make_shared<keyspace::DistributedLock>(
        context_.runner(), keys.JobLock("webhooks"), keys.JobFence("webhooks"));
    auto taken = co_await lock->TryAcquire(context_.random(), kLease);
    if (!taken.ok() || !taken->has_value()) {
      if (!taken.ok()) spdlog::warn("webhooks: the lock: {}", taken.error().message);
      co_await Sleep(kLockRetry);
      continue;
    }
    const keyspace::Lease lease = **taken;
    auto keeper =
        LeaseKeeper::Start(co_await asio::this_coro::executor, lock, lease, kLease, kExtendEvery);
    const LeaseKeeper::Guard keeping(keeper);
    while (!*stop && !keeper->lost()) {
      auto handled = co_await Pass(stop, keeper.get());
      if (!handled.ok()) {
        spdlog::warn("webhooks: {}", handled.error().message);
        co_await Sleep(options_.backoff_max);
        continue;
      }
      if (*handled == 0) co_await Sleep(options_.idle_poll);
    }
    keeper->Stop();
    auto released = co_await lock->Release(lease);
    if (!released.ok()) spdlog::warn("webhooks: the lock: {}", released.error().message);
  }
}

}  // namespace flashsale::service
