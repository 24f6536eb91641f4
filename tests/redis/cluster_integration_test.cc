// The cluster client on a real 3-primary Redis Cluster (scripts/redis-cluster.sh): the slot of
// random keys against CLUSTER KEYSLOT, commands landing on their slot's primary, script calls
// across slots refused, NOSCRIPT per node, and a live activity's slot migrated to another primary
// in the middle of a sale (ASK, TRYAGAIN, then MOVED): every reservation answered, the sale exact.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <boost/asio/use_awaitable.hpp>
#include <future>
#include <random>
#include <set>
#include <thread>

#include "core/activity.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/embedded_scripts.h"
#include "keyspace/inspect.h"
#include "redis/cluster.h"
#include "support/redis_cluster.h"
#include "support/redis_helpers.h"

namespace flashsale::keyspace {
namespace {

using core::Outcome;
using testing::IoThread;
using testing::RedisCluster;
using namespace std::chrono_literals;

core::Activity Activity(std::string id, int64_t stock) {
  core::Activity activity;
  activity.id = std::move(id);
  activity.start_ms = 1000;
  activity.end_ms = 2000;
  activity.per_user_limit = 1;
  activity.stock = stock;
  return activity;
}

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new RedisCluster(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    redis::ConnectionOptions options;
    options.command_timeout = 5s;
    connection_ = testing::Connect(io_, cluster_->url(), options);
    runner_ = std::make_unique<redis::ScriptRunner>(connection_, Scripts());
    scripts_ = std::make_unique<ActivityScripts>(*runner_, ns_);
  }
  void TearDown() override { testing::Stop(io_, connection_); }

  base::Result<Reservation> Reserve(const std::string& activity, const std::string& order,
                                    const std::string& user) {
    ReserveRequest request{.order_id = order, .user_id = user, .quantity = 1, .now_ms = 1500};
    return io_.Run(scripts_->AsyncReserve(activity, request, boost::asio::use_awaitable));
  }
  ActivityStatus Status(const std::string& activity) {
    auto status = io_.Run(scripts_->AsyncStatus(activity, boost::asio::use_awaitable));
    if (!status.ok()) throw std::runtime_error(status.error().ToString());
    return *status;
  }
  // An activity id of this test whose keys live on the primary at `port`.
  std::string ActivityOn(uint16_t port, std::string_view stem) {
    for (int i = 0;; ++i) {
      std::string id = fmt::format("{}{}", stem, i);
      if (cluster_->PrimaryOf(redis::KeySlot(id)) == port) return id;
    }
  }

  static RedisCluster* cluster_;
  std::string ns_ = testing::UniqueNamespace();
  IoThread io_;
  std::shared_ptr<redis::Connection> connection_;
  std::unique_ptr<redis::ScriptRunner> runner_;
  std::unique_ptr<ActivityScripts> scripts_;
};

RedisCluster* ClusterTest::cluster_ = nullptr;

TEST_F(ClusterTest, SlotOfRandomKeysMatchesClusterKeyslot) {
  std::mt19937_64 random(20261130);
  const std::string alphabet = "abcxyz019:{}{}-_ ";
  std::vector<std::string> keys = {"", "{}", "{{}}", "}{", "a{}b{c}", "fs:seckill:{demo}:stock"};
  for (int i = 0; i < 3000; ++i) {
    std::string key;
    const size_t length = random() % 24;
    for (size_t c = 0; c < length; ++c) key += alphabet[random() % alphabet.size()];
    if (i % 3 == 0) key = fmt::format("pre{{{}}}post", key);  // a tag, maybe empty or nested
    if (i % 7 == 0) key.push_back(static_cast<char>(random() % 256));  // any byte
    keys.push_back(key);
  }
  // One pipelined hiredis connection for the 3006 CLUSTER KEYSLOT calls.
  timeval tv{10, 0};
  redisContext* context = redisConnectWithTimeout("127.0.0.1", cluster_->ports()[0], tv);
  ASSERT_TRUE(context != nullptr && context->err == 0);
  redisSetTimeout(context, tv);
  for (const auto& key : keys) {
    redisAppendCommand(context, "CLUSTER KEYSLOT %b", key.data(), key.size());
  }
  int mismatches = 0;
  for (const auto& key : keys) {
    void* raw = nullptr;
    ASSERT_EQ(redisGetReply(context, &raw), REDIS_OK);
    testing::SyncReply reply(static_cast<redisReply*>(raw));
    ASSERT_EQ(reply->type, REDIS_REPLY_INTEGER);
    if (reply->integer != redis::KeySlot(key)) {
      ++mismatches;
      ADD_FAILURE() << "key '" << key << "': redis " << reply->integer << ", ours "
                    << redis::KeySlot(key);
    }
  }
  redisFree(context);
  EXPECT_EQ(mismatches, 0);
}

TEST_F(ClusterTest, CommandsLandOnTheirSlotsPrimary) {
  std::set<uint16_t> used;
  for (int i = 0; i < 200; ++i) {
    const std::string key = fmt::format("{}:k{}", ns_, i);
    auto set = testing::Exec(io_, *connection_, {"SET", key, std::to_string(i)}, 10s);
    ASSERT_TRUE(set.ok()) << set.error().ToString();
    const uint16_t port = cluster_->PrimaryOf(redis::KeySlot(key));
    used.insert(port);
    auto direct = cluster_->Command(port, {"GET", key});
    ASSERT_EQ(direct->type, REDIS_REPLY_STRING) << key;
    EXPECT_EQ(std::string(direct->str, direct->len), std::to_string(i));
    auto read = testing::Exec(io_, *connection_, {"GET", key}, 10s);
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(read->str(), std::to_string(i));
  }
  EXPECT_EQ(used.size(), 3u);  // every primary got keys
  const redis::ClusterRouter* router = connection_->cluster();
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(io_.Call([&] { return router->primaries(); }), 3u);
  EXPECT_EQ(io_.Call([&] { return router->moved(); }), 0u);  // the map was right
  auto ping = testing::Exec(io_, *connection_, {"PING"}, 10s);
  ASSERT_TRUE(ping.ok());
  EXPECT_EQ(ping->str(), "PONG");
}

TEST_F(ClusterTest, AScriptAcrossSlotsIsRefusedBeforeSending) {
  const std::string a = ns_ + ":a";
  const std::string b = ns_ + ":b-other";
  ASSERT_NE(redis::KeySlot(a), redis::KeySlot(b));
  auto refused = testing::Exec(io_, *connection_,
                               {"EVAL", "redis.call('SET', KEYS[1], 1) return 1", "2", a, b}, 10s);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, base::ErrorCode::kInvalidArgument);
  for (uint16_t port : cluster_->ports()) {
    EXPECT_EQ(cluster_->Command(port, {"EXISTS", a})->integer, 0);  // nothing ran anywhere
  }
}

TEST_F(ClusterTest, ActivitiesOnEveryPrimaryAndNoScriptPerNode) {
  std::vector<std::string> ids;
  for (uint16_t port : cluster_->ports()) ids.push_back(ActivityOn(port, "act"));
  for (const auto& id : ids) {
    auto setup = io_.Run(scripts_->AsyncSetup(Activity(id, 5), boost::asio::use_awaitable));
    ASSERT_TRUE(setup.ok()) << setup.error().ToString();
  }
  // One node forgets its scripts: the runner reloads there, invisibly.
  cluster_->Command(cluster_->ports()[1], {"SCRIPT", "FLUSH"});
  for (const auto& id : ids) {
    for (int u = 0; u < 7; ++u) {
      auto r = Reserve(id, fmt::format("{}-o{}", id, u), fmt::format("u{}", u));
      ASSERT_TRUE(r.ok()) << r.error().ToString();
      EXPECT_EQ(r->outcome, u < 5 ? Outcome::kReserved : Outcome::kSoldOut);
    }
    const auto status = Status(id);
    EXPECT_EQ(status.reserved, 5);
    EXPECT_EQ(status.remaining, 0);
    EXPECT_EQ(status.stream_length, 5);
  }
  EXPECT_GE(io_.Call([&] { return runner_->reloads(); }), 1u);
}

// A node that stops answering after the command was written: the outcome is unknown and the
// router never resends it (the INCR runs once, when the node comes back).
TEST_F(ClusterTest, ALostReplyIsAnUnknownOutcomeNeverResent) {
  const std::string key = ns_ + ":counter";
  const uint16_t port = cluster_->PrimaryOf(redis::KeySlot(key));
  redis::ConnectionOptions options;
  options.command_timeout = 300ms;
  auto connection = testing::Connect(io_, cluster_->url(), options);
  auto warm = testing::Exec(io_, *connection, {"GET", key}, 5s);  // the map is loaded
  ASSERT_TRUE(warm.ok()) << warm.error().ToString();
  const pid_t pid = cluster_->Pid(port);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  auto incr = testing::Exec(io_, *connection, {"INCR", key}, 300ms);
  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  ASSERT_FALSE(incr.ok());
  EXPECT_EQ(incr.error().code, base::ErrorCode::kUnknownOutcome) << incr.error().ToString();
  EXPECT_EQ(incr.error().detail, base::ErrorDetail::kDeadline) << "what the router counts";
  EXPECT_EQ(io_.Call([&] { return connection->stats().timeouts.value(); }), 1u);
  EXPECT_EQ(io_.Call([&] { return connection->stats().unknown_outcome.value(); }), 1u);
  // Once the node runs again it executes the INCR it had received, once.
  std::string value;
  for (int attempt = 0; attempt < 100 && value != "1"; ++attempt) {
    auto get = testing::Exec(io_, *connection, {"GET", key}, 5s);
    if (get.ok() && get->is_string()) value = std::string(get->str());
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(value, "1");
  std::this_thread::sleep_for(500ms);
  auto again = testing::Exec(io_, *connection, {"GET", key}, 5s);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->str(), "1");  // not resent behind the caller's back
  testing::Stop(io_, connection);
}

// A slot left half migrated: a script whose keys are split between the two nodes gets TRYAGAIN;
// the router retries with backoff, a bounded number of times, then answers kUnavailable (it did
// not run). Once the migration completes, the same order goes through, once.
TEST_F(ClusterTest, TryAgainIsRetriedABoundedNumberOfTimesThenUnavailable) {
  const uint16_t from = cluster_->ports()[1];
  const uint16_t to = cluster_->ports()[0];
  const std::string id = ActivityOn(from, "stuck");
  const int slot = redis::KeySlot(id);
  auto setup = io_.Run(scripts_->AsyncSetup(Activity(id, 5), boost::asio::use_awaitable));
  ASSERT_TRUE(setup.ok()) << setup.error().ToString();
  auto first = Reserve(id, "o0", "u0");  // creates the buyers, orders and stream keys
  ASSERT_TRUE(first.ok());
  cluster_->BeginMigration(slot, from, to);
  ASSERT_EQ(cluster_->MoveKeys(slot, from, to, 1), 1);  // one key moved, the rest not
  const uint64_t retried_before = io_.Call([&] { return connection_->cluster()->retried(); });
  auto stuck = Reserve(id, "o1", "u1");
  ASSERT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.error().code, base::ErrorCode::kUnavailable) << stuck.error().ToString();
  EXPECT_NE(stuck.error().message.find("TRYAGAIN"), std::string::npos) << stuck.error().message;
  const uint64_t retried = io_.Call([&] { return connection_->cluster()->retried(); });
  EXPECT_GE(retried - retried_before, 1u);
  EXPECT_LE(retried - retried_before, static_cast<uint64_t>(redis::ClusterRouter::kMaxRetries));

  while (cluster_->MoveKeys(slot, from, to, 10) > 0) {
  }
  cluster_->FinishMigration(slot, to);
  auto after = Reserve(id, "o1", "u1");
  ASSERT_TRUE(after.ok()) << after.error().ToString();
  EXPECT_EQ(after->outcome, Outcome::kReserved);
  EXPECT_FALSE(after->replayed);  // the stuck call had not run
  const auto status = Status(id);
  EXPECT_EQ(status.reserved, 2);
  EXPECT_EQ(status.remaining, 3);
  EXPECT_EQ(status.stream_length, 2);
}

// A sale running on one I/O thread while the test thread moves the activity's slot to another
// primary in steps (IMPORTING/MIGRATING, MIGRATE of its keys a few at a time, SETSLOT NODE).
TEST_F(ClusterTest, SlotMigratedMidSaleEveryReservationAnsweredSaleExact) {
  const uint16_t from = cluster_->ports()[0];
  const uint16_t to = cluster_->ports()[2];
  const std::string id = ActivityOn(from, "moving");
  const int slot = redis::KeySlot(id);
  constexpr int kStock = 300;
  constexpr int kBuyers = 400;
  auto setup = io_.Run(scripts_->AsyncSetup(Activity(id, kStock), boost::asio::use_awaitable));
  ASSERT_TRUE(setup.ok()) << setup.error().ToString();

  std::vector<std::string> orders, users;
  for (int i = 0; i < kBuyers; ++i) {
    orders.push_back(fmt::format("o{}", i));
    users.push_back(fmt::format("u{}", i));
  }
  std::atomic<int> reserved = 0, sold_out = 0, unavailable = 0, other = 0;
  std::atomic<int> next = 0;
  std::promise<void> done;
  // Reservations go out a few at a time, paced, until every buyer has had one answer.
  std::function<void()> send_some = [&] {
    for (int k = 0; k < 4 && next < kBuyers; ++k) {
      const int i = next++;
      scripts_->Reserve(
          id, ReserveRequest{orders[i], users[i], 1, 1500},
          Handler<Reservation>([&, i](base::Result<Reservation> result) {
            if (result.ok() && result->outcome == Outcome::kReserved) {
              ++reserved;
            } else if (result.ok() && result->outcome == Outcome::kSoldOut) {
              ++sold_out;
            } else if (!result.ok() && result.error().code == base::ErrorCode::kUnavailable) {
              ++unavailable;  // did not run: the buyer may retry
            } else {
              ++other;
              ADD_FAILURE() << "buyer " << i << ": "
                            << (result.ok() ? "outcome" : result.error().ToString());
            }
            if (reserved + sold_out + unavailable + other == kBuyers) done.set_value();
          }));
    }
    if (next < kBuyers) {
      auto timer = std::make_shared<boost::asio::steady_timer>(io_.executor(), 5ms);
      timer->async_wait([timer, &send_some](const boost::system::error_code&) { send_some(); });
    }
  };
  io_.Call([&] { send_some(); });

  std::this_thread::sleep_for(100ms);
  cluster_->BeginMigration(slot, from, to);
  while (cluster_->MoveKeys(slot, from, to, 2) > 0) std::this_thread::sleep_for(30ms);
  std::this_thread::sleep_for(100ms);
  cluster_->FinishMigration(slot, to);
  ASSERT_EQ(done.get_future().wait_for(120s), std::future_status::ready);

  EXPECT_EQ(cluster_->PrimaryOf(slot), to);
  EXPECT_EQ(other.load(), 0);
  const auto status = Status(id);
  // Exact: every unit is either left or reserved, each reservation recorded once.
  EXPECT_EQ(status.reserved, reserved.load());
  EXPECT_EQ(status.remaining + status.reserved, kStock);
  EXPECT_EQ(status.stream_length, reserved.load());
  EXPECT_EQ(status.buyers, reserved.load());
  EXPECT_EQ(reserved.load(), kStock);  // 400 buyers for 300 units: sold out, even with retries
  const redis::ClusterRouter* router = connection_->cluster();
  const auto [moved, asked, retried] =
      io_.Call([&] { return std::tuple(router->moved(), router->asked(), router->retried()); });
  std::printf(
      "migration mid-sale: %d reserved, %d sold out, %d unavailable; MOVED %lu, ASK %lu, "
      "TRYAGAIN retries %lu\n",
      reserved.load(), sold_out.load(), unavailable.load(), moved, asked, retried);
  EXPECT_GE(moved + asked, 1u);  // the sale did follow the slot
}

// Reconciliation's scan of an activity's idempotency records (SCAN, a command without a key)
// finds them on whichever primary holds the activity's slot, and follows each node's cursor on
// that node (before: SCAN was routed by its cursor as if it were a key, so the records of an
// activity on any other node than the one "0" hashes to were never seen).
TEST_F(ClusterTest, IdempotencyRecordsAreFoundOnEveryPrimary) {
  const uint16_t cursor_node = cluster_->PrimaryOf(redis::KeySlot("0"));
  ActivityInspector inspector(*runner_, ns_);
  int checked_elsewhere = 0;
  for (const uint16_t port : cluster_->ports()) {
    const std::string id = ActivityOn(port, "idem");
    const ActivityKeys keys(ns_, id);
    // Enough records for several SCAN pages on the node (COUNT 1000), written on the node that
    // owns the slot: decided sales, decided draws, and records that name no order.
    constexpr int kRecords = 2500;
    std::set<std::string> expected;
    std::vector<std::string> set = {"MSET"};
    for (int i = 0; i < kRecords; ++i) {
      const std::string order_id = fmt::format("o-{}-{}", id, i);
      std::string value;
      if (i % 5 == 4) {
        value = "0|busy";  // not a decided success: no order named
      } else if (i % 5 == 3) {
        value = fmt::format("1|2|{}|u{}", order_id, i);  // a draw
        expected.insert(order_id);
      } else {
        value = "1|0|" + order_id;  // a sale
        expected.insert(order_id);
      }
      set.push_back(keys.Idempotency(fmt::format("t{}", i)));
      set.push_back(value);
    }
    auto stored = cluster_->Command(port, set);
    ASSERT_EQ(stored->type, REDIS_REPLY_STATUS) << (stored->str ? stored->str : "");

    auto found = io_.Run(inspector.IdempotentOrderIds(id));
    ASSERT_TRUE(found.ok()) << found.error().ToString();
    const std::set<std::string> got(found->begin(), found->end());
    EXPECT_EQ(got.size(), found->size()) << "an order id reported twice";
    EXPECT_EQ(got, expected) << "activity " << id << " on the primary at port " << port
                             << " (SCAN's cursor \"0\" hashes to the primary at port "
                             << cursor_node << "): " << got.size() << " of " << expected.size()
                             << " found";
    if (port != cursor_node) ++checked_elsewhere;
  }
  EXPECT_GE(checked_elsewhere, 2);  // the premise: activities off the cursor's node were checked
}

}  // namespace
}  // namespace flashsale::keyspace
