// The order pipeline in-process, on a real redis-server and a real SQLite file: every intent
// becomes exactly one row, redeliveries are found duplicate, a consumer that died after the
// commit loses nothing, entries that keep failing reach the dead-letter stream, a database that
// is unavailable for a while holds the batch instead of dead-lettering it, and trimming keeps
// everything not yet persisted.

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/draw_queue.h"
#include "redis/url.h"
#include "service/admin.h"
#include "service/draw.h"
#include "service/draw_queue_consumer.h"
#include "service/jobs.h"
#include "service/order_consumer.h"
#include "service/pipeline.h"
#include "service/queries.h"
#include "service/reconcile.h"
#include "service/redis_watch.h"
#include "store/sqlite_store.h"
#include "support/redis_helpers.h"
#include "support/redis_server.h"
#include "support/service_fixture.h"

namespace flashsale::service {
namespace {

namespace asio = boost::asio;
using testing::IoThread;
using testing::RedisServer;
using namespace std::chrono_literals;

class PipelineTest : public testing::ServiceFixture<> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartService()); }

  // An open activity in the database, the registry and Redis.
  void CreateActivity(const std::string& id, int64_t stock, int64_t limit = 1) {
    core::Activity activity;
    activity.id = id;
    activity.start_ms = 0;
    activity.end_ms = 4'000'000'000'000;
    activity.per_user_limit = limit;
    activity.stock = stock;
    auto created = io_.Run(CreateActivityAsync(activity));
    ASSERT_TRUE(created.ok()) << created.error().ToString();
  }
  asio::awaitable<base::Result<ActivityState>> CreateActivityAsync(core::Activity activity) {
    co_return co_await service::CreateActivity(*context_, activity);
  }

  // Reserves units for users u0..u(n-1); returns the order ids.
  std::vector<std::string> Reserve(const std::string& activity, int n, int64_t quantity = 1,
                                   int first = 0) {
    std::vector<std::string> orders;
    for (int i = first; i < first + n; ++i) {
      const std::string order = activity + "-o" + std::to_string(i);
      const std::string user = "u" + std::to_string(i);
      keyspace::ReserveRequest request{
          .order_id = order, .user_id = user, .quantity = quantity, .now_ms = 1000 + i};
      auto r = io_.Run(
          context_->activity_scripts().AsyncReserve(activity, request, asio::use_awaitable));
      EXPECT_TRUE(r.ok() && r->outcome == core::Outcome::kReserved);
      orders.push_back(order);
    }
    return orders;
  }

  ConsumerOptions Options(std::string name) {
    ConsumerOptions options;
    options.name = std::move(name);
    options.batch = 50;
    options.claim_idle = 200ms;
    options.claim_every = 0ms;
    options.trim_every = 0ms;
    options.max_deliveries = 3;
    options.backoff_max = 200ms;
    return options;
  }

  // Passes until a pass handles nothing (bounded).
  int64_t Drain(OrderConsumer& consumer, int max_passes = 100) {
    int64_t total = 0;
    for (int i = 0; i < max_passes; ++i) {
      const int64_t handled = io_.Run(consumer.Pass(&stop_));
      total += handled;
      if (handled == 0) break;
    }
    return total;
  }

  std::set<std::string> OrderIdsInDb(const std::string& activity) {
    std::set<std::string> ids;
    sqlite3* db = nullptr;
    sqlite3_open_v2(sqlite_path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "SELECT order_id FROM orders WHERE activity_id = ?", -1, &stmt, nullptr);
    sqlite3_bind_text(stmt, 1, activity.c_str(), -1, SQLITE_TRANSIENT);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      ids.insert(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return ids;
  }

  keyspace::ActivityKeys Keys(const std::string& activity) {
    return {settings_.key_namespace, activity};
  }

  PipelineMetrics metrics_;
  bool stop_ = false;
};

TEST_F(PipelineTest, EveryIntentBecomesExactlyOneRow) {
  CreateActivity("sale", 300);
  const auto orders = Reserve("sale", 250);
  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  EXPECT_EQ(Drain(consumer), 250);
  EXPECT_EQ(OrderIdsInDb("sale"), std::set<std::string>(orders.begin(), orders.end()));
  EXPECT_EQ(metrics_.persisted.value(), 250u);
  auto info = io_.Run(context_->order_stream().Info("sale"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->pending, 0);
  EXPECT_EQ(info->lag, 0);
  // Rows carry the intent: user, quantity, time, the stream entry.
  auto row = store_->GetOrder(orders[7]);
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(row->user_id, "u7");
  EXPECT_EQ(row->created_ms, 1007);
  EXPECT_TRUE(row->single_unit);
  EXPECT_FALSE(row->stream_id.empty());
}

// Each intent carries the write sequence of the call that wrote it (field s): the record keeps
// the highest it persisted (issue "Lost writes caught from the data"), which is the sequence
// Redis holds once every intent is in.
TEST_F(PipelineTest, TheRecordKeepsTheHighestWriteSequenceItPersisted) {
  CreateActivity("marked", 50);
  Reserve("marked", 20);
  auto status = io_.Run(context_->activity_scripts().AsyncStatus("marked", asio::use_awaitable));
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->written, (core::WriteSeq{0, 20})) << "one call each";
  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  EXPECT_EQ(Drain(consumer), 20);
  auto marks = store_->WrittenSeqs();
  ASSERT_TRUE(marks.ok()) << marks.error().ToString();
  ASSERT_EQ(marks->size(), 1u);
  EXPECT_EQ(marks->front().first, "marked");
  EXPECT_EQ(marks->front().second, status->written);
}

// An intent in the shape versions before the packed field wrote (six named fields, left on the
// stream across an upgrade) is found among the user's pending orders and persisted as it says:
// its user, time and the limit it was sold under (3: not a single-unit order, though the
// activity's limit is 1 now).
TEST_F(PipelineTest, AnIntentInTheOlderSixFieldShapeIsReadAsItSays) {
  CreateActivity("upgrade", 10);
  const auto orders = Reserve("upgrade", 1);
  auto entries = redis_->Command({"XRANGE", Keys("upgrade").stream(), "-", "+"});
  ASSERT_EQ(entries->elements, 1u);
  ASSERT_EQ(
      redis_->Integer({"XDEL", Keys("upgrade").stream(), entries->element[0]->element[0]->str}), 1);
  redis_->Command({"XADD", Keys("upgrade").stream(), "*", "order_id", orders[0], "user_id", "u0",
                   "quantity", "1", "items", "", "ts", "1000", "limit", "3"});

  const keyspace::PersistedOrders none;
  auto pending = io_.Run(
      context_->activity_scripts().AsyncUserOrders("upgrade", "u0", none, asio::use_awaitable));
  ASSERT_TRUE(pending.ok()) << pending.error().ToString();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].order_id, orders[0]);

  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  EXPECT_EQ(Drain(consumer), 1);
  auto row = store_->GetOrder(orders[0]);
  ASSERT_TRUE(row.ok()) << row.error().ToString();
  EXPECT_EQ(row->user_id, "u0");
  EXPECT_EQ(row->created_ms, 1000);
  EXPECT_FALSE(row->single_unit);
}

// A consumer still holding an activity another process just deleted does not make its stream
// again (a key nothing would delete): ensuring the group of an activity whose meta is gone
// creates nothing and says so.
TEST_F(PipelineTest, TheGroupOfADeletedActivityIsNotMadeAgain) {
  CreateActivity("gone", 10);
  ASSERT_TRUE(io_.Run(context_->order_stream().EnsureGroup("gone")).ok());
  ASSERT_EQ(redis_->Integer({"DEL", Keys("gone").meta(), Keys("gone").stream()}), 2);
  auto again = io_.Run(context_->order_stream().EnsureGroup("gone"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, base::ErrorCode::kNotFound);
  EXPECT_EQ(redis_->Integer({"EXISTS", Keys("gone").stream()}), 0);
}

// The fence of the lost-write repair: a batch a consumer read under the record's epoch E, written
// after a repair advanced the fence to E + 1 (Redis restarted or failed over meanwhile), is
// refused inside the insert transaction: nothing written, nothing acknowledged, the entries left
// pending. Once this process has confirmed the new epoch they are claimed and written.
TEST_F(PipelineTest, ABatchReadBeforeARepairIsFencedNeverWrittenAndLeftPending) {
  CreateActivity("fence", 10);
  RedisWatch watch(clock_);
  auto epoch = store_->AdvanceFence();
  ASSERT_TRUE(epoch.ok());
  watch.OnServer("run-1");
  watch.Confirm("run-1", *epoch, {});
  ASSERT_FALSE(watch.frozen());
  settings_.redis_watch = &watch;
  const auto orders = Reserve("fence", 3);
  // A repair elsewhere advances the record's fence; this process has not seen the event yet.
  ASSERT_TRUE(store_->AdvanceFence().ok());
  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  EXPECT_EQ(io_.Run(consumer.Pass(&stop_)), 3);
  EXPECT_EQ(metrics_.fenced.value(), 1u);
  EXPECT_EQ(metrics_.persisted.value(), 0u);
  EXPECT_TRUE(OrderIdsInDb("fence").empty());
  auto pending = redis_->Command({"XPENDING", Keys("fence").stream(), "persist"});
  ASSERT_EQ(pending->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(pending->element[0]->integer, 3);

  // Frozen (another server seen): the consumer reads nothing at all.
  watch.OnServer("run-2");
  ASSERT_TRUE(watch.frozen());
  EXPECT_EQ(io_.Run(consumer.Pass(&stop_)), 0);
  // The repair's epoch confirmed: the pending entries are claimed and written, once.
  watch.Confirm("run-2", *epoch + 1, {});
  std::this_thread::sleep_for(300ms);  // past claim_idle (200 ms): a bound, not an assertion
  Drain(consumer);
  EXPECT_EQ(OrderIdsInDb("fence"), std::set<std::string>(orders.begin(), orders.end()));
  settings_.redis_watch = nullptr;
}

// Issue 33 point 4: a stream Redis lost from under a consumer answers NOGROUP, which reaches the
// consumer as the error's detail: its next pass makes the group again and reads what came since.
TEST_F(PipelineTest, AStreamLostFromUnderTheConsumerGetsItsGroupAgain) {
  CreateActivity("regroup", 10);
  Reserve("regroup", 2);
  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  EXPECT_EQ(Drain(consumer), 2);
  ASSERT_EQ(redis_->Integer({"DEL", Keys("regroup").stream()}), 1);
  Reserve("regroup", 3, 1, /*first=*/2);  // XADD makes the stream again, without the group
  auto read = io_.Run(context_->order_stream().ReadNew("regroup", "c1", 10));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().detail, base::ErrorDetail::kNoGroup) << read.error().ToString();
  EXPECT_EQ(io_.Run(consumer.Pass(&stop_)), 0) << "the pass that finds the group gone";
  EXPECT_EQ(Drain(consumer), 3);
  EXPECT_EQ(OrderIdsInDb("regroup").size(), 5u);
}

// Issue 33 point 4: a strict queue's consumer that lost its lock has its late draw refused by the
// script (FENCED, the error's detail): counted, its lock forgotten, the ticket left pending for the
// new holder, which draws it.
TEST_F(PipelineTest, AStrictQueueConsumerThatLostItsLockHasItsLateDrawFenced) {
  core::Activity lottery;
  lottery.id = "fifo";
  lottery.start_ms = 0;
  lottery.end_ms = 4'000'000'000'000;
  lottery.per_user_limit = 1;
  lottery.lottery = core::Lottery{.prizes = {{"a", "A", 1, 10}},
                                  .no_prize_weight = 0,
                                  .admission = core::Admission::kFifo,
                                  .queue_capacity = 100};
  lottery.stock = lottery.lottery->TotalStock();
  auto created = io_.Run(CreateActivityAsync(lottery));
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  keyspace::DrawQueue queue(*runner_, settings_.key_namespace);
  const auto enqueue = [&](const std::string& user) {
    const std::string ticket = "t-" + user;
    const keyspace::EnqueueRequest request{.ticket_id = ticket,
                                           .user_id = user,
                                           .now_ms = clock_.NowMs(),
                                           .capacity = 100,
                                           .ticket_ttl_ms = 3'600'000,
                                           .user_token = user};
    auto queued = io_.Run(queue.Enqueue("fifo", request));
    ASSERT_TRUE(queued.ok()) << queued.error().ToString();
    ASSERT_EQ(queued->outcome, keyspace::EnqueueOutcome::kQueued);
  };
  // Leases that are not extended during the test: the lock moves only when it is deleted.
  const QueueConsumerOptions options{
      .name = "a", .lock_ttl = 3'600'000ms, .lock_extend = 3'600'000ms};
  QueueMetrics metrics_a;
  QueueMetrics metrics_b;
  DrawQueueConsumer a(*context_, options, metrics_a);
  QueueConsumerOptions b_options = options;
  b_options.name = "b";
  DrawQueueConsumer b(*context_, b_options, metrics_b);

  enqueue("u1");
  EXPECT_EQ(io_.Run(a.Pass(&stop_)), 1) << "a takes the lock (fence 1) and draws";
  // a's lease lapses (deleted here); b takes the lock with fence 2, with nothing to draw yet.
  ASSERT_EQ(redis_->Integer({"DEL", Keys("fifo").queue_lock()}), 1);
  EXPECT_EQ(io_.Run(b.Pass(&stop_)), 0);
  enqueue("u2");
  EXPECT_EQ(io_.Run(a.Pass(&stop_)), 0) << "a still believes it holds the lock";
  EXPECT_EQ(metrics_a.fenced.value(), 1u);
  EXPECT_EQ(io_.Run(b.Pass(&stop_)), 1) << "the new holder draws the ticket a left pending";
  EXPECT_EQ(metrics_b.fenced.value(), 0u);
}

// The watch: frozen at startup until confirmed; another server freezes it; the endpoint going back
// to the server repaired before stays frozen until that server's marker confirms it again.
TEST_F(PipelineTest, TheWatchFreezesOnAnotherServerAndOnlyItsRepairUnfreezes) {
  RedisWatch watch(clock_);
  EXPECT_TRUE(watch.frozen());
  EXPECT_TRUE(watch.OnServer("r1"));  // startup: queued commands go out (nothing sells)
  watch.Confirm("r1", 1, {});
  EXPECT_FALSE(watch.frozen());
  EXPECT_TRUE(watch.OnServer("r1"));  // a reconnect to the same server: nothing happens
  EXPECT_FALSE(watch.frozen());
  EXPECT_FALSE(watch.OnServer("r2"));  // another server: frozen, queued commands not sent
  EXPECT_TRUE(watch.frozen());
  watch.Confirm("r1", 1, {});  // a confirmation for another server frees nothing
  EXPECT_TRUE(watch.frozen());
  EXPECT_FALSE(watch.OnServer("r1"));  // back to r1 while frozen: still frozen
  EXPECT_TRUE(watch.frozen());
  watch.Confirm("r1", 2, {});
  EXPECT_FALSE(watch.frozen());
  EXPECT_EQ(watch.epoch(), 2);
  EXPECT_EQ(watch.Events().size(), 2u);
}

// On a Redis Cluster: one run_id per node. The nodes found at startup and a reconnect to any of
// them change nothing once repaired; a node not seen before (a replica promoted in a failed
// primary's place) or a node's new run_id freezes the process until that run_id is confirmed.
TEST_F(PipelineTest, TheWatchFollowsOneRunIdPerClusterNode) {
  RedisWatch watch(clock_);
  EXPECT_TRUE(watch.OnServer("127.0.0.1:7001", "ra"));
  EXPECT_TRUE(watch.OnServer("127.0.0.1:7002", "rb"));
  EXPECT_EQ(watch.Pending(), (std::vector<std::string>{"ra", "rb"}));
  watch.Confirm(std::vector<std::string>{"ra"}, 1, {});
  EXPECT_TRUE(watch.frozen()) << "one node still to be repaired";
  watch.Confirm(std::vector<std::string>{"rb"}, 1, {});
  EXPECT_FALSE(watch.frozen());
  EXPECT_TRUE(watch.OnServer("127.0.0.1:7001", "ra"));  // reconnects: nothing happens
  EXPECT_TRUE(watch.OnServer("127.0.0.1:7002", "rb"));
  EXPECT_FALSE(watch.frozen());

  EXPECT_FALSE(watch.OnServer("127.0.0.1:7004", "rd"));  // the promoted replica
  EXPECT_TRUE(watch.frozen());
  EXPECT_EQ(watch.Pending(), (std::vector<std::string>{"rd"}));
  EXPECT_EQ(watch.Seen(), (std::vector<std::string>{"ra", "rb", "rd"}));
  watch.Confirm(std::vector<std::string>{"ra", "rb"}, 2, {});  // frees nothing pending
  EXPECT_TRUE(watch.frozen());
  watch.Confirm(std::vector<std::string>{"rd"}, 2, {});
  EXPECT_FALSE(watch.frozen());
  EXPECT_EQ(watch.epoch(), 2);
  EXPECT_FALSE(watch.OnServer("127.0.0.1:7002", "rb2"));  // a primary restarted in place
  EXPECT_TRUE(watch.frozen());
  watch.Confirm(std::vector<std::string>{"rb2"}, 3, {});
  EXPECT_FALSE(watch.frozen());
  const std::vector<RedisEvent> events = watch.Events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_TRUE(events[0].startup);
  EXPECT_FALSE(events[1].startup);
  EXPECT_EQ(events[1].node, "127.0.0.1:7004");
  EXPECT_EQ(events[1].from_run_id, "");
  EXPECT_EQ(events[2].from_run_id, "rb");
  EXPECT_EQ(events[2].to_run_id, "rb2");
  EXPECT_GT(events[2].repaired_ms, 0);

  // Acknowledged orders: checked once per confirmed event; the ones found nowhere are counted on
  // the event and forgotten.
  EXPECT_TRUE(watch.TakeLostCheckDue());
  EXPECT_FALSE(watch.TakeLostCheckDue());
  watch.Acknowledged("a", "o1");
  watch.Acknowledged("a", "o2");
  watch.Acknowledged("b", "o3");
  EXPECT_EQ(watch.AcknowledgedOrders().at("a"), (std::vector<std::string>{"o1", "o2"}));
  watch.CountAcknowledgedLost({"o2"});
  EXPECT_EQ(watch.Events().back().summary.acknowledged_lost, 1);
  EXPECT_EQ(watch.AcknowledgedOrders().at("a"), (std::vector<std::string>{"o1"}));
  std::string metrics;
  watch.AppendPrometheus(metrics);
  EXPECT_NE(metrics.find("flashsale_repair_acknowledged_lost_total 1"), std::string::npos);
}

TEST_F(PipelineTest, ConsumerDeadAfterCommitLosesNothingAndDoublesNothing) {
  CreateActivity("crash", 100);
  const auto orders = Reserve("crash", 60);
  // A consumer reads the entries, commits them to the database, and dies before XACK.
  ASSERT_TRUE(io_.Run(context_->order_stream().EnsureGroup("crash")).ok());
  auto taken = io_.Run(context_->order_stream().ReadNew("crash", "dead-consumer", 100));
  ASSERT_TRUE(taken.ok());
  ASSERT_EQ(taken->size(), 60u);
  const store::ActivityRecord* record = context_->snapshot()->Find("crash");
  ASSERT_NE(record, nullptr);
  std::vector<store::OrderRecord> rows;
  for (const auto& intent : *taken) rows.push_back(*OrderRecordOf(intent, *record));
  rows.resize(40);  // it had committed only part of its work
  ASSERT_TRUE(store_->InsertOrders(rows, 5).ok());

  // A live consumer claims them once they are idle long enough.
  std::this_thread::sleep_for(250ms);
  OrderConsumer consumer(*context_, context_->order_stream(), Options("alive"), metrics_);
  EXPECT_EQ(Drain(consumer), 60);
  EXPECT_EQ(OrderIdsInDb("crash"), std::set<std::string>(orders.begin(), orders.end()));
  EXPECT_EQ(metrics_.duplicates.value(), 40u);
  EXPECT_EQ(metrics_.persisted.value(), 20u);
  EXPECT_EQ(metrics_.claimed.value(), 60u);
  EXPECT_EQ(io_.Run(context_->order_stream().Info("crash"))->pending, 0);
}

TEST_F(PipelineTest, APoisonEntryReachesTheDeadLetterStreamAfterMaxDeliveries) {
  CreateActivity("poison", 10);
  Reserve("poison", 3);
  // An intent no consumer can read (quantity is not a number).
  redis_->Command({"XADD", Keys("poison").stream(), "*", "order_id", "bad-1", "user_id", "eve",
                   "quantity", "lots", "items", "", "ts", "1"});
  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  for (int round = 0; round < 10 && metrics_.dead_letters.value() == 0; ++round) {
    Drain(consumer);
    std::this_thread::sleep_for(250ms);  // claim_idle passes: the entry is delivered again
  }
  EXPECT_EQ(metrics_.dead_letters.value(), 1u);
  EXPECT_EQ(metrics_.entry_failures.value(), 3u);  // max_deliveries
  EXPECT_EQ(OrderIdsInDb("poison").size(), 3u);
  auto dead = io_.Run(ListDeadLetters(*context_, "poison", 10));
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].Field("order_id"), "bad-1");
  EXPECT_EQ((*dead)[0].Field("deliveries"), "3");
  EXPECT_NE((*dead)[0].Field("error").find("quantity"), std::string_view::npos);
  EXPECT_EQ(io_.Run(context_->order_stream().Info("poison"))->pending, 0);

  // Retrying puts it back on the stream; it fails again and comes back to the dead letters.
  auto retried = io_.Run(RetryDeadLetter(*context_, "poison", (*dead)[0].id));
  ASSERT_TRUE(retried.ok()) << retried.error().ToString();
  EXPECT_EQ(io_.Run(ListDeadLetters(*context_, "poison", 10))->size(), 0u);
  EXPECT_EQ(io_.Run(RetryDeadLetter(*context_, "poison", (*dead)[0].id)).error().code,
            base::ErrorCode::kNotFound);
}

TEST_F(PipelineTest, ASecondLiveOrderOfALimitOneUserIsRefusedAndSeen) {
  CreateActivity("twice", 10);
  Reserve("twice", 1);  // u0's order
  // An intent for the same user with another order id: a double sale the record must refuse.
  redis_->Command({"XADD", Keys("twice").stream(), "*", "order_id", "second", "user_id", "u0",
                   "quantity", "1", "items", "", "ts", "2"});
  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  for (int round = 0; round < 10 && metrics_.dead_letters.value() == 0; ++round) {
    Drain(consumer);
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_EQ(OrderIdsInDb("twice"), (std::set<std::string>{"twice-o0"}));
  auto dead = io_.Run(ListDeadLetters(*context_, "twice", 10));
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_NE((*dead)[0].Field("error").find("already has a live order"), std::string_view::npos);
}

TEST_F(PipelineTest, AnUnavailableDatabaseHoldsTheBatchAndDrainsLater) {
  CreateActivity("busy", 50);
  const auto orders = Reserve("busy", 30);
  // Another process holds the database's write lock: writes fail (busy) until it lets go.
  sqlite3* locker = nullptr;
  ASSERT_EQ(sqlite3_open(sqlite_path().c_str(), &locker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(locker, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::thread release([&] {
    std::this_thread::sleep_for(6s);  // longer than the store's 5 s busy timeout
    sqlite3_exec(locker, "COMMIT", nullptr, nullptr, nullptr);
  });
  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  EXPECT_EQ(Drain(consumer), 30);
  release.join();
  sqlite3_close(locker);
  EXPECT_GE(metrics_.db_errors.value(), 1u);
  EXPECT_EQ(metrics_.dead_letters.value(), 0u);
  EXPECT_EQ(metrics_.entry_failures.value(), 0u);
  EXPECT_EQ(OrderIdsInDb("busy"), std::set<std::string>(orders.begin(), orders.end()));
}

// A backlog is read in growing batches (up to max_batch), each written in one transaction, and
// every intent still becomes exactly one row.
TEST_F(PipelineTest, ABacklogIsReadInGrowingBatchesAndEveryIntentWrittenOnce) {
  CreateActivity("backlog", 1000);
  const auto orders = Reserve("backlog", 700);
  ConsumerOptions options = Options("grow");  // batch 50
  options.max_batch = 200;
  OrderConsumer consumer(*context_, context_->order_stream(), options, metrics_);
  std::vector<int64_t> passes;
  for (int i = 0; i < 100; ++i) {
    const int64_t handled = io_.Run(consumer.Pass(&stop_));
    if (handled == 0) break;
    passes.push_back(handled);
  }
  // 50, 100, 200, 200, 150 (not full: the next read asks for 50 again).
  EXPECT_EQ(passes, (std::vector<int64_t>{50, 100, 200, 200, 150}));
  EXPECT_EQ(OrderIdsInDb("backlog"), std::set<std::string>(orders.begin(), orders.end()));
  EXPECT_EQ(metrics_.persisted.value(), 700u);
}

// The nice value of each thread of this process, from /proc (field 19 of a task's stat).
std::vector<int> ThreadNiceValues() {
  std::vector<int> values;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    // After the name: state is field 3 of the line, nice is field 19.
    for (int i = 3; i <= 19 && (fields >> field); ++i) {
    }
    values.push_back(std::stoi(field));
  }
  return values;
}

// A pipeline at a lower priority (ConsumerOptions::nice): its consumer's thread has that nice
// value, the jobs' thread and the shared database executor (where the inserts run, holding the
// store's lock at the process's priority) are left alone, and every intent still becomes exactly
// one row.
TEST_F(PipelineTest, ALowPriorityPipelinePersistsEveryIntentFromItsOwnThread) {
  CreateActivity("calm", 500);
  const auto orders = Reserve("calm", 400);
  PipelineDeps deps;
  auto endpoint = redis::ParseUrl(redis_->unix_url());
  ASSERT_TRUE(endpoint.ok());
  deps.redis.endpoint = *endpoint;
  deps.store = store_.get();
  deps.db_executor = db_.get_executor();
  deps.registry = &registry_;
  deps.settings = &settings_;
  deps.clock = &clock_;
  deps.random = [] { return std::make_unique<base::SeededRandom>(5); };
  deps.metrics = &metrics_;
  ConsumerOptions options = Options("low");
  options.nice = 7;
  std::promise<int> shared_nice;
  asio::post(db_, [&] { shared_nice.set_value(::getpriority(PRIO_PROCESS, 0)); });
  const int before = shared_nice.get_future().get();
  OrderPipeline pipeline(deps, options, 1, false, 1s);
  ASSERT_TRUE(pipeline.Start().ok());
  // Bounded: 60 s for 400 orders.
  for (int i = 0; i < 600 && OrderIdsInDb("calm").size() < orders.size(); ++i) {
    std::this_thread::sleep_for(100ms);
  }
  const std::vector<int> nice = ThreadNiceValues();
  EXPECT_EQ(std::count(nice.begin(), nice.end(), 7), 1) << "the order consumer's thread";
  pipeline.Stop();
  EXPECT_EQ(OrderIdsInDb("calm"), std::set<std::string>(orders.begin(), orders.end()));
  EXPECT_EQ(metrics_.persisted.value(), orders.size());
  EXPECT_EQ(metrics_.duplicates.value(), 0u);
  // The executor the HTTP threads share kept its priority.
  std::promise<int> after;
  asio::post(db_, [&] { after.set_value(::getpriority(PRIO_PROCESS, 0)); });
  EXPECT_EQ(after.get_future().get(), before);
}

// A burst (ConsumerOptions::burst_rate, service/burst_gate.h): while reservations arrive at
// 2,000 a second, a consumer deferring from 200 a second leaves the stream unread after its first
// look; once they stop, it persists every intent, each exactly once.
TEST_F(PipelineTest, AConsumerLeavesABurstUnreadAndPersistsItOnceItEnds) {
  CreateActivity("burst", 100000);
  ConsumerOptions options = Options("bursty");
  options.trim_every = 1h;
  options.burst_rate = 200;
  options.burst_defer = 1h;  // not reached here
  OrderConsumer consumer(*context_, context_->order_stream(), options, metrics_);
  std::vector<std::string> orders;
  // 100 reservations, then a pass, every 50 ms for 1.5 s.
  size_t persisted_early = 0;
  for (int i = 0; i < 30; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto more = Reserve("burst", 100, 1, i * 100);
    orders.insert(orders.end(), more.begin(), more.end());
    io_.Run(consumer.Pass(&stop_));
    if (i == 10) persisted_early = OrderIdsInDb("burst").size();
    std::this_thread::sleep_until(start + 50ms);
  }
  // Read only before the first 250 ms window had measured the burst, nothing after.
  EXPECT_LT(persisted_early, 1100u);
  EXPECT_EQ(OrderIdsInDb("burst").size(), persisted_early);
  // Quiet now: the next window sees no growth, and the consumer reads again.
  for (int i = 0; i < 200 && OrderIdsInDb("burst").size() < orders.size(); ++i) {
    io_.Run(consumer.Pass(&stop_));
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(OrderIdsInDb("burst"), std::set<std::string>(orders.begin(), orders.end()));
  EXPECT_EQ(metrics_.persisted.value(), orders.size());
  EXPECT_EQ(metrics_.duplicates.value(), 0u);
}

// A burst longer than burst_defer is persisted while it goes on: after each deferral at its
// longest the consumer reads until it has caught up.
TEST_F(PipelineTest, ABurstLongerThanTheLongestDeferralIsPersistedWhileItLasts) {
  CreateActivity("long", 100000);
  ConsumerOptions options = Options("patient");
  options.trim_every = 1h;
  options.burst_rate = 200;
  options.burst_defer = 400ms;
  OrderConsumer consumer(*context_, context_->order_stream(), options, metrics_);
  std::vector<std::string> orders;
  for (int i = 0; i < 40; ++i) {  // 2 s of 2,000 a second
    const auto start = std::chrono::steady_clock::now();
    const auto more = Reserve("long", 100, 1, i * 100);
    orders.insert(orders.end(), more.begin(), more.end());
    io_.Run(consumer.Pass(&stop_));
    std::this_thread::sleep_until(start + 50ms);
  }
  EXPECT_GT(OrderIdsInDb("long").size(), 1000u) << "nothing read after the deferrals ran out";
  for (int i = 0; i < 200 && OrderIdsInDb("long").size() < orders.size(); ++i) {
    io_.Run(consumer.Pass(&stop_));
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(OrderIdsInDb("long"), std::set<std::string>(orders.begin(), orders.end()));
  EXPECT_EQ(metrics_.duplicates.value(), 0u);
}

TEST_F(PipelineTest, TrimmingKeepsWhatIsNotPersisted) {
  CreateActivity("trim", 500);
  Reserve("trim", 300);
  // Another consumer holds the first 100 without acknowledging them.
  ASSERT_TRUE(io_.Run(context_->order_stream().EnsureGroup("trim")).ok());
  auto held = io_.Run(context_->order_stream().ReadNew("trim", "slow", 100));
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 100u);
  ConsumerOptions options = Options("fast");
  options.claim_idle = 1h;  // nobody claims the slow consumer's entries in this test
  OrderConsumer consumer(*context_, context_->order_stream(), options, metrics_);
  EXPECT_EQ(Drain(consumer), 200);
  auto trimmed = io_.Run(context_->order_stream().Trim("trim"));
  ASSERT_TRUE(trimmed.ok());
  EXPECT_EQ(*trimmed, 0) << "entries before the oldest pending one are all still pending";
  // Every held entry is still in the stream.
  for (const auto& intent : *held) {
    EXPECT_EQ(redis_->Command({"XRANGE", Keys("trim").stream(), intent.entry_id, intent.entry_id})
                  ->elements,
              1u);
  }
  // Once they are acknowledged, the persisted prefix can go.
  std::vector<std::string> ids;
  for (const auto& intent : *held) ids.push_back(intent.entry_id);
  ASSERT_TRUE(io_.Run(context_->order_stream().Ack("trim", ids, true)).ok());
  trimmed = io_.Run(context_->order_stream().Trim("trim"));
  ASSERT_TRUE(trimmed.ok());
  EXPECT_GT(*trimmed, 0);
  EXPECT_LT(redis_->Integer({"XLEN", Keys("trim").stream()}), 300);
}

TEST_F(PipelineTest, TheBuyerFindsTheOrderBeforeAndAfterItIsPersisted) {
  CreateActivity("find", 5);
  Reserve("find", 2);
  auto before = io_.Run(GetUserOrders(*context_, "u1"));
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].order.order_id, "find-o1");
  EXPECT_FALSE((*before)[0].persisted);
  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  Drain(consumer);
  auto after = io_.Run(GetUserOrders(*context_, "u1"));
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_TRUE((*after)[0].persisted);
  EXPECT_EQ((*after)[0].state, "reserved");
}

// --- Holes of the audit (issue 15): each a test that failed before its fix. ---

// Every key of an activity in Redis gone, as after Redis lost it.
void Forget(const RedisServer& redis, const keyspace::ActivityKeys& keys) {
  for (const std::string* key :
       {&keys.meta(), &keys.stock(), &keys.items(), &keys.prizes(), &keys.buyers(), &keys.orders(),
        &keys.user_orders(), &keys.stream(), &keys.dead(), &keys.failures()}) {
    redis.Integer({"DEL", *key});
  }
}

// Point 9: a started sale postponed (start_ms moved to the future) and then lost by Redis must not
// be loaded by prewarm with its whole stock: the record holds orders. Reconciliation rebuilds it
// with what is left.
TEST_F(PipelineTest, PrewarmNeverLoadsAnActivityWithOrdersInTheRecord) {
  CreateActivity("moved", 10);
  Reserve("moved", 3);
  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  Drain(consumer);
  ASSERT_EQ(OrderIdsInDb("moved").size(), 3u);
  store::ActivityUpdate postpone;
  postpone.start_ms = clock_.NowMs() + 3'600'000;
  postpone.end_ms = clock_.NowMs() + 7'200'000;
  ASSERT_TRUE(store_->UpdateActivity("moved", postpone, clock_.NowMs()).ok());
  ASSERT_TRUE(io_.Run(ReloadRegistry(*context_)).ok());
  Forget(*redis_, Keys("moved"));

  const JobRequest prewarm{.job = Job::kPrewarm};
  auto ran = io_.Run(RunJob(*context_, prewarm, nullptr));
  ASSERT_TRUE(ran.ok()) << ran.error().ToString();
  auto status = io_.Run(context_->activity_scripts().AsyncStatus("moved", asio::use_awaitable));
  ASSERT_TRUE(status.ok());
  EXPECT_FALSE(status->found) << "prewarm loaded " << status->remaining
                              << " units of a sale whose record holds 3 orders: " << *ran;

  settings_.rebuild_grace = 0ms;
  const store::ActivityRecord record = *store_->GetActivity("moved", false);
  auto report = io_.Run(Reconcile(*context_, record, /*repair=*/true));
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_TRUE(report->rebuilt);
  status = io_.Run(context_->activity_scripts().AsyncStatus("moved", asio::use_awaitable));
  EXPECT_EQ(status->remaining, 7);
}

// Point 6: a release on an activity whose definition Redis no longer holds (its order record
// still there) must not create the meta hash (HINCRBY on a missing key), which made the
// activity look loaded to the rebuild and wedged it.
TEST_F(PipelineTest, AReleaseOnAnActivityRedisDoesNotHoldCreatesNothing) {
  CreateActivity("gone", 5);
  const auto orders = Reserve("gone", 1);
  ASSERT_EQ(redis_->Integer({"DEL", Keys("gone").meta()}), 1);
  auto released =
      io_.Run(context_->activity_scripts().AsyncRelease("gone", orders[0], asio::use_awaitable));
  EXPECT_EQ(redis_->Integer({"EXISTS", Keys("gone").meta()}), 0)
      << "the release created the activity's meta hash";
  EXPECT_TRUE(released.ok() && released->outcome != keyspace::ReleaseOutcome::kReleased);
  // A restore of orders into it is not refused as "loaded" either: the rebuild goes through.
  settings_.rebuild_grace = 0ms;
  const store::ActivityRecord record = *store_->GetActivity("gone", false);
  auto report = io_.Run(Reconcile(*context_, record, /*repair=*/true));
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_TRUE(report->rebuilt);
}

// Point 4: after Redis lost a lottery, the rebuild restores each user's draw COUNT from the
// record's draw numbers (draws that won nothing are not in the record), not the number of wins:
// a user who drew 3 times and won once keeps 3 draws, so no extra draws, no draw number clash.
TEST_F(PipelineTest, ALotteryRebuildRestoresDrawCountsFromDrawNumbers) {
  core::Activity lottery;
  lottery.id = "lot";
  lottery.start_ms = 0;
  lottery.end_ms = 4'000'000'000'000;
  lottery.per_user_limit = 3;
  lottery.lottery = core::Lottery{.prizes = {{"mug", "A mug", 1, 10}}, .no_prize_weight = 1};
  lottery.stock = lottery.lottery->TotalStock();
  ASSERT_TRUE(io_.Run(CreateActivityAsync(lottery)).ok());
  // u0: no prize, no prize, then a win (draw 3). pick % 2: 0 = no prize, 1 = the mug.
  for (int draw = 1; draw <= 3; ++draw) {
    const std::string order = fmt::format("lot-d{}", draw);
    const keyspace::DrawRequest request{.order_id = order,
                                        .user_id = "u0",
                                        .now_ms = 1000 + draw,
                                        .pick = draw == 3 ? 1u : 0u,
                                        .fallback = 0};
    auto drawn =
        io_.Run(context_->activity_scripts().AsyncDraw("lot", request, asio::use_awaitable));
    ASSERT_TRUE(drawn.ok()) << drawn.error().ToString();
    ASSERT_EQ(drawn->outcome, draw == 3 ? core::Outcome::kReserved : core::Outcome::kNoPrize);
  }
  OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
  Drain(consumer);
  ASSERT_EQ(OrderIdsInDb("lot").size(), 1u);
  Forget(*redis_, Keys("lot"));

  settings_.rebuild_grace = 0ms;
  const store::ActivityRecord record = *store_->GetActivity("lot", false);
  auto report = io_.Run(Reconcile(*context_, record, /*repair=*/true));
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  ASSERT_TRUE(report->rebuilt);
  EXPECT_EQ(redis_->String({"HGET", Keys("lot").buyers(), "u0"}), "3")
      << "the draw count became the win count";
  EXPECT_EQ(redis_->String({"HGET", Keys("lot").prizes(), "mug"}), "9");
  const keyspace::DrawRequest fourth{
      .order_id = "lot-d4", .user_id = "u0", .now_ms = 2000, .pick = 1};
  auto refused =
      io_.Run(context_->activity_scripts().AsyncDraw("lot", fourth, asio::use_awaitable));
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->outcome, core::Outcome::kLimitReached);
}

// The context's random source is injected: the same seed draws the same prizes again, through
// the whole draw use case (admission, the draw script, the prize named from the registry).
TEST_F(PipelineTest, TheSameSeedReplaysTheSameDraws) {
  for (const std::string id : {"replay-a", "replay-b"}) {
    core::Activity lottery;
    lottery.id = id;
    lottery.start_ms = 0;
    lottery.end_ms = 4'000'000'000'000;
    lottery.per_user_limit = 1;
    lottery.lottery = core::Lottery{.prizes = {{"cup", "A cup", 1, 3}, {"pen", "A pen", 2, 6}},
                                    .no_prize_weight = 3};
    lottery.stock = lottery.lottery->TotalStock();
    ASSERT_TRUE(io_.Run(CreateActivityAsync(lottery)).ok());
  }
  // Twenty users draw once each; "outcome:prize name" in order.
  const auto draw_all = [&](const std::string& activity) {
    std::vector<std::string> seen;
    for (int i = 0; i < 20; ++i) {
      const std::string user = fmt::format("u{}", i);
      auto drawn = io_.Run(Draw(*context_, {.activity_id = activity, .user_id = user}));
      EXPECT_TRUE(drawn.ok() && !drawn->unknown);
      if (!drawn.ok()) break;
      seen.push_back(fmt::format("{}:{}", static_cast<int>(drawn->outcome), drawn->prize.name));
    }
    return seen;
  };
  random_ = base::SeededRandom(5);
  const std::vector<std::string> first = draw_all("replay-a");
  random_ = base::SeededRandom(5);
  clock_.Advance(1000);  // other order ids; the same draws
  const std::vector<std::string> again = draw_all("replay-b");
  ASSERT_EQ(first.size(), 20u);
  EXPECT_EQ(first, again);
  const std::set<std::string> kinds(first.begin(), first.end());
  EXPECT_GE(kinds.size(), 2u) << "wins and losses both: a sequence worth replaying";
  EXPECT_TRUE(kinds.contains("1:A cup") || kinds.contains("1:A pen"))
      << "a win is named from the registry";
}

// Point 10: a rebuild's counters (total, reserved) must not be separate commands after the setup
// script. Two reconciliation runs rebuilding one activity at once (a job lock lost to a pause:
// both runners believe they hold it) must still count each order once: Redis's counters match
// the record, and nothing drifts. The two runs interleave at each await; several activities make
// an unlucky interleaving of the old code (restore, setup, then HINCRBY reserved and total)
// show, not just one.
TEST_F(PipelineTest, TwoRebuildsAtOnceCountEachOrderOnce) {
  settings_.rebuild_grace = 0ms;
  for (int round = 0; round < 5; ++round) {
    const std::string id = fmt::format("twice-rebuilt-{}", round);
    CreateActivity(id, 10, 2);
    Reserve(id, 3, 2);  // 6 units
    OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
    Drain(consumer);
    ASSERT_EQ(OrderIdsInDb(id).size(), 3u);
    Forget(*redis_, Keys(id));

    const store::ActivityRecord record = *store_->GetActivity(id, false);
    auto first = asio::co_spawn(
        io_.context(),
        [&]() -> asio::awaitable<bool> {
          co_return (co_await Reconcile(*context_, record, /*repair=*/true)).ok();
        },
        asio::use_future);
    auto second = io_.Run(Reconcile(*context_, record, /*repair=*/true));
    ASSERT_EQ(first.wait_for(60s), std::future_status::ready);
    EXPECT_TRUE(first.get());
    ASSERT_TRUE(second.ok()) << second.error().ToString();

    auto status = io_.Run(context_->activity_scripts().AsyncStatus(id, asio::use_awaitable));
    ASSERT_TRUE(status.ok() && status->found);
    EXPECT_EQ(status->remaining, 4) << id;
    EXPECT_EQ(status->total, 10) << id << ": total counted twice";
    EXPECT_EQ(status->reserved - status->released, 6)
        << id << ": the record's orders counted twice";
    auto check = io_.Run(Reconcile(*context_, record, /*repair=*/false));
    ASSERT_TRUE(check.ok()) << check.error().ToString();
    EXPECT_EQ(check->drift, 0) << check->Json();
    EXPECT_EQ(check->not_in_db, 0) << check->Json();
  }
}

// Point 10: a rebuild stopped after its first step (the process died after loading the activity
// closed) is finished by the next run: the counters match the record, nothing drifts, and the
// sale is open again as the record says. One whose earlier run found units oversold stays closed.
TEST_F(PipelineTest, ARebuildStoppedAfterLoadingIsFinishedByTheNextRun) {
  settings_.rebuild_grace = 0ms;
  for (const bool oversold : {false, true}) {
    const std::string id = oversold ? "stopped-oversold" : "stopped";
    CreateActivity(id, 10, 2);
    Reserve(id, 3, 2);  // 6 units
    OrderConsumer consumer(*context_, context_->order_stream(), Options("c1"), metrics_);
    Drain(consumer);
    ASSERT_EQ(OrderIdsInDb(id).size(), 3u);
    Forget(*redis_, Keys(id));
    const store::ActivityRecord record = *store_->GetActivity(id, true);
    // A run sees it missing (and marks it so), then the process dies after the first step of
    // the rebuild: the activity loaded closed with the record's stock.
    redis_->Command({"SET", Keys(id).meta() + ":missing_since", "1", "PX", "86400000"});
    core::Activity closed = record.activity;
    closed.open = false;
    auto loaded = io_.Run(context_->activity_scripts().AsyncSetup(
        closed, keyspace::SetupMode::kLoadIfMissing, asio::use_awaitable));
    ASSERT_TRUE(loaded.ok()) << loaded.error().ToString();
    // The mark alone, without the shortage an earlier run would have applied with it: units
    // reserved are derived (total + released + oversold - remaining, activity_status.lua), so the
    // forged mark reads as one unit sold beyond the stock, and as a drift of one.
    if (oversold) redis_->Command({"HSET", Keys(id).meta(), "oversold", "1"});

    auto report = io_.Run(Reconcile(*context_, record, /*repair=*/true));
    ASSERT_TRUE(report.ok()) << report.error().ToString();
    auto status = io_.Run(context_->activity_scripts().AsyncStatus(id, asio::use_awaitable));
    ASSERT_TRUE(status.ok() && status->found);
    EXPECT_EQ(status->remaining, 4) << id;
    EXPECT_EQ(status->reserved - status->released, oversold ? 7 : 6) << id;
    EXPECT_EQ(status->state, oversold ? "closed" : "open") << id << ": " << report->Json();
    auto check = io_.Run(Reconcile(*context_, record, /*repair=*/false));
    ASSERT_TRUE(check.ok()) << check.error().ToString();
    EXPECT_EQ(check->drift, oversold ? -1 : 0) << check->Json();
    EXPECT_EQ(redis_->Integer({"EXISTS", Keys(id).meta() + ":missing_since"}), 0) << id;
  }
}

}  // namespace
}  // namespace flashsale::service
