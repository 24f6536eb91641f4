// The order consumer's use case with no Redis: it reads order intents from an in-process order
// source (tests/support/order_source_double.h: the consumer group's bookkeeping, the intents in
// the scripts' packed layout decoded by keyspace's own decoder) and writes them to a real SQLite
// file, the record, through a ServiceContext whose Redis connection is never started. What a
// batch leaves in the record and in the group: written once and acknowledged, a redelivery found
// duplicate, an unreadable intent or a double sale dead-lettered alone (the double sale's
// "refused" event in the record first), a failing database leaving its entries pending for
// redelivery. The same against a redis-server: tests/pipeline.

#include "service/order_consumer.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <exception>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "keyspace/embedded_scripts.h"
#include "store/sqlite_store.h"
#include "support/order_source_double.h"

namespace flashsale::service {
namespace {

namespace asio = boost::asio;
using base::ErrorCode;
using testing::InProcessOrderSource;
using Op = InProcessOrderSource::Op;
using Strings = std::vector<std::string>;

constexpr int64_t kNow = 1'800'000'000'000;
constexpr int64_t kClaimIdleMs = 1000;

core::Activity Sale(std::string id) {
  core::Activity activity;
  activity.id = std::move(id);
  activity.start_ms = kNow - 1000;
  activity.end_ms = kNow + 60'000;
  activity.per_user_limit = 3;
  activity.stock = 10;
  return activity;
}

template <typename T>
asio::awaitable<void> Into(asio::awaitable<T> task, std::optional<T>& out) {
  out.emplace(co_await std::move(task));
}

class OrderConsumerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("flashsale-order-consumer-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "flashsale.db").string();
    auto store = store::SqliteStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.error().ToString();
    store_ = std::move(*store);
    ASSERT_TRUE(store_->Migrate().ok());
    auto sale = store_->CreateActivity(Sale("sale"), kNow);
    ASSERT_TRUE(sale.ok()) << sale.error().ToString();
    registry_.Publish({*sale});
    settings_.key_namespace = "order-consumer-test";
    settings_.secret = "secret";
    connection_ = redis::Connection::Create(io_.get_executor(), redis::ConnectionOptions{});
    runner_ = std::make_unique<redis::ScriptRunner>(connection_, keyspace::Scripts());
    context_ = std::make_unique<ServiceContext>(settings_, *runner_, *store_, db_.get_executor(),
                                                registry_, clock_, random_);
  }
  void TearDown() override {
    if (blocker_) blocker_->set_value();
    context_.reset();
    db_.join();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  ConsumerOptions Options() const {
    ConsumerOptions options;
    options.name = "c1";
    options.claim_idle = std::chrono::milliseconds(kClaimIdleMs);
    options.claim_every = std::chrono::milliseconds(0);  // every pass claims what is idle
    options.max_deliveries = 2;
    options.backoff_max = std::chrono::milliseconds(100);
    return options;
  }

  // One pass of a consumer over the activities, run to its end: the intents it handled.
  int64_t Pass(OrderConsumer& consumer) {
    std::optional<int64_t> handled;
    asio::co_spawn(io_, Into(consumer.Pass(&stop_), handled), [](std::exception_ptr error) {
      if (error) std::rethrow_exception(error);
    });
    io_.restart();
    io_.run();
    return *handled;
  }

  int64_t OrdersInRecord() {
    auto counts = store_->CountOrders("sale");
    EXPECT_TRUE(counts.ok()) << counts.error().ToString();
    return counts.ok() ? counts->orders : -1;
  }

  // The record's events of the activity, as "order_id/state".
  Strings Events() {
    auto events = store_->EventsAfter(0, 1000);
    EXPECT_TRUE(events.ok()) << events.error().ToString();
    Strings out;
    if (events.ok()) {
      for (const auto& event : *events) out.push_back(event.order_id + "/" + event.state);
    }
    return out;
  }

  // Runs SQL on the record's file through a connection of its own (the store's is left as is).
  void Sql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    const std::string message = error != nullptr ? error : "";
    sqlite3_free(error);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << message;
  }

  // The database executor busy until TearDown (or Unblock): each call waits db_timeout and is
  // given up as unavailable.
  void BlockDatabase() {
    blocker_.emplace();
    asio::post(db_, [released = blocker_->get_future().share()] { released.wait(); });
  }

  std::filesystem::path dir_;
  std::string path_;
  asio::io_context io_;
  asio::thread_pool db_{1};
  std::optional<std::promise<void>> blocker_;
  std::unique_ptr<store::SqliteStore> store_;
  ServiceSettings settings_;
  base::ManualClock clock_{kNow};
  base::SeededRandom random_{5};
  ActivityRegistry registry_;
  std::shared_ptr<redis::Connection> connection_;
  std::unique_ptr<redis::ScriptRunner> runner_;
  std::unique_ptr<ServiceContext> context_;
  InProcessOrderSource source_;
  PipelineMetrics metrics_;
  bool stop_ = false;
};

TEST_F(OrderConsumerTest, ABatchIsWrittenToTheRecordOnceAndAcknowledged) {
  const std::string single = source_.Append("sale", {"o1|alice|2|1800|3||i1 i2"}, "1.5");
  const std::string batch =
      source_.Append("sale", {"o2|bob|1|1801|3||i3", "o3|carol|1|1802|3||i4"}, "1.6");
  OrderConsumer consumer(*context_, source_, Options(), metrics_);

  EXPECT_EQ(Pass(consumer), 3);
  EXPECT_EQ(OrdersInRecord(), 3);
  auto first = store_->GetOrder("o1");
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_EQ(first->user_id, "alice");
  EXPECT_EQ(first->quantity, 2);
  EXPECT_EQ(first->items, (Strings{"i1", "i2"}));
  EXPECT_EQ(first->stream_id, single);
  auto second_of_batch = store_->GetOrder("o3");
  ASSERT_TRUE(second_of_batch.ok());
  EXPECT_EQ(second_of_batch->stream_id, batch + "/1");
  EXPECT_EQ(Events(), (Strings{"o1/reserved", "o2/reserved", "o3/reserved"}));
  // The record's write mark follows the highest sequence read.
  auto marks = store_->WrittenSeqs();
  ASSERT_TRUE(marks.ok());
  ASSERT_EQ(marks->size(), 1u);
  EXPECT_EQ(marks->at(0).second, (core::WriteSeq{1, 6}));

  // Both entries acknowledged in one call, with no failure counts to forget (read as new).
  EXPECT_EQ(source_.Acknowledged("sale"), (Strings{single, batch}));
  EXPECT_TRUE(source_.Pending("sale").empty());
  ASSERT_EQ(source_.AckCalls("sale").size(), 1u);
  EXPECT_FALSE(source_.AckCalls("sale")[0].forget_failures);
  EXPECT_EQ(metrics_.persisted.value(), 3u);

  EXPECT_EQ(Pass(consumer), 0) << "nothing new";
  EXPECT_EQ(OrdersInRecord(), 3);
}

TEST_F(OrderConsumerTest, AnEntryWrittenButNotAcknowledgedComesAgainAndIsRecordedOnce) {
  const std::string a = source_.Append("sale", {"o1|alice|1|1800|3||i1"});
  const std::string b = source_.Append("sale", {"o2|bob|1|1801|3||i2"});
  OrderConsumer consumer(*context_, source_, Options(), metrics_);
  // Written, then the acknowledgement fails (Redis gone for a moment): the entries stay pending.
  source_.FailNext(Op::kAck, base::MakeError(ErrorCode::kUnavailable, "connection lost"));
  EXPECT_EQ(Pass(consumer), 2);
  EXPECT_EQ(OrdersInRecord(), 2);
  EXPECT_EQ(source_.Pending("sale"), (Strings{a, b}));

  // Claimed once idle long enough: found written, acknowledged, nothing written twice.
  source_.Idle("sale", kClaimIdleMs);
  EXPECT_EQ(Pass(consumer), 2);
  EXPECT_EQ(metrics_.claimed.value(), 2u);
  EXPECT_EQ(metrics_.duplicates.value(), 2u);
  EXPECT_EQ(metrics_.persisted.value(), 2u);
  EXPECT_EQ(OrdersInRecord(), 2);
  EXPECT_EQ(Events(), (Strings{"o1/reserved", "o2/reserved"}));
  EXPECT_EQ(source_.Acknowledged("sale"), (Strings{a, b}));
  EXPECT_EQ(source_.Deliveries("sale", a), 2);
  EXPECT_TRUE(source_.AckCalls("sale").back().forget_failures) << "claimed: may have failed before";
}

TEST_F(OrderConsumerTest, AnUnreadableIntentIsDeadLetteredAloneAfterItsLastDelivery) {
  // A batch entry whose second intent has quantity 0: no script writes that.
  const std::string entry =
      source_.Append("sale", {"o1|alice|1|1800|3||i1", "o2|bob|0|1800|3||i2"}, "1.1");
  OrderConsumer consumer(*context_, source_, Options(), metrics_);

  // First delivery: the readable intent is written; the entry counts one failure and stays.
  EXPECT_EQ(Pass(consumer), 2);
  EXPECT_TRUE(store_->GetOrder("o1").ok());
  EXPECT_EQ(source_.Failures("sale", entry), 1);
  EXPECT_EQ(source_.Pending("sale"), Strings{entry});
  EXPECT_TRUE(source_.DeadLetters("sale").empty());

  // Second (max_deliveries): the unreadable intent alone goes to the dead letters, with why.
  source_.Idle("sale", kClaimIdleMs);
  EXPECT_EQ(Pass(consumer), 2);
  const auto& dead = source_.DeadLetters("sale");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].entry_id, entry);
  EXPECT_EQ(dead[0].part, 1);
  EXPECT_EQ(dead[0].deliveries, 2);
  EXPECT_NE(dead[0].error.find("quantity"), std::string::npos) << dead[0].error;
  EXPECT_EQ(source_.Acknowledged("sale"), Strings{entry});
  EXPECT_EQ(metrics_.dead_letters.value(), 1u);
  EXPECT_EQ(metrics_.entry_failures.value(), 2u);
  EXPECT_EQ(metrics_.duplicates.value(), 1u) << "o1, written at the first delivery";
  EXPECT_EQ(store_->GetOrder("o2").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(OrdersInRecord(), 1);
}

TEST_F(OrderConsumerTest, ADoubleSaleTheRecordRefusesIsRecordedRefusedThenDeadLettered) {
  // Two live orders of one user, both sold under limit 1: the record's one-live-order key
  // refuses the second.
  const std::string first = source_.Append("sale", {"o1|alice|1|1800|1||i1"});
  const std::string second = source_.Append("sale", {"o2|alice|1|1801|1||i2"});
  ConsumerOptions options = Options();
  options.max_deliveries = 1;
  OrderConsumer consumer(*context_, source_, options, metrics_);

  EXPECT_EQ(Pass(consumer), 2);
  EXPECT_TRUE(store_->GetOrder("o1").ok());
  EXPECT_EQ(store_->GetOrder("o2").error().code, ErrorCode::kNotFound);
  // The refusal is in the record's events before the intent leaves the stream.
  EXPECT_EQ(Events(), (Strings{"o1/reserved", "o2/refused"}));
  const auto& dead = source_.DeadLetters("sale");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].order_id, "o2");
  EXPECT_NE(dead[0].error.find("per-user limit 1"), std::string::npos) << dead[0].error;
  // The dead letter acknowledges its entry, then the batch's acknowledgement the written one.
  EXPECT_EQ(source_.Acknowledged("sale"), (Strings{second, first}));
}

TEST_F(OrderConsumerTest, ABatchTheDatabaseFailsStaysUnacknowledgedAndIsWrittenWhenRedelivered) {
  const std::string a = source_.Append("sale", {"o1|alice|1|1800|3||i1"});
  const std::string b = source_.Append("sale", {"o2|bob|1|1801|3||i2"});
  OrderConsumer consumer(*context_, source_, Options(), metrics_);
  // The orders table gone from under the store: every insert fails (not unavailability: the
  // batch is tried one by one, each failure counted against its entry).
  Sql("ALTER TABLE orders RENAME TO orders_away");
  EXPECT_EQ(Pass(consumer), 2);
  EXPECT_EQ(source_.Pending("sale"), (Strings{a, b}));
  EXPECT_TRUE(source_.Acknowledged("sale").empty());
  EXPECT_EQ(source_.Failures("sale", a), 1);
  EXPECT_EQ(source_.Failures("sale", b), 1);
  EXPECT_EQ(metrics_.persisted.value(), 0u);
  EXPECT_TRUE(source_.DeadLetters("sale").empty());

  // The table back: redelivered, written, acknowledged, their failure counts forgotten.
  Sql("ALTER TABLE orders_away RENAME TO orders");
  source_.Idle("sale", kClaimIdleMs);
  EXPECT_EQ(Pass(consumer), 2);
  EXPECT_EQ(metrics_.persisted.value(), 2u);
  EXPECT_EQ(OrdersInRecord(), 2);
  EXPECT_EQ(source_.Acknowledged("sale"), (Strings{a, b}));
  EXPECT_EQ(source_.Failures("sale", a), 0);
  EXPECT_EQ(source_.Failures("sale", b), 0);
}

TEST_F(OrderConsumerTest, AnUnavailableDatabaseCountsNothingAgainstTheEntriesItHolds) {
  const std::string a = source_.Append("sale", {"o1|alice|1|1800|3||i1"});
  settings_.db_timeout = std::chrono::milliseconds(50);
  OrderConsumer consumer(*context_, source_, Options(), metrics_);
  BlockDatabase();
  // Held and retried while the database does not answer; the stream is then lost (its group
  // gone), so the batch is dropped: neither acknowledged nor failed.
  source_.FailNext(Op::kTouch, base::MakeError(ErrorCode::kRemote, base::ErrorDetail::kNoGroup,
                                               "NOGROUP the stream was lost"));
  EXPECT_EQ(Pass(consumer), 1);
  EXPECT_GE(metrics_.db_errors.value(), 1u);
  EXPECT_EQ(metrics_.entry_failures.value(), 0u);
  EXPECT_EQ(source_.Failures("sale", a), 0);
  EXPECT_EQ(source_.Pending("sale"), Strings{a});
  EXPECT_TRUE(source_.AckCalls("sale").empty());
  EXPECT_TRUE(source_.DeadLetters("sale").empty());
}

TEST_F(OrderConsumerTest, ADeletedActivityIsPassedOver) {
  source_.Append("sale", {"o1|alice|1|1800|3||i1"});
  source_.Delete("sale");
  OrderConsumer consumer(*context_, source_, Options(), metrics_);
  EXPECT_EQ(Pass(consumer), 0);
  EXPECT_EQ(OrdersInRecord(), 0);
}

}  // namespace
}  // namespace flashsale::service
