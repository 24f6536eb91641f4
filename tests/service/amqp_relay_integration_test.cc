// Issue 35, point 1: RabbitMQ. The relay (service/event_relay.h) publishing to a real
// rabbitmq-server started by the fixture (support/rabbitmq_server.h), on a real redis-server and
// SQLite record; the messages read back by pika (tests/support/amqp_queue.py, Debian's
// python3-pika), a client nobody here wrote. Every event arrives, its id as the message-id, in
// order per activity; an event the broker did not confirm (no exchange, no queue took it, the
// broker stopped) is not delivered until it is; a broker stopped mid-sale and started again gets
// every event, duplicates only with the same id.
//
// ctest label `rabbitmq` (`ctest -LE rabbitmq` leaves these out).

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <future>
#include <map>
#include <memory>
#include <set>

#include "base/subprocess.h"
#include "service/amqp_publisher.h"
#include "service/event_relay.h"
#include "support/flashsale_process.h"
#include "support/rabbitmq_server.h"
#include "support/service_fixture.h"
#include "support/wait.h"

namespace flashsale::service {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

// One message as amqp_queue.py's `drain` prints it.
struct Message {
  std::string message_id;
  std::string routing_key;
  std::string content_type;
  int64_t delivery_mode = 0;
  std::string type;
  json::object body;
};

class AmqpRelayTest : public testing::ServiceFixture<> {
 protected:
  static void SetUpTestSuite() {
    ServiceFixture::SetUpTestSuite();
    broker_ = new testing::RabbitMqServer();
  }
  static void TearDownTestSuite() {
    delete broker_;
    broker_ = nullptr;
    ServiceFixture::TearDownTestSuite();
  }

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartService());
    // Names of this test's own on the shared broker.
    exchange_ = "fs." + settings_.key_namespace;
    queue_ = "q." + settings_.key_namespace;
  }

  RelayOptions Options(int max_attempts) {
    RelayOptions options;
    options.amqp.url = broker_->url();
    options.amqp.exchange = exchange_;
    options.max_attempts = max_attempts;
    options.backoff_initial = std::chrono::milliseconds(20);
    options.backoff_max = std::chrono::milliseconds(500);
    options.timeout = std::chrono::milliseconds(3000);
    options.batch = 7;  // several reads per pass
    return options;
  }

  // amqp_queue.py with `args` after the broker's URL; its output (stdout and stderr).
  std::string QueueTool(const std::vector<std::string>& args) {
    const std::string log = dir_ + "/amqp_queue-" + std::to_string(++tool_runs_) + ".log";
    std::vector<std::string> argv = {
        "/usr/bin/python3", std::string(FLASHSALE_SOURCE_DIR) + "/tests/support/amqp_queue.py",
        broker_->url()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto tool = base::Subprocess::Spawn(argv, log);
    EXPECT_TRUE(tool.ok()) << tool.error().ToString();
    if (!tool.ok()) return "";
    EXPECT_TRUE(tool->Wait(std::chrono::seconds(30))) << "amqp_queue.py did not finish";
    const std::string output = testing::ReadFile(log);
    EXPECT_TRUE(tool->exit_status() && WIFEXITED(*tool->exit_status()) &&
                WEXITSTATUS(*tool->exit_status()) == 0)
        << "amqp_queue.py failed:\n"
        << output;
    return output;
  }

  std::vector<Message> Drain() {
    std::vector<Message> messages;
    const std::string output = QueueTool({"drain", queue_});
    size_t start = 0;
    while (start < output.size()) {
      size_t end = output.find('\n', start);
      if (end == std::string::npos) end = output.size();
      const std::string line = output.substr(start, end - start);
      start = end + 1;
      if (line.empty() || line[0] != '{') continue;
      const json::object m = json::parse(line).as_object();
      const auto text = [&](const char* key) {
        return m.at(key).is_string() ? std::string(m.at(key).as_string()) : std::string();
      };
      messages.push_back({text("message_id"), text("routing_key"), text("content_type"),
                          m.at("delivery_mode").is_int64() ? m.at("delivery_mode").as_int64() : 0,
                          text("type"), json::parse(text("body")).as_object()});
    }
    return messages;
  }

  // Orders of `activities`, numbered first..first+count-1 in each, inserted in interleaved
  // batches, some paid: every change an event. On the calling thread (the store's user then).
  bool MakeEventsHere(const std::vector<std::string>& activities, int first, int count) {
    for (int i = first; i < first + count; ++i) {
      std::vector<store::OrderRecord> batch;
      for (const auto& activity : activities) {
        batch.push_back({.order_id = activity + "-" + std::to_string(i),
                         .activity_id = activity,
                         .user_id = "u" + std::to_string(i),
                         .quantity = 1,
                         .created_ms = 1,
                         .stream_id = "1-" + std::to_string(i)});
      }
      if (!store_->InsertOrders(batch, 100 + i).ok()) return false;
      if (i % 3 == 0) {
        auto paid = store_->PayOrder(batch[0].order_id, 200 + i);
        if (!paid.ok() || *paid != store::PayOutcome::kPaid) return false;
      }
    }
    return true;
  }

  // A call on the database thread, the store's only user while a relay runs.
  template <typename F>
  auto OnDbThread(F function) {
    auto task = std::make_shared<std::packaged_task<decltype(function())()>>(std::move(function));
    auto future = task->get_future();
    asio::post(db_, [task] { (*task)(); });
    if (future.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      throw std::runtime_error("the database thread did not answer within 60 s");
    }
    return future.get();
  }

  std::vector<store::OrderEvent> AllEvents() {
    return OnDbThread([this] {
      auto events = store_->EventsAfter(0, 10000);
      EXPECT_TRUE(events.ok());
      return events.ok() ? *events : std::vector<store::OrderEvent>{};
    });
  }

  int64_t PassUntilIdle(EventRelay& relay) {
    bool stop = false;
    int64_t total = 0;
    for (int round = 0; round < 100; ++round) {
      auto handled = io_.Run(relay.Pass(&stop), std::chrono::minutes(2));
      EXPECT_TRUE(handled.ok()) << handled.error().ToString();
      if (!handled.ok() || *handled == 0) break;
      total += *handled;
    }
    return total;
  }

  // Every event of `events` arrived, each message carrying its event as the body, its id as the
  // message-id, its activity as the routing key, its state as the type, as persistent JSON; per
  // activity in seq order, an event again only right after itself (a delivery the broker did not
  // confirm); no message of another event. With `exactly_once`, no event twice.
  void ExpectEveryEventInOrder(const std::vector<Message>& messages,
                               const std::vector<store::OrderEvent>& events, bool exactly_once) {
    std::map<std::string, const store::OrderEvent*> by_id;
    for (const auto& event : events) by_id[event.event_id] = &event;
    std::map<std::string, int> seen;
    std::map<std::string, int64_t> last_seq;  // per activity
    for (const Message& m : messages) {
      ASSERT_TRUE(by_id.contains(m.message_id)) << "a message of no event: " << m.message_id;
      const store::OrderEvent& event = *by_id[m.message_id];
      EXPECT_EQ(m.body.at("id").as_string(), m.message_id);
      EXPECT_EQ(m.body.at("seq").as_int64(), event.seq);
      EXPECT_EQ(m.body.at("state").as_string(), event.state);
      EXPECT_EQ(m.routing_key, event.activity_id);
      EXPECT_EQ(m.type, event.state);
      EXPECT_EQ(m.content_type, "application/json");
      EXPECT_EQ(m.delivery_mode, 2);
      EXPECT_GE(event.seq, last_seq[event.activity_id])
          << m.message_id << " out of order in " << event.activity_id;
      last_seq[event.activity_id] = event.seq;
      ++seen[m.message_id];
    }
    for (const auto& event : events) {
      EXPECT_GE(seen[event.event_id], 1) << event.event_id << " never arrived";
      if (exactly_once) {
        EXPECT_EQ(seen[event.event_id], 1) << event.event_id;
      }
    }
  }

  static inline testing::RabbitMqServer* broker_ = nullptr;
  std::string exchange_;
  std::string queue_;
  int tool_runs_ = 0;
};

TEST(AmqpUrl, ParsedNamedWithoutThePasswordAndRefusedWithAReason) {
  auto target = ParseAmqpUrl("amqp://app:s3cret@mq.internal:5673/shop");
  ASSERT_TRUE(target.ok()) << target.error().ToString();
  EXPECT_EQ(target->host, "mq.internal");
  EXPECT_EQ(target->port, 5673);
  EXPECT_EQ(target->user, "app");
  EXPECT_EQ(target->password, "s3cret");
  EXPECT_EQ(target->vhost, "shop");
  EXPECT_EQ(AmqpReceiverName(*target, "orders"), "amqp://mq.internal:5673/shop#orders");
  auto defaults = ParseAmqpUrl("amqp://mq");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(AmqpReceiverName(*defaults, "x"), "amqp://mq:5672/%2F#x");

  for (const char* bad : {"http://mq", "amqps://u:s3cret@mq", "amqp://u:s3cret@mq:99999/",
                          "amqp://u:s3cret@mq:port/"}) {
    auto refused = ParseAmqpUrl(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().code, base::ErrorCode::kInvalidArgument);
    EXPECT_EQ(refused.error().message.find("s3cret"), std::string::npos) << refused.error().message;
  }
  EXPECT_TRUE(CheckExchangeName("flashsale.events").ok());
  EXPECT_FALSE(CheckExchangeName("").ok());
  EXPECT_FALSE(CheckExchangeName("with space").ok());
}

TEST_F(AmqpRelayTest, EveryEventIsPublishedConfirmedWithItsIdAsMessageIdInOrderPerActivity) {
  QueueTool({"setup", exchange_, queue_});
  ASSERT_TRUE(MakeEventsHere({"east", "west", "north"}, 0, 8));
  const auto events = AllEvents();
  ASSERT_EQ(events.size(), 3u * 8 + 3);
  EventRelay relay(*context_, Options(3));
  ASSERT_EQ(relay.receivers().size(), 1u);
  const std::string name = relay.receivers()[0]->name();
  EXPECT_EQ(name.find(testing::RabbitMqServer::kPassword), std::string::npos) << name;
  EXPECT_EQ(PassUntilIdle(relay), static_cast<int64_t>(events.size()));

  ASSERT_NO_FATAL_FAILURE(ExpectEveryEventInOrder(Drain(), events, /*exactly_once=*/true));
  EXPECT_TRUE(store_->ParkedEvents("", 10)->empty());
  EXPECT_EQ(*store_->DeliveryCursor(name), events.back().seq);

  // Later events only.
  ASSERT_TRUE(MakeEventsHere({"south"}, 0, 1));
  EXPECT_EQ(PassUntilIdle(relay), 2);
  const auto later = Drain();
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(later[0].message_id, "south-0/reserved");
  EXPECT_EQ(later[1].message_id, "south-0/paid");
}

TEST_F(AmqpRelayTest, AnEventTheBrokerDidNotConfirmIsParkedAndDeliveredWhenRetried) {
  ASSERT_TRUE(MakeEventsHere({"east"}, 0, 2));
  const auto events = AllEvents();
  ASSERT_EQ(events.size(), 3u);  // east-0 reserved and paid, east-1 reserved
  EventRelay relay(*context_, Options(2));
  const std::string name = relay.receivers()[0]->name();

  // No exchange: the broker closes the channel (404); the first event is parked after its two
  // attempts and the others of its activity behind it, untried.
  EXPECT_EQ(PassUntilIdle(relay), 3);
  auto parked = store_->ParkedEvents(name, 100);
  ASSERT_TRUE(parked.ok());
  ASSERT_EQ(parked->size(), 3u);
  EXPECT_EQ((*parked)[0].attempts, 2);
  EXPECT_NE((*parked)[0].last_error.find("404"), std::string::npos) << (*parked)[0].last_error;
  EXPECT_EQ((*parked)[1].attempts, 0);

  // The exchange, but no queue bound to it: the message comes back (mandatory), not delivered.
  QueueTool({"declare", exchange_});
  EXPECT_EQ(*store_->RequestRetry(name), 3);
  EXPECT_EQ(PassUntilIdle(relay), 1);
  parked = store_->ParkedEvents(name, 100);
  ASSERT_EQ(parked->size(), 3u);
  EXPECT_NE((*parked)[0].last_error.find("unroutable"), std::string::npos)
      << (*parked)[0].last_error;

  // A queue bound: retried, all three delivered in order, nothing parked.
  QueueTool({"setup", exchange_, queue_});
  EXPECT_EQ(*store_->RequestRetry(""), 3);
  EXPECT_EQ(PassUntilIdle(relay), 3);
  EXPECT_TRUE(store_->ParkedEvents("", 10)->empty());
  ASSERT_NO_FATAL_FAILURE(ExpectEveryEventInOrder(Drain(), events, /*exactly_once=*/true));
}

TEST_F(AmqpRelayTest, ABrokerStoppedMidSaleAndStartedAgainGetsEveryEvent) {
  QueueTool({"setup", exchange_, queue_});
  // Enough attempts to ride out the broker's restart (up to 200 x 0.5 s) without parking.
  EventRelay relay(*context_, Options(200));
  const std::string name = relay.receivers()[0]->name();

  // The relay runs on the I/O thread all along, as in serve; the sale's events are written on the
  // database thread meanwhile.
  bool stop = false;  // the I/O thread's
  std::atomic<bool> ended = false;
  asio::co_spawn(
      io_.context(),
      [&]() -> asio::awaitable<void> {
        asio::steady_timer idle(co_await asio::this_coro::executor);
        while (!stop) {
          auto handled = co_await relay.Pass(&stop);
          EXPECT_TRUE(handled.ok()) << handled.error().ToString();
          if (handled.ok() && *handled > 0) continue;
          idle.expires_after(std::chrono::milliseconds(50));
          co_await idle.async_wait(asio::as_tuple(asio::use_awaitable));
        }
      },
      [&](std::exception_ptr) { ended = true; });
  const auto cursor = [&] { return OnDbThread([&] { return *store_->DeliveryCursor(name); }); };
  const std::vector<std::string> activities = {"east", "west"};

  ASSERT_TRUE(OnDbThread([&] { return MakeEventsHere(activities, 0, 5); }));
  const int64_t first_part = AllEvents().back().seq;
  ASSERT_TRUE(
      testing::Eventually([&] { return cursor() >= first_part; }, std::chrono::seconds(30)));

  broker_->Stop();
  ASSERT_TRUE(OnDbThread([&] { return MakeEventsHere(activities, 5, 5); }));
  // While the broker is down nothing more is confirmed (the relay keeps trying).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_LT(cursor(), AllEvents().back().seq);
  broker_->Start();
  ASSERT_TRUE(OnDbThread([&] { return MakeEventsHere(activities, 10, 5); }));
  const auto events = AllEvents();
  const bool caught_up =
      testing::Eventually([&] { return cursor() >= events.back().seq; }, std::chrono::seconds(45));
  io_.Call([&] { stop = true; });
  ASSERT_TRUE(testing::Eventually([&] { return ended.load(); }, std::chrono::seconds(30)));
  ASSERT_TRUE(caught_up) << "the relay did not catch up after the broker came back";

  EXPECT_TRUE(store_->ParkedEvents("", 10)->empty());
  ASSERT_NO_FATAL_FAILURE(ExpectEveryEventInOrder(Drain(), events, /*exactly_once=*/false));
}

}  // namespace
}  // namespace flashsale::service
