// Issue 15, point 3: refused intents held their unit for ever. Each way an order intent can be
// dead-lettered, on a real redis-server and a real record (SQLite, and MariaDB): the intent read
// by a consumer that cannot parse it, a record that refuses it as a second live order (or a
// lottery win as a second win of one draw), and a record that cannot hold it (every insert of
// the entry fails). Each time the unit goes back to stock (once), the buyer sees the order
// refused, and retrying the dead letter cannot sell the unit twice. And an order sold under a
// per-user limit that was lowered afterwards is recorded under the limit it was sold with.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>

#include "base/clock.h"
#include "base/random.h"
#include "keyspace/activity_scripts.h"
#include "service/admin.h"
#include "service/order_consumer.h"
#include "service/queries.h"
#include "store/mysql/url.h"
#include "store/store.h"
#include "support/mariadb_server.h"
#include "support/redis_helpers.h"
#include "support/redis_server.h"
#include "support/service_fixture.h"

namespace flashsale::service {
namespace {

namespace asio = boost::asio;
using testing::IoThread;
using testing::MariaDbServer;
using testing::RedisServer;
using namespace std::chrono_literals;

// One MariaDB server for the binary, started on first use (a run filtered to SQLite never
// starts one).
MariaDbServer& SharedMariaDb() {
  static std::string failure;
  static std::unique_ptr<MariaDbServer> server = []() -> std::unique_ptr<MariaDbServer> {
    try {
      return std::make_unique<MariaDbServer>();
    } catch (const std::exception& e) {
      failure = e.what();
      return nullptr;
    }
  }();
  if (!server) throw std::runtime_error("the shared MariaDB server did not start: " + failure);
  return *server;
}

enum class Backend { kSqlite, kMariaDb };

class DeadLetterTest : public testing::ServiceFixture<::testing::TestWithParam<Backend>> {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(
        StartService(GetParam() == Backend::kSqlite ? "" : SharedMariaDb().UniqueDatabase()));
  }

  // Runs `sql` on the record with its own connection (as an operator would).
  void ExecOnRecord(const std::string& sql) {
    if (GetParam() == Backend::kSqlite) {
      sqlite3* db = nullptr;
      ASSERT_EQ(sqlite3_open(sqlite_path().c_str(), &db), SQLITE_OK);
      char* error = nullptr;
      const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
      const std::string message = error != nullptr ? error : "";
      sqlite3_free(error);
      sqlite3_close(db);
      ASSERT_EQ(rc, SQLITE_OK) << message;
    } else {
      SharedMariaDb().Query(sql, store::ParseMySqlUrl(store_url_)->database);
    }
  }
  // The record refuses every order of `user`: a row the schema cannot hold.
  void RefuseOrdersOf(const std::string& user) {
    if (GetParam() == Backend::kSqlite) {
      ExecOnRecord(
          fmt::format("CREATE TRIGGER refuse_{0} BEFORE INSERT ON orders WHEN NEW.user_id = '{0}' "
                      "BEGIN SELECT RAISE(ABORT, 'the record cannot hold this order'); END",
                      user));
    } else {
      ExecOnRecord(
          fmt::format("CREATE TRIGGER refuse_{0} BEFORE INSERT ON orders FOR EACH ROW "
                      "IF NEW.user_id = '{0}' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = "
                      "'the record cannot hold this order'; END IF",
                      user));
    }
  }

  template <typename T>
  T Run(asio::awaitable<T> task) {
    return io_.Run(std::move(task));
  }

  void CreateSale(const std::string& id, int64_t stock, int64_t limit) {
    core::Activity activity;
    activity.id = id;
    activity.start_ms = 0;
    activity.end_ms = 4'000'000'000'000;
    activity.per_user_limit = limit;
    activity.stock = stock;
    auto created = Run(CreateActivity(*context_, activity));
    ASSERT_TRUE(created.ok()) << created.error().ToString();
  }

  core::Outcome Buy(const std::string& activity, const std::string& order, const std::string& user,
                    int64_t quantity = 1) {
    keyspace::ReserveRequest request{
        .order_id = order, .user_id = user, .quantity = quantity, .now_ms = 1000};
    auto r = Run(context_->activity_scripts().AsyncReserve(activity, request, asio::use_awaitable));
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    return r.ok() ? r->outcome : core::Outcome::kUnknownActivity;
  }

  ConsumerOptions Options() {
    ConsumerOptions options;
    options.name = "c1";
    options.batch = 50;
    options.claim_idle = 200ms;
    options.claim_every = 0ms;
    options.trim_every = 0ms;
    options.max_deliveries = 3;
    options.backoff_max = 200ms;
    return options;
  }

  // Passes (and waits for claim_idle, so failed entries come back) until `done` or a bound.
  void DrainUntil(OrderConsumer& consumer, const std::function<bool()>& done) {
    for (int round = 0; round < 20 && !done(); ++round) {
      for (int pass = 0; pass < 50; ++pass) {
        if (Run(consumer.Pass(&stop_)) == 0) break;
      }
      if (!done()) std::this_thread::sleep_for(250ms);
    }
  }
  void DrainUntilDeadLetters(OrderConsumer& consumer, uint64_t count) {
    DrainUntil(consumer, [&] { return metrics_.dead_letters.value() >= count; });
  }

  int64_t Remaining(const std::string& activity) {
    auto status = Run(context_->activity_scripts().AsyncStatus(activity, asio::use_awaitable));
    EXPECT_TRUE(status.ok() && status->found);
    return status.ok() ? status->remaining : -1;
  }
  // The state GET /api/v1/orders shows for the order ("" when it is not listed).
  std::string StateShown(const std::string& user, const std::string& order_id) {
    auto orders = Run(GetUserOrders(*context_, user));
    EXPECT_TRUE(orders.ok());
    if (!orders.ok()) return "";
    for (const auto& order : *orders) {
      if (order.order.order_id == order_id) return order.state;
    }
    return "";
  }
  std::string Buyers(const std::string& activity, const std::string& user) {
    return redis_->String({"HGET", Keys(activity).buyers(), user});
  }
  keyspace::ActivityKeys Keys(const std::string& activity) {
    return {settings_.key_namespace, activity};
  }

  // The record already holds a live order of `user` in the limit-1 sale `activity` (written by
  // another path, e.g. an order Redis lost and the lost-write repair applied again under another
  // id): a second one is a double sale the record refuses.
  void RecordLiveOrderOf(const std::string& activity, const std::string& user) {
    store::OrderRecord earlier{.order_id = activity + "-earlier",
                               .activity_id = activity,
                               .user_id = user,
                               .quantity = 1,
                               .single_unit = true,
                               .created_ms = 500,
                               .stream_id = "0-1"};
    ASSERT_TRUE(store_->InsertOrders(std::span(&earlier, 1), 600).ok());
  }

  // What every dead-lettered sale order must satisfy: its unit back in stock exactly once, the
  // buyer's count down, the order shown refused, and a retry of the dead letter refused.
  void ExpectReleasedAndRefused(const std::string& activity, const std::string& user,
                                const std::string& order_id, int64_t remaining_before_sale,
                                const std::string& buyers_after) {
    EXPECT_EQ(Remaining(activity), remaining_before_sale) << "the unit was not returned";
    EXPECT_EQ(Buyers(activity, user), buyers_after);
    EXPECT_EQ(StateShown(user, order_id), "refused");
    // Releasing again (the expiry or reconciliation path) returns nothing more.
    auto again =
        Run(context_->activity_scripts().AsyncRelease(activity, order_id, asio::use_awaitable));
    ASSERT_TRUE(again.ok()) << again.error().ToString();
    EXPECT_EQ(again->outcome, keyspace::ReleaseOutcome::kAlreadyReleased);
    EXPECT_EQ(Remaining(activity), remaining_before_sale);
    // Retrying the dead letter would write an order whose unit is back on sale: refused.
    auto dead = Run(ListDeadLetters(*context_, activity, 10));
    ASSERT_TRUE(dead.ok());
    ASSERT_EQ(dead->size(), 1u);
    auto retried = Run(RetryDeadLetter(*context_, activity, (*dead)[0].id));
    ASSERT_FALSE(retried.ok());
    EXPECT_EQ(retried.error().code, base::ErrorCode::kInvalidArgument)
        << retried.error().ToString();
    EXPECT_EQ(Run(ListDeadLetters(*context_, activity, 10))->size(), 1u) << "kept for the record";
  }

  PipelineMetrics metrics_;
  bool stop_ = false;
};

// The case: in a limit-2 sale u buys A and B, the limit drops to 1 before they are
// persisted. Both were sold under limit 2: the record takes both (no one-live-order key).
TEST_P(DeadLetterTest, AnOrderIsRecordedUnderTheLimitItWasSoldWith) {
  CreateSale("lowered", 10, 2);
  ASSERT_EQ(Buy("lowered", "lowered-a", "u"), core::Outcome::kReserved);
  ASSERT_EQ(Buy("lowered", "lowered-b", "u"), core::Outcome::kReserved);
  store::ActivityUpdate update;
  update.per_user_limit = 1;
  auto updated = Run(UpdateActivity(*context_, "lowered", update));
  ASSERT_TRUE(updated.ok()) << updated.error().ToString();
  ASSERT_EQ(context_->snapshot()->Find("lowered")->activity.per_user_limit, 1);

  OrderConsumer consumer(*context_, context_->order_stream(), Options(), metrics_);
  DrainUntil(consumer,
             [&] { return metrics_.persisted.value() >= 2 || metrics_.dead_letters.value() >= 1; });
  EXPECT_EQ(metrics_.dead_letters.value(), 0u);
  EXPECT_EQ(metrics_.persisted.value(), 2u);
  EXPECT_TRUE(store_->GetOrder("lowered-a").ok());
  EXPECT_TRUE(store_->GetOrder("lowered-b").ok());
  EXPECT_EQ(StateShown("u", "lowered-b"), "reserved");
  // A sale under the new limit is a single-unit order: a second one is refused by Redis.
  EXPECT_EQ(Buy("lowered", "lowered-c", "v"), core::Outcome::kReserved);
  EXPECT_EQ(Buy("lowered", "lowered-d", "v"), core::Outcome::kLimitReached);
}

// A second live order of a user in a limit-1 sale: the record refuses it (a double sale it must
// never hold). The intent is dead-lettered, and its unit is not kept from the other buyers.
TEST_P(DeadLetterTest, ASecondLiveOrderRefusedByTheRecordReturnsItsUnit) {
  CreateSale("conflict", 5, 1);
  ASSERT_NO_FATAL_FAILURE(RecordLiveOrderOf("conflict", "u"));
  ASSERT_EQ(Buy("conflict", "conflict-b", "u"), core::Outcome::kReserved);
  ASSERT_EQ(Remaining("conflict"), 4);

  OrderConsumer consumer(*context_, context_->order_stream(), Options(), metrics_);
  DrainUntilDeadLetters(consumer, 1);
  ASSERT_EQ(metrics_.dead_letters.value(), 1u);
  EXPECT_EQ(store_->GetOrder("conflict-b").error().code, base::ErrorCode::kNotFound);
  ExpectReleasedAndRefused("conflict", "u", "conflict-b", 5, "");
  // The record's outbox names the refusal once (issue 35): the earlier order's "reserved" event,
  // then the refused one's "refused", though it was delivered max_deliveries times.
  auto events = store_->EventsAfter(0, 100);
  ASSERT_TRUE(events.ok()) << events.error().ToString();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].event_id, "conflict-earlier/reserved");
  EXPECT_EQ((*events)[1].event_id, "conflict-b/refused");
  EXPECT_EQ((*events)[1].activity_id, "conflict");
  EXPECT_EQ((*events)[1].state, "refused");
}

// An intent this consumer cannot read (written by another version of the scripts, or damaged)
// is dead-lettered after max_deliveries; the order it names is released.
TEST_P(DeadLetterTest, AnUnreadableIntentReturnsItsUnit) {
  CreateSale("unreadable", 10, 2);
  ASSERT_EQ(Buy("unreadable", "unreadable-u", "u"), core::Outcome::kReserved);
  // Its intent, replaced by one whose quantity this consumer cannot read.
  auto entries = redis_->Command({"XRANGE", Keys("unreadable").stream(), "-", "+"});
  ASSERT_EQ(entries->elements, 1u);
  const std::string entry_id = entries->element[0]->element[0]->str;
  ASSERT_EQ(redis_->Integer({"XDEL", Keys("unreadable").stream(), entry_id}), 1);
  redis_->Command({"XADD", Keys("unreadable").stream(), "*", "order_id", "unreadable-u", "user_id",
                   "u", "quantity", "one", "items", "", "ts", "1000", "limit", "2"});
  ASSERT_EQ(Buy("unreadable", "unreadable-v", "v", 2), core::Outcome::kReserved);
  ASSERT_EQ(Remaining("unreadable"), 7);

  OrderConsumer consumer(*context_, context_->order_stream(), Options(), metrics_);
  DrainUntilDeadLetters(consumer, 1);
  ASSERT_EQ(metrics_.dead_letters.value(), 1u);
  EXPECT_TRUE(store_->GetOrder("unreadable-v").ok());
  ExpectReleasedAndRefused("unreadable", "u", "unreadable-u", 8, "");
  EXPECT_EQ(Buyers("unreadable", "v"), "2");
}

// A batch's intents are one stream entry. One the record refuses (a second live order in a
// limit-1 sale) is dead-lettered alone, its unit returned; the entry's others are written and
// keep their units, and the entry is acknowledged once the failed intent is out of it.
TEST_P(DeadLetterTest, ARefusedIntentOfABatchEntryIsDeadLetteredAloneTheOthersAreWritten) {
  CreateSale("batch", 10, 1);
  ASSERT_NO_FATAL_FAILURE(RecordLiveOrderOf("batch", "u"));
  const std::vector<keyspace::ReserveRequest> requests = {
      {.order_id = "batch-a", .user_id = "a", .quantity = 1, .now_ms = 1000},
      {.order_id = "batch-u", .user_id = "u", .quantity = 1, .now_ms = 1000},
      {.order_id = "batch-b", .user_id = "b", .quantity = 1, .now_ms = 1000}};
  auto reserved =
      Run(context_->activity_scripts().AsyncReserveBatch("batch", requests, asio::use_awaitable));
  ASSERT_TRUE(reserved.ok()) << reserved.error().ToString();
  for (const auto& one : *reserved) ASSERT_EQ(one->outcome, core::Outcome::kReserved);
  ASSERT_EQ(redis_->Integer({"XLEN", Keys("batch").stream()}), 1) << "one entry for the batch";
  ASSERT_EQ(Remaining("batch"), 7);

  OrderConsumer consumer(*context_, context_->order_stream(), Options(), metrics_);
  DrainUntilDeadLetters(consumer, 1);
  ASSERT_EQ(metrics_.dead_letters.value(), 1u);
  // The others: in the record (written at the first delivery, found duplicate at the next ones),
  // their units sold.
  // The record tells the entry's intents apart by their place in it (its duplicate check).
  auto a = store_->GetOrder("batch-a");
  auto b = store_->GetOrder("batch-b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(a->stream_id.empty());
  EXPECT_EQ(b->stream_id, a->stream_id + "/2");
  EXPECT_EQ(store_->GetOrder("batch-u").error().code, base::ErrorCode::kNotFound);
  EXPECT_EQ(StateShown("a", "batch-a"), "reserved");
  EXPECT_EQ(Buyers("batch", "a"), "1");
  EXPECT_EQ(Buyers("batch", "b"), "1");
  // The entry is acknowledged: nothing pending, nothing to redeliver.
  auto pending = redis_->Command({"XPENDING", Keys("batch").stream(), "persist"});
  EXPECT_EQ(pending->element[0]->integer, 0);
  // The dead letter is the refused intent alone; its unit is back (8 = 10 - a - b).
  ExpectReleasedAndRefused("batch", "u", "batch-u", 8, "");
  auto dead = Run(ListDeadLetters(*context_, "batch", 10));
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].Field("order_id"), "batch-u");
}

// An intent naming an order Redis never recorded (or recorded for another user) is
// dead-lettered and releases nothing.
TEST_P(DeadLetterTest, AnIntentWithoutItsOrderReleasesNothing) {
  CreateSale("stray", 5, 1);
  ASSERT_EQ(Buy("stray", "stray-a", "u"), core::Outcome::kReserved);
  // Same order id, another user; and an order id Redis has no record of. Both unreadable.
  redis_->Command({"XADD", Keys("stray").stream(), "*", "order_id", "stray-a", "user_id", "eve",
                   "quantity", "lots", "items", "", "ts", "1"});
  redis_->Command({"XADD", Keys("stray").stream(), "*", "order_id", "stray-none", "user_id", "eve",
                   "quantity", "lots", "items", "", "ts", "1"});
  OrderConsumer consumer(*context_, context_->order_stream(), Options(), metrics_);
  DrainUntilDeadLetters(consumer, 2);
  ASSERT_EQ(metrics_.dead_letters.value(), 2u);
  EXPECT_EQ(Remaining("stray"), 4);
  EXPECT_EQ(Buyers("stray", "u"), "1");
  EXPECT_TRUE(store_->GetOrder("stray-a").ok());
  EXPECT_EQ(StateShown("u", "stray-a"), "reserved");
}

// The record cannot hold the order (every insert of it fails, alone or in its batch, with an
// error that is not the database being unavailable): dead-lettered, its unit returned; the rest
// of its batch is written.
TEST_P(DeadLetterTest, AnOrderTheRecordCannotHoldReturnsItsUnit) {
  CreateSale("unholdable", 10, 1);
  RefuseOrdersOf("mallory");
  ASSERT_EQ(Buy("unholdable", "unholdable-a", "alice"), core::Outcome::kReserved);
  ASSERT_EQ(Buy("unholdable", "unholdable-m", "mallory"), core::Outcome::kReserved);
  ASSERT_EQ(Buy("unholdable", "unholdable-b", "bob"), core::Outcome::kReserved);

  OrderConsumer consumer(*context_, context_->order_stream(), Options(), metrics_);
  DrainUntilDeadLetters(consumer, 1);
  ASSERT_EQ(metrics_.dead_letters.value(), 1u);
  EXPECT_EQ(metrics_.persisted.value(), 2u);
  auto dead = Run(ListDeadLetters(*context_, "unholdable", 10));
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_NE((*dead)[0].Field("error").find("cannot hold"), std::string_view::npos)
      << (*dead)[0].Field("error");
  ExpectReleasedAndRefused("unholdable", "mallory", "unholdable-m", 8, "");
}

// Itemised stock: the very items go back to the list.
TEST_P(DeadLetterTest, ARefusedItemisedOrderReturnsItsItems) {
  core::Activity activity;
  activity.id = "seats";
  activity.start_ms = 0;
  activity.end_ms = 4'000'000'000'000;
  activity.per_user_limit = 2;
  activity.kind = core::StockKind::kItemised;
  activity.items = {"s1", "s2", "s3"};
  activity.stock = 3;
  auto created = Run(CreateActivity(*context_, activity));
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  RefuseOrdersOf("mallory");
  ASSERT_EQ(Buy("seats", "seats-m", "mallory", 2), core::Outcome::kReserved);
  OrderConsumer consumer(*context_, context_->order_stream(), Options(), metrics_);
  DrainUntilDeadLetters(consumer, 1);
  ASSERT_EQ(metrics_.dead_letters.value(), 1u);
  ExpectReleasedAndRefused("seats", "mallory", "seats-m", 3, "");
  auto items = redis_->Command({"LRANGE", Keys("seats").items(), "0", "-1"});
  std::set<std::string> listed;
  for (size_t i = 0; i < items->elements; ++i) listed.insert(items->element[i]->str);
  EXPECT_EQ(listed, (std::set<std::string>{"s1", "s2", "s3"}));
}

// A lottery win the record refuses (a second win under one draw number) gives its prize back;
// the draw itself stays counted (the user did draw).
TEST_P(DeadLetterTest, ARefusedLotteryWinReturnsItsPrize) {
  core::Activity lottery;
  lottery.id = "lot";
  lottery.start_ms = 0;
  lottery.end_ms = 4'000'000'000'000;
  lottery.per_user_limit = 3;
  lottery.lottery = core::Lottery{.prizes = {{"mug", "A mug", 1, 5}}, .no_prize_weight = 0};
  lottery.stock = lottery.lottery->TotalStock();
  ASSERT_TRUE(Run(CreateActivity(*context_, lottery)).ok());
  // The record holds a win of u's draw 1 already (e.g. restored by a rebuild that miscounted).
  store::OrderRecord earlier{.order_id = "lot-earlier",
                             .activity_id = "lot",
                             .user_id = "u",
                             .quantity = 1,
                             .items = {"mug"},
                             .draw_no = 1,
                             .created_ms = 500,
                             .stream_id = "0-1"};
  ASSERT_TRUE(store_->InsertOrders(std::span(&earlier, 1), 600).ok());
  const keyspace::DrawRequest request{
      .order_id = "lot-d1", .user_id = "u", .now_ms = 1000, .pick = 0};
  auto drawn = Run(context_->activity_scripts().AsyncDraw("lot", request, asio::use_awaitable));
  ASSERT_TRUE(drawn.ok()) << drawn.error().ToString();
  ASSERT_EQ(drawn->outcome, core::Outcome::kReserved);
  ASSERT_EQ(redis_->String({"HGET", Keys("lot").prizes(), "mug"}), "4");

  OrderConsumer consumer(*context_, context_->order_stream(), Options(), metrics_);
  DrainUntilDeadLetters(consumer, 1);
  ASSERT_EQ(metrics_.dead_letters.value(), 1u);
  EXPECT_EQ(redis_->String({"HGET", Keys("lot").prizes(), "mug"}), "5")
      << "the prize was not returned";
  EXPECT_EQ(Buyers("lot", "u"), "1");
  EXPECT_EQ(StateShown("u", "lot-d1"), "refused");
  auto dead = Run(ListDeadLetters(*context_, "lot", 10));
  ASSERT_EQ(dead->size(), 1u);
  auto retried = Run(RetryDeadLetter(*context_, "lot", (*dead)[0].id));
  ASSERT_FALSE(retried.ok());
  EXPECT_EQ(retried.error().code, base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(redis_->String({"HGET", Keys("lot").prizes(), "mug"}), "5");
}

INSTANTIATE_TEST_SUITE_P(Backends, DeadLetterTest,
                         ::testing::Values(Backend::kSqlite, Backend::kMariaDb),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kSqlite ? "sqlite" : "mariadb";
                         });

}  // namespace
}  // namespace flashsale::service
