// The drill of the record on MariaDB Galera: a sale goes on while a real `flashsale worker` writes
// the order intents of a real redis-server through node 1 of a 3-node Galera cluster
// (scripts/galera.sh), and node 3 is SIGKILLed by its PID mid-sale. The two survivors keep a
// primary component (2 of 3), the pipeline carries on through node 1, and the whole check holds,
// read on node 2: every reservation Redis made is exactly one row (same order ids, none twice, no
// stream entry twice), and the units in the database are the units sold.
//
// One cluster per binary (it takes tens of seconds to start), one redis-server and one database
// per test. The worker is SIGKILLed by its PID at the end of its scope, the cluster's nodes are
// stopped by `scripts/galera.sh stop` (by their PIDs); every wait is bounded; nothing asserts on
// timing.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/subprocess.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/embedded_scripts.h"
#include "keyspace/order_stream.h"
#include "keyspace/service_state.h"
#include "redis/scripts.h"
#include "store/mysql/store.h"
#include "support/flashsale_process.h"
#include "support/galera_cluster.h"
#include "support/io_thread.h"
#include "support/redis_helpers.h"
#include "support/redis_server.h"
#include "support/wait.h"

namespace flashsale {
namespace {

namespace asio = boost::asio;
using testing::Eventually;
using testing::GaleraCluster;
using testing::IoThread;
using testing::RedisServer;
using namespace std::chrono_literals;

constexpr int kWriterNode = 1;  // the pipeline writes through it
constexpr int kCheckNode = 2;   // the check reads there
constexpr int kKilledNode = 3;

std::map<std::string, std::string> Pairs(const redisReply* reply) {
  std::map<std::string, std::string> out;
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return out;
  for (size_t i = 0; i + 1 < reply->elements; i += 2) {
    const redisReply* value = reply->element[i + 1];
    out[std::string(reply->element[i]->str, reply->element[i]->len)] =
        value->type == REDIS_REPLY_STRING || value->type == REDIS_REPLY_STATUS
            ? std::string(value->str, value->len)
            : std::to_string(value->integer);
  }
  return out;
}

class GaleraDrillTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new GaleraCluster(); }
  static void TearDownTestSuite() {
    delete cluster_;  // scripts/galera.sh stop: the PIDs of the nodes still running
    cluster_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    redis_ = std::make_unique<RedisServer>();
    database_ = cluster_->UniqueDatabase();
    auto store = store::MySqlStore::Open(cluster_->url(kWriterNode, database_));
    ASSERT_TRUE(store.ok()) << store.error().ToString();
    store_ = std::move(*store);
    auto migrated = store_->Migrate();
    ASSERT_TRUE(migrated.ok()) << migrated.error().ToString();
    namespace_ = testing::UniqueNamespace();
    connection_ = testing::Connect(io_, redis_->unix_url());
    runner_ = std::make_unique<redis::ScriptRunner>(connection_, keyspace::Scripts());
    scripts_ = std::make_unique<keyspace::ActivityScripts>(*runner_, namespace_);
    stream_ = std::make_unique<keyspace::OrderStream>(*runner_, namespace_);
  }

  void TearDown() override {
    if (connection_) testing::Stop(io_, connection_);
    store_.reset();
    redis_.reset();
  }

  // An open counted activity, one unit per user, in the database and in Redis.
  void CreateActivity(const std::string& id, int64_t stock) {
    core::Activity activity;
    activity.id = id;
    activity.title = "galera drill";
    activity.start_ms = 0;
    activity.end_ms = 4'000'000'000'000;
    activity.per_user_limit = 1;
    activity.stock = stock;
    auto created = store_->CreateActivity(activity, base::SystemClock::Instance().NowMs());
    ASSERT_TRUE(created.ok()) << created.error().ToString();
    auto setup = io_.Run(SetUpActivity(activity));
    ASSERT_TRUE(setup.ok()) << setup.error().ToString();
    ASSERT_TRUE(setup->loaded);
    redis_->Command({"INCR", keyspace::NamespaceKeys(namespace_).registry_version()});
  }
  asio::awaitable<base::Result<keyspace::SetupResult>> SetUpActivity(core::Activity activity) {
    co_return co_await scripts_->AsyncSetup(activity, keyspace::SetupMode::kLoadIfMissing,
                                            asio::use_awaitable);
  }

  // Reserves one unit for users first .. first+count-1 (order o<i>, user u<i>); a call that fails
  // is retried with the same order id (the script is idempotent on it). The units reserved.
  int64_t Reserve(const std::string& activity, int64_t first, int64_t count) {
    return io_.Run(ReserveAsync(activity, first, count), 120s);
  }
  asio::awaitable<int64_t> ReserveAsync(std::string activity, int64_t first, int64_t count) {
    int64_t reserved = 0;
    for (int64_t i = first; i < first + count; ++i) {
      const std::string order_id = fmt::format("o{}", i);  // the request holds views of them
      const std::string user_id = fmt::format("u{}", i);
      const keyspace::ReserveRequest request{.order_id = order_id,
                                             .user_id = user_id,
                                             .quantity = 1,
                                             .now_ms = base::SystemClock::Instance().NowMs()};
      for (int attempt = 0; attempt < 50; ++attempt) {
        auto reply = co_await scripts_->AsyncReserve(activity, request, asio::use_awaitable);
        if (!reply.ok()) {
          last_error_ = reply.error().ToString();
          continue;
        }
        if (reply->outcome == core::Outcome::kReserved) {
          ++reserved;
        } else {
          last_error_ = fmt::format("outcome {}", static_cast<int>(reply->outcome));
        }
        break;
      }
    }
    co_return reserved;
  }

  // `flashsale worker` on this test's Redis, writing through `node`; its log in tmp_.
  std::unique_ptr<base::Subprocess> StartWorker(int node) {
    const std::vector<std::string> argv = {FLASHSALE_BINARY,
                                           "worker",
                                           "--redis-url",
                                           redis_->unix_url(),
                                           "--db-url",
                                           cluster_->url(node, database_),
                                           "--key-namespace",
                                           namespace_,
                                           "--data-dir",
                                           tmp_.path(),
                                           "--consumers",
                                           "2",
                                           "--consumer-batch",
                                           "50",
                                           "--claim-idle-ms",
                                           "300",
                                           "--registry-poll-ms",
                                           "50",
                                           "--reconcile-every-ms",
                                           "0",
                                           "--prewarm-every-ms",
                                           "0",
                                           "--log-level",
                                           "info"};
    auto spawned = base::Subprocess::Spawn(argv, tmp_ / "worker.log");
    if (!spawned) throw std::runtime_error("spawn flashsale worker: " + spawned.error().message);
    return std::make_unique<base::Subprocess>(std::move(spawned).value());
  }

  int64_t RowsOnNode(int node, const std::string& activity) {
    return std::stoll(cluster_->Scalar(
        node, fmt::format("SELECT COUNT(*) FROM orders WHERE activity_id = '{}'", activity),
        database_));
  }

  // Nothing pending, nothing undelivered.
  bool Drained(const std::string& activity) {
    auto info = io_.Run(stream_->Info(activity));
    if (!info.ok() || info->pending != 0) return false;
    if (info->lag == 0) return true;
    if (info->lag > 0) return false;
    auto stream =
        redis_->Command({"XINFO", "STREAM", keyspace::ActivityKeys{namespace_, activity}.stream()});
    return Pairs(stream.get())["last-generated-id"] == info->last_delivered_id;
  }

  std::string WorkerLog() { return testing::ReadFile(tmp_ / "worker.log"); }

  static GaleraCluster* cluster_;
  std::string last_error_;  // of the reservations: the last error or outcome other than reserved
  testing::TempDir tmp_{"fs-galera"};
  std::unique_ptr<RedisServer> redis_;
  std::string database_;
  std::unique_ptr<store::MySqlStore> store_;
  std::string namespace_;
  IoThread io_;
  std::shared_ptr<redis::Connection> connection_;
  std::unique_ptr<redis::ScriptRunner> runner_;
  std::unique_ptr<keyspace::ActivityScripts> scripts_;
  std::unique_ptr<keyspace::OrderStream> stream_;
};
GaleraCluster* GaleraDrillTest::cluster_ = nullptr;

TEST_F(GaleraDrillTest, ANodeKilledMidSaleLosesNothingAndWritesNothingTwice) {
  const std::string activity = "galera";
  ASSERT_NO_FATAL_FAILURE(CreateActivity(activity, 5000));
  ASSERT_EQ(cluster_->ClusterSize(kCheckNode), 3);
  auto worker = StartWorker(kWriterNode);
  struct KillWorker {
    base::Subprocess& worker;
    ~KillWorker() {
      if (worker.Running()) {
        worker.Signal(SIGKILL);
        worker.Wait(10s);
      }
    }
  } kill_worker{*worker};

  // The sale is under way and the pipeline is writing...
  int64_t sold = Reserve(activity, 0, 1500);
  ASSERT_EQ(sold, 1500) << last_error_;
  ASSERT_TRUE(Eventually([&] { return RowsOnNode(kCheckNode, activity) >= 300; }, 60s))
      << "the pipeline wrote nothing through node " << kWriterNode << " (stream length "
      << redis_->Integer({"XLEN", keyspace::ActivityKeys{namespace_, activity}.stream()})
      << "); worker log:\n"
      << WorkerLog();

  // ...when node 3 dies, while reservations keep coming...
  std::atomic<int64_t> more{0};
  std::thread sale([&] { more = Reserve(activity, 1500, 1500); });
  std::this_thread::sleep_for(100ms);
  cluster_->Kill(kKilledNode);
  sale.join();
  sold += more.load();
  // ...and after it is gone: these can only be written by a pipeline that carried on.
  sold += Reserve(activity, 3000, 1000);
  ASSERT_EQ(sold, 4000) << last_error_;
  EXPECT_TRUE(worker->Running()) << WorkerLog();

  // The survivors form the primary component of 2.
  EXPECT_TRUE(Eventually([&] { return cluster_->ClusterSize(kCheckNode) == 2; }, 60s, 200ms));

  // The whole check, once the pipeline has drained (bounded).
  ASSERT_TRUE(Eventually([&] { return Drained(activity); }, 120s, 100ms))
      << "the stream did not drain; worker log:\n"
      << WorkerLog();
  ASSERT_TRUE(Eventually([&] { return RowsOnNode(kCheckNode, activity) == sold; }, 60s, 100ms))
      << "rows on node " << kCheckNode << ": " << RowsOnNode(kCheckNode, activity) << ", sold "
      << sold;
  const keyspace::ActivityKeys keys{namespace_, activity};
  EXPECT_EQ(redis_->SumOfHash(keys.buyers()), sold);  // the units the buyers hold

  auto totals = cluster_->Query(
      kCheckNode,
      fmt::format("SELECT COUNT(*), COUNT(DISTINCT order_id), COUNT(DISTINCT stream_id), "
                  "COALESCE(SUM(quantity), 0) FROM orders WHERE activity_id = '{}'",
                  activity),
      database_);
  ASSERT_EQ(totals.rows.size(), 1u);
  EXPECT_EQ(std::stoll(*totals.rows[0][0]), sold) << "rows != units sold";
  EXPECT_EQ(std::stoll(*totals.rows[0][1]), sold) << "an order written twice";
  EXPECT_EQ(std::stoll(*totals.rows[0][2]), sold) << "a stream entry written twice";
  EXPECT_EQ(std::stoll(*totals.rows[0][3]), sold) << "units != units sold";

  // The same orders as Redis recorded, none lost.
  std::set<std::string> in_redis;
  {
    auto ids = redis_->Command({"HKEYS", keys.orders()});
    for (size_t i = 0; i < ids->elements; ++i) {
      in_redis.emplace(ids->element[i]->str, ids->element[i]->len);
    }
  }
  std::set<std::string> in_db;
  for (const auto& row :
       cluster_
           ->Query(kCheckNode,
                   fmt::format("SELECT order_id FROM orders WHERE activity_id = '{}'", activity),
                   database_)
           .rows) {
    in_db.insert(*row[0]);
  }
  EXPECT_EQ(in_redis.size(), static_cast<size_t>(sold));
  EXPECT_TRUE(in_db == in_redis) << in_db.size() << " orders in the database, " << in_redis.size()
                                 << " in Redis";
  // Node 1 agrees with node 2.
  EXPECT_EQ(RowsOnNode(kWriterNode, activity), sold);
  EXPECT_EQ(redis_->Integer({"XLEN", keys.dead()}), 0) << WorkerLog();
}

}  // namespace
}  // namespace flashsale
