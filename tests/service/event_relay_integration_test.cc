// Issue 35, point 1: webhooks. The relay (service/event_relay.h) against a real HTTP receiver in
// the test, on a real redis-server and SQLite record: a receiver that fails, stalls and answers
// late loses no event, gets none out of order per activity, gets an event again only after a
// delivery it did not acknowledge, always with the same id and a signature that verifies; an
// event that keeps failing is parked (kept, listed), and delivered in order when retried.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "base/crypto.h"
#include "base/subprocess.h"
#include "service/event_relay.h"
#include "support/certificate.h"
#include "support/flashsale_process.h"
#include "support/service_fixture.h"
#include "support/wait.h"

namespace flashsale::service {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;

// How the receiver answers one delivery.
enum class Answer { kOk, kFail, kStall, kLate };

// A real HTTP server on a loopback port, a thread per connection. It records every request and
// answers as `decide(event id, how many times it saw that id before)` says: 200, 500, nothing
// (the connection closed after `delay`), or 200 after `delay`.
class Receiver {
 public:
  struct Delivery {
    std::string event_id;  // the header
    std::string body;
    std::string timestamp;
    std::string signature;
    Answer answer;
  };
  using Decide = std::function<Answer(const std::string& event_id, int seen_before)>;

  Receiver(Decide decide, std::chrono::milliseconds delay)
      : decide_(std::move(decide)),
        delay_(delay),
        acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~Receiver() {
    stopping_ = true;
    boost::system::error_code ignored;
    // Wake the blocking accept with a connection of our own.
    asio::ip::tcp::socket wake(io_);
    wake.connect(acceptor_.local_endpoint(), ignored);
    accept_thread_.join();
    for (auto& thread : connections_) thread.join();
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/hook";
  }
  std::vector<Delivery> deliveries() {
    std::lock_guard lock(mutex_);
    return deliveries_;
  }
  void set_decide(Decide decide) {
    std::lock_guard lock(mutex_);
    decide_ = std::move(decide);
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      asio::ip::tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stopping_) break;
      connections_.emplace_back([this, s = std::move(socket)]() mutable { Serve(std::move(s)); });
    }
  }
  void Serve(asio::ip::tcp::socket socket) {
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    boost::system::error_code ec;
    http::read(socket, buffer, request, ec);
    if (ec) return;
    Delivery delivery{std::string(request["X-Flashsale-Event-Id"]), request.body(),
                      std::string(request["X-Flashsale-Timestamp"]),
                      std::string(request["X-Flashsale-Signature"]), Answer::kOk};
    {
      std::lock_guard lock(mutex_);
      int seen = 0;
      for (const auto& d : deliveries_) seen += d.event_id == delivery.event_id ? 1 : 0;
      delivery.answer = decide_(delivery.event_id, seen);
      deliveries_.push_back(delivery);
    }
    if (delivery.answer == Answer::kStall || delivery.answer == Answer::kLate) {
      std::this_thread::sleep_for(delay_);
      if (delivery.answer == Answer::kStall) return;  // closed without an answer
    }
    http::response<http::string_body> response{
        delivery.answer == Answer::kFail ? http::status::internal_server_error : http::status::ok,
        11};
    response.body() = "{}";
    response.prepare_payload();
    http::write(socket, response, ec);
  }

  std::mutex mutex_;
  Decide decide_;
  std::chrono::milliseconds delay_;
  std::vector<Delivery> deliveries_;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stopping_ = false;
  std::thread accept_thread_;
  std::vector<std::thread> connections_;  // joined at the end (touched by the accept thread only)
};

class EventRelayTest : public testing::ServiceFixture<> {
 protected:
  // The relay's timeout; a stalled or late answer comes after twice as long.
  static constexpr std::chrono::milliseconds kTimeout{1500};

  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartService()); }

  RelayOptions Options(const std::string& url, int max_attempts) {
    RelayOptions options;
    options.urls = {url};
    options.key = WebhookKey(settings_.secret);
    options.max_attempts = max_attempts;
    options.backoff_initial = std::chrono::milliseconds(10);
    options.backoff_max = std::chrono::milliseconds(40);
    options.timeout = kTimeout;
    options.batch = 7;  // several reads per pass
    return options;
  }

  // Orders of `activities`, `per_activity` each, inserted in interleaved batches, some paid:
  // every change an event.
  void MakeEvents(const std::vector<std::string>& activities, int per_activity) {
    for (int i = 0; i < per_activity; ++i) {
      std::vector<store::OrderRecord> batch;
      for (const auto& activity : activities) {
        batch.push_back({.order_id = activity + "-" + std::to_string(i),
                         .activity_id = activity,
                         .user_id = "u" + std::to_string(i),
                         .quantity = 1,
                         .created_ms = 1,
                         .stream_id = "1-" + std::to_string(i)});
      }
      ASSERT_TRUE(store_->InsertOrders(batch, 100 + i).ok());
      if (i % 3 == 0) {
        ASSERT_EQ(*store_->PayOrder(batch[0].order_id, 200 + i), store::PayOutcome::kPaid);
      }
    }
  }

  std::vector<store::OrderEvent> AllEvents() {
    auto events = store_->EventsAfter(0, 10000);
    EXPECT_TRUE(events.ok());
    return *events;
  }

  int64_t PassUntilIdle(EventRelay& relay) {
    bool stop = false;
    int64_t total = 0;
    for (int round = 0; round < 100; ++round) {
      auto handled = io_.Run(relay.Pass(&stop), std::chrono::minutes(5));
      EXPECT_TRUE(handled.ok()) << handled.error().ToString();
      if (!handled.ok() || *handled == 0) break;
      total += *handled;
    }
    return total;
  }

  // The properties every run must have, whatever the receiver answered: each delivery signed
  // over its timestamp and body with the derived key and carrying its event's own id; per
  // activity, deliveries in seq order (an event again only before the next one is sent); per
  // event, every delivery but the last unacknowledged, the last acknowledged (for `delivered`).
  void ExpectDeliveredOnceAckedInOrder(const std::vector<Receiver::Delivery>& deliveries,
                                       const std::vector<store::OrderEvent>& delivered) {
    const std::string key = base::DeriveKey(settings_.secret, "webhook-signing");
    std::map<std::string, int64_t> last_seq;             // per activity
    std::map<std::string, std::vector<Answer>> answers;  // per event id
    for (const auto& d : deliveries) {
      const json::object body = json::parse(d.body).as_object();
      EXPECT_EQ(body.at("id").as_string(), d.event_id);
      EXPECT_EQ(d.signature,
                "v1=" + base::HexEncode(base::HmacSha256(key, d.timestamp + "." + d.body)));
      const std::string activity(body.at("activity_id").as_string());
      const int64_t seq = body.at("seq").as_int64();
      EXPECT_GE(seq, last_seq[activity]) << d.event_id << " out of order in " << activity;
      last_seq[activity] = seq;
      answers[d.event_id].push_back(d.answer);
    }
    for (const auto& event : delivered) {
      const auto& got = answers[event.event_id];
      ASSERT_FALSE(got.empty()) << event.event_id << " never arrived";
      EXPECT_EQ(got.back(), Answer::kOk) << event.event_id;
      for (size_t i = 0; i + 1 < got.size(); ++i) {
        EXPECT_NE(got[i], Answer::kOk) << event.event_id << " sent again after a 200";
      }
    }
  }
};

TEST_F(EventRelayTest, AReceiverThatFailsStallsAndAnswersLateGetsEveryEventInOrder) {
  ASSERT_NO_FATAL_FAILURE(MakeEvents({"east", "west"}, 6));
  const auto events = AllEvents();
  ASSERT_EQ(events.size(), 2u * 6 + 2);
  // Each event by its place: answered at once, or first refused, stalled or answered late once.
  std::map<std::string, int> place;
  for (size_t i = 0; i < events.size(); ++i) place[events[i].event_id] = static_cast<int>(i);
  Receiver receiver(
      [&](const std::string& id, int seen) {
        if (seen > 0) return Answer::kOk;
        switch (place[id] % 4) {
          case 1:
            return Answer::kFail;
          case 2:
            return Answer::kStall;
          case 3:
            return Answer::kLate;
          default:
            return Answer::kOk;
        }
      },
      2 * kTimeout);
  EventRelay relay(*context_, Options(receiver.url(), 5));
  EXPECT_EQ(PassUntilIdle(relay), static_cast<int64_t>(events.size()));

  const auto deliveries = receiver.deliveries();
  ASSERT_NO_FATAL_FAILURE(ExpectDeliveredOnceAckedInOrder(deliveries, events));
  EXPECT_GT(deliveries.size(), events.size()) << "the failed, stalled and late ones came again";
  EXPECT_TRUE(store_->ParkedEvents("", 10)->empty());
  EXPECT_EQ(*store_->DeliveryCursor(receiver.url()), events.back().seq);

  // Later events (north-0 reserved, then paid): only those are sent.
  ASSERT_NO_FATAL_FAILURE(MakeEvents({"north"}, 1));
  EXPECT_EQ(PassUntilIdle(relay), 2);
  EXPECT_EQ(receiver.deliveries().size(), deliveries.size() + 2);
}

TEST_F(EventRelayTest, AnEventThatKeepsFailingIsParkedWithTheRestOfItsActivityAndRetriedOnDemand) {
  ASSERT_NO_FATAL_FAILURE(MakeEvents({"east", "west"}, 3));
  const auto events = AllEvents();
  std::atomic<bool> healed = false;
  // east-1's reservation fails until healed; everything else is answered.
  Receiver receiver(
      [&](const std::string& id, int) {
        return id == "east-1/reserved" && !healed ? Answer::kFail : Answer::kOk;
      },
      2 * kTimeout);
  EventRelay relay(*context_, Options(receiver.url(), 3));
  EXPECT_EQ(PassUntilIdle(relay), static_cast<int64_t>(events.size()));

  // east-1 parked after 3 attempts, east-2 parked behind it untried; west went through.
  auto parked = store_->ParkedEvents(receiver.url(), 100);
  ASSERT_TRUE(parked.ok());
  ASSERT_EQ(parked->size(), 2u);
  EXPECT_EQ((*parked)[0].event.event_id, "east-1/reserved");
  EXPECT_EQ((*parked)[0].attempts, 3);
  EXPECT_EQ((*parked)[0].last_error, "answered 500");
  EXPECT_EQ((*parked)[1].event.event_id, "east-2/reserved");
  EXPECT_EQ((*parked)[1].attempts, 0);
  for (const auto& d : receiver.deliveries()) EXPECT_NE(d.event_id, "east-2/reserved");

  // Not retried unless asked; a retry asked for while it still fails parks it again.
  EXPECT_EQ(PassUntilIdle(relay), 0);
  EXPECT_EQ(*store_->RequestRetry(""), 2);
  EXPECT_EQ(PassUntilIdle(relay), 1);
  parked = store_->ParkedEvents(receiver.url(), 100);
  ASSERT_EQ(parked->size(), 2u);
  EXPECT_EQ((*parked)[0].attempts, 6);
  EXPECT_FALSE((*parked)[1].retry);

  // Healed and retried: both delivered, in order; nothing parked.
  healed = true;
  EXPECT_EQ(*store_->RequestRetry(receiver.url()), 2);
  EXPECT_EQ(PassUntilIdle(relay), 2);
  EXPECT_TRUE(store_->ParkedEvents("", 10)->empty());
  ASSERT_NO_FATAL_FAILURE(ExpectDeliveredOnceAckedInOrder(receiver.deliveries(), events));
}

// An activity's own webhook URLs (core::Activity::webhook_urls, in its definition): that
// activity's events only, besides the global receivers, each with a cursor of its own; a URL taken
// out of the definition gets nothing more.
TEST_F(EventRelayTest, AnActivitysOwnReceiverGetsItsEventsOnlyBesidesTheGlobalOnes) {
  const auto ok = [](const std::string&, int) { return Answer::kOk; };
  Receiver global(ok, kTimeout);
  Receiver east_hook(ok, kTimeout);
  core::Activity east{.id = "east", .title = "east", .start_ms = 0, .end_ms = 1000, .stock = 100};
  east.webhook_urls = {east_hook.url()};
  ASSERT_TRUE(store_->CreateActivity(east, 1).ok());
  ASSERT_NO_FATAL_FAILURE(MakeEvents({"east", "west"}, 4));
  const auto events = AllEvents();
  std::vector<store::OrderEvent> east_events;
  for (const auto& event : events) {
    if (event.activity_id == "east") east_events.push_back(event);
  }
  ASSERT_FALSE(east_events.empty());
  ASSERT_LT(east_events.size(), events.size());

  RelayOptions options = Options(global.url(), 3);
  options.activity_webhooks = true;
  EventRelay relay(*context_, options);
  PassUntilIdle(relay);
  ASSERT_NO_FATAL_FAILURE(ExpectDeliveredOnceAckedInOrder(global.deliveries(), events));
  ASSERT_NO_FATAL_FAILURE(ExpectDeliveredOnceAckedInOrder(east_hook.deliveries(), east_events));
  ASSERT_EQ(east_hook.deliveries().size(), east_events.size()) << "west's events went there too";
  for (const auto& d : east_hook.deliveries()) {
    EXPECT_EQ(json::parse(d.body).at("activity_id").as_string(), "east");
  }
  // Its own cursor, past west's events too; the global one's untouched by it.
  const std::string name = ActivityWebhookName(east_hook.url(), "east");
  EXPECT_EQ(name, east_hook.url() + "#activity=east");
  EXPECT_EQ(*store_->DeliveryCursor(name), events.back().seq);
  EXPECT_EQ(*store_->DeliveryCursor(global.url()), events.back().seq);

  // Taken out of the definition: east's next event goes to the global receiver only.
  ASSERT_TRUE(store_->UpdateActivity("east", {.webhook_urls = std::vector<std::string>{}}, 2).ok());
  const std::vector<store::OrderRecord> late = {{.order_id = "east-late",
                                                 .activity_id = "east",
                                                 .user_id = "late",
                                                 .quantity = 1,
                                                 .created_ms = 1,
                                                 .stream_id = "2-0"}};
  ASSERT_TRUE(store_->InsertOrders(late, 300).ok());
  EXPECT_EQ(PassUntilIdle(relay), 1);
  EXPECT_EQ(global.deliveries().size(), events.size() + 1);
  EXPECT_EQ(east_hook.deliveries().size(), east_events.size());
}

// An https:// receiver, as a shop runs one: Python's http.server behind its ssl module
// (support/https_receiver.py), checking each signature with Python's hmac, with a certificate
// made by openssl for localhost that the relay trusts through SSL_CERT_FILE. Every event arrives
// once with a signature that verifies; the same receiver under a certificate the relay does not
// trust gets nothing, and the relay says why (the TLS handshake) and keeps the events.
class HttpsReceiverTest : public EventRelayTest {
 protected:
  void SetUp() override {
    EventRelayTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(Certificate("server"));
    ASSERT_TRUE(Certificate("stranger"));
    const std::string key = base::DeriveKey(settings_.secret, "webhook-signing");
    auto receiver = base::Subprocess::Spawn(
        {"/usr/bin/python3", std::string(FLASHSALE_SOURCE_DIR) + "/tests/support/https_receiver.py",
         "--cert", dir_ / "server.crt", "--key", dir_ / "server.key", "--signing-key-hex",
         base::HexEncode(key), "--log", dir_ / "deliveries.jsonl", "--port-file", dir_ / "port"},
        dir_ / "receiver.log");
    ASSERT_TRUE(receiver.ok()) << receiver.error().message;
    receiver_.emplace(std::move(*receiver));
    ASSERT_TRUE(testing::Eventually(
        [&] { return std::filesystem::exists(dir_ / "port") || !receiver_->Running(); },
        std::chrono::seconds(20)));
    port_ = testing::ReadFile(dir_ / "port");
    ASSERT_FALSE(port_.empty()) << testing::ReadFile(dir_ / "receiver.log");
  }
  void TearDown() override { ::unsetenv("SSL_CERT_FILE"); }

  // A self-signed certificate for localhost in <dir>/<name>.crt, its key in <dir>/<name>.key.
  bool Certificate(const std::string& name) {
    return testing::SelfSignedCertificate(dir_.path(), name);
  }

  // The deliveries the receiver logged: event id -> (signature valid, body), in arrival order.
  std::vector<std::tuple<std::string, bool, std::string>> Logged() {
    std::vector<std::tuple<std::string, bool, std::string>> logged;
    std::istringstream lines(testing::ReadFile(dir_ / "deliveries.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      const json::object entry = json::parse(line).as_object();
      logged.emplace_back(std::string(entry.at("event_id").as_string()),
                          entry.at("valid").as_bool(), std::string(entry.at("body").as_string()));
    }
    return logged;
  }

  testing::TempDir dir_{"fs-https-hook"};
  std::optional<base::Subprocess> receiver_;
  std::string port_;
};

TEST_F(HttpsReceiverTest, EveryEventArrivesSignedOverTlsAndAnUntrustedCertificateGetsNothing) {
  ASSERT_NO_FATAL_FAILURE(MakeEvents({"east", "west"}, 3));
  const auto events = AllEvents();
  const std::string url = "https://localhost:" + port_ + "/hook";

  // Not trusted: every attempt fails in the handshake, the events are parked, none arrives.
  ::setenv("SSL_CERT_FILE", (dir_ / "stranger.crt").c_str(), 1);
  RelayMetrics metrics;
  RelayOptions options = Options(url, 2);
  options.metrics = &metrics;
  {
    EventRelay relay(*context_, options);
    EXPECT_EQ(PassUntilIdle(relay), static_cast<int64_t>(events.size()));
  }
  // Each activity's first event tried twice and parked, the rest held behind it.
  EXPECT_EQ(metrics.webhook.failed_attempts.value(), 4u);
  EXPECT_EQ(metrics.webhook.parked.value(), events.size());
  EXPECT_EQ(metrics.webhook.delivered.value(), 0u);
  auto parked = store_->ParkedEvents(url, 100);
  ASSERT_TRUE(parked.ok());
  ASSERT_EQ(parked->size(), events.size());
  EXPECT_NE(parked->front().last_error.find("TLS handshake"), std::string::npos)
      << parked->front().last_error;
  EXPECT_TRUE(Logged().empty());

  // Trusted: the parked events retried on demand arrive, each once, in order, signed.
  ::setenv("SSL_CERT_FILE", (dir_ / "server.crt").c_str(), 1);
  ASSERT_TRUE(store_->RequestRetry(url).ok());
  EventRelay relay(*context_, options);
  EXPECT_EQ(PassUntilIdle(relay), static_cast<int64_t>(events.size()));
  EXPECT_EQ(metrics.webhook.delivered.value(), events.size());
  std::string exposition;
  metrics.AppendPrometheus(exposition);
  EXPECT_NE(exposition.find("flashsale_events_parked_total{receiver=\"webhook\"} " +
                            std::to_string(events.size()) + "\n"),
            std::string::npos)
      << exposition;
  const auto logged = Logged();
  ASSERT_EQ(logged.size(), events.size()) << testing::ReadFile(dir_ / "receiver.log");
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(std::get<0>(logged[i]), events[i].event_id);
    EXPECT_TRUE(std::get<1>(logged[i])) << "the signature did not verify in Python";
    EXPECT_EQ(json::parse(std::get<2>(logged[i])).at("id").as_string(), events[i].event_id);
  }
  EXPECT_TRUE(store_->ParkedEvents(url, 100)->empty());
}

}  // namespace
}  // namespace flashsale::service
