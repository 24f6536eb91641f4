// Whole sales on a real 3-primary Redis Cluster (scripts/redis-cluster.sh), driven over HTTP by the
// load generator and verified afterwards against the cluster and the database:
// - one `flashsale serve` selling three activities placed on three different primaries;
// - three `flashsale serve` instances on one cluster and one SQLite file under one load, then a
//   restock made through one instance reaching the other two (their sold-out flags cleared).
// Counts only, never timings. Label `cluster`.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "load/load_generator.h"
#include "load/verify.h"
#include "redis/cluster.h"
#include "support/flashsale_process.h"
#include "support/http_client.h"
#include "support/redis_cluster.h"

namespace flashsale {
namespace {

using std::chrono::seconds;
using testing::FlashsaleProcess;
using testing::HttpClient;
using testing::RedisCluster;
using testing::TempDir;

constexpr std::string_view kAdminToken = "cluster-test-admin-token";
constexpr std::string_view kSecret = "cluster-test-secret-0123456789abcdef";

// `count` instances of `flashsale serve` on `cluster`, sharing one SQLite file, one secret and one
// admin token; only the first runs the scheduled jobs (any could: they take a lock).
class Instances {
 public:
  Instances(const RedisCluster& cluster, int count) : cluster_(cluster) {
    for (int i = 0; i < count; ++i) {
      const uint16_t port = testing::FreePort();
      const std::string data_dir = tmp_ / fmt::format("data{}", i);
      ports_.push_back(port);
      processes_.push_back(std::make_unique<FlashsaleProcess>(
          FLASHSALE_BINARY,
          std::vector<std::string>{"serve",
                                   "--listen",
                                   fmt::format("127.0.0.1:{}", port),
                                   "--data-dir",
                                   data_dir,
                                   "--redis-url",
                                   cluster.url(),
                                   "--db-url",
                                   "sqlite:" + db_path(),
                                   "--identity",
                                   "gateway",
                                   "--threads",
                                   "2",
                                   "--secret",
                                   std::string(kSecret),
                                   "--admin-token",
                                   std::string(kAdminToken),
                                   "--registry-poll-ms",
                                   "100",
                                   "--redis-timeout-ms",
                                   "5000",
                                   "--log-level",
                                   "warn"},
          tmp_ / fmt::format("serve{}.log", i), data_dir));
    }
  }

  ::testing::AssertionResult Start() {
    for (size_t i = 0; i < processes_.size(); ++i) {
      auto healthy = testing::WaitHealthy(*processes_[i], ports_[i], seconds(30));
      if (!healthy) return healthy << "\ninstance " << i << " log:\n" << processes_[i]->Log();
    }
    return ::testing::AssertionSuccess();
  }

  // An open activity with `stock` units, one per user, created through instance 0; waits
  // (bounded) until every instance knows it.
  ::testing::AssertionResult CreateActivity(const std::string& id, int64_t stock) {
    HttpClient client("127.0.0.1", ports_[0]);
    const std::string body = fmt::format(
        R"({{"id":"{}","stock":{},"per_user_limit":1,"start_ms":0,"end_ms":4000000000000}})", id,
        stock);
    auto created = client.Post("/api/v1/admin/activities", body, Admin());
    if (created.status != 200 && created.status != 201) {
      return ::testing::AssertionFailure() << created.status << " " << created.body;
    }
    for (uint16_t port : ports_) {
      HttpClient other("127.0.0.1", port);
      bool known = false;
      for (int attempt = 0; attempt < 300 && !known; ++attempt) {
        known = other.Get("/api/v1/activities/" + id).status == 200;
        if (!known) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!known)
        return ::testing::AssertionFailure() << "instance on " << port << " never saw " << id;
    }
    return ::testing::AssertionSuccess();
  }

  // Load spread over every instance.
  load::LoadOptions Load(const std::string& activity) const {
    load::LoadOptions options;
    options.port = ports_[0];
    for (size_t i = 1; i < ports_.size(); ++i)
      options.more_targets.emplace_back("127.0.0.1", ports_[i]);
    options.activity = activity;
    options.keep_order_ids = true;
    options.request_timeout_ms = 20000;
    options.connect_timeout_ms = 10000;
    return options;
  }

  load::VerifyOptions Verify(const std::string& activity, const load::LoadReport& report) const {
    load::VerifyOptions options;
    options.redis_url = cluster_.url();
    options.db_url = "sqlite:" + db_path();
    options.activity = activity;
    options.reserved_replies = report.Count(1);
    options.reserved_order_ids = report.reserved_order_ids;
    options.drain_timeout_ms = 60000;
    options.redis_timeout_ms = 5000;
    return options;
  }

  static std::map<std::string, std::string> Admin() {
    return {{"Authorization", "Bearer " + std::string(kAdminToken)}};
  }
  std::string db_path() const { return tmp_ / "flashsale.db"; }
  const std::vector<uint16_t>& ports() const { return ports_; }
  std::string Logs() const {
    std::string logs;
    for (const auto& process : processes_) logs += process->Log();
    return logs;
  }

 private:
  const RedisCluster& cluster_;
  TempDir tmp_{"fs-cluster"};
  std::vector<uint16_t> ports_;
  std::vector<std::unique_ptr<FlashsaleProcess>> processes_;
};

::testing::AssertionResult SoldExactly(const load::LoadReport& report, int64_t requests,
                                       int64_t stock) {
  const bool sold = report.completed == requests && report.ErrorCount() == 0 &&
                    report.Count(1) == stock && report.Count(-1) == requests - stock &&
                    static_cast<int64_t>(report.reserved_order_ids.size()) == stock;
  if (sold) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected " << stock << " reserved and "
                                       << requests - stock << " sold out of " << requests << "\n"
                                       << load::FormatReport(report, "load report:");
}

::testing::AssertionResult Verified(const base::Result<load::Verification>& verification) {
  if (!verification.ok()) {
    return ::testing::AssertionFailure() << "could not verify: " << verification.error().ToString();
  }
  if (verification->checks.size() != 8 || !verification->ok()) {
    return ::testing::AssertionFailure() << load::FormatVerification(*verification);
  }
  return ::testing::AssertionSuccess();
}

// An activity id whose slot is served by the primary on `port`.
std::string ActivityOn(const RedisCluster& cluster, uint16_t port, std::string_view stem) {
  for (int i = 0;; ++i) {
    std::string id = fmt::format("{}{}", stem, i);
    if (cluster.PrimaryOf(redis::KeySlot(id)) == port) return id;
  }
}

TEST(ClusterSaleTest, ThreeActivitiesOnThreePrimariesSellExactlyAndVerify) {
  RedisCluster cluster;
  Instances serve(cluster, 1);
  ASSERT_TRUE(serve.Start());
  std::set<uint16_t> primaries;
  for (uint16_t port : cluster.ports()) {
    const std::string id = ActivityOn(cluster, port, "spread");
    primaries.insert(cluster.PrimaryOf(redis::KeySlot(id)));
    ASSERT_TRUE(serve.CreateActivity(id, 50));
    load::LoadOptions options = serve.Load(id);
    options.connections = 8;
    options.requests = 80;
    options.users = 80;
    options.user_prefix = id + "-u";
    auto report = load::RunLoad(options);
    ASSERT_TRUE(report.ok()) << report.error().ToString();
    EXPECT_TRUE(SoldExactly(*report, 80, 50)) << serve.Logs();
    EXPECT_TRUE(Verified(load::VerifySale(serve.Verify(id, *report)))) << id;
    // The keys are where the slot map says: on that primary, nowhere else.
    const std::string stock_key = fmt::format("fs:seckill:{{{}}}:stock", id);
    for (uint16_t other : cluster.ports()) {
      EXPECT_EQ(cluster.Command(other, {"EXISTS", stock_key})->integer, other == port ? 1 : 0);
    }
  }
  EXPECT_EQ(primaries.size(), 3u);

  // Reconciliation on the cluster: every activity checked on its own primary, no drift.
  HttpClient admin("127.0.0.1", serve.ports()[0]);
  auto reconciled = admin.Post("/api/v1/admin/jobs/reconcile", "", Instances::Admin());
  ASSERT_EQ(reconciled.status, 200) << reconciled.body;
  size_t checked = 0;
  for (size_t at = reconciled.body.find("\"drift\":"); at != std::string::npos;
       at = reconciled.body.find("\"drift\":", at + 1)) {
    ++checked;
    EXPECT_EQ(reconciled.body.substr(at + 8, 2), "0,") << reconciled.body;
  }
  EXPECT_EQ(checked, 3u) << reconciled.body;
}

TEST(ClusterSaleTest, ThreeInstancesOneLoadExactAndARestockReachesEveryInstance) {
  RedisCluster cluster;
  Instances instances(cluster, 3);
  ASSERT_TRUE(instances.Start());
  const std::string id = "many";
  constexpr int64_t kStock = 150;
  constexpr int64_t kRequests = 300;
  ASSERT_TRUE(instances.CreateActivity(id, kStock));

  load::LoadOptions options = instances.Load(id);
  options.connections = 12;  // 4 per instance
  options.threads = 2;
  options.requests = kRequests;
  options.users = kRequests;
  auto report = load::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_TRUE(SoldExactly(*report, kRequests, kStock)) << instances.Logs();
  ASSERT_TRUE(Verified(load::VerifySale(instances.Verify(id, *report))));

  // Every instance has answered sold out (and flagged it locally). A restock of 3 units through
  // instance 1 must reach all three: one new buyer per instance gets a unit.
  for (size_t i = 0; i < instances.ports().size(); ++i) {
    HttpClient client("127.0.0.1", instances.ports()[i]);
    auto answer = client.Post("/api/v1/activities/" + id + "/purchase", "",
                              {{"X-User-Id", fmt::format("before{}", i)}});
    EXPECT_NE(answer.body.find("\"sold_out\""), std::string::npos) << answer.body;
  }
  HttpClient admin("127.0.0.1", instances.ports()[1]);
  auto restock =
      admin.Post("/api/v1/admin/activities/" + id + "/stock", R"({"units":3})", Instances::Admin());
  ASSERT_EQ(restock.status, 200) << restock.body;
  std::vector<std::string> order_ids;
  for (size_t i = 0; i < instances.ports().size(); ++i) {
    HttpClient client("127.0.0.1", instances.ports()[i]);
    std::string body;
    // The other instances see the change within their registry poll (100 ms); bounded wait.
    for (int attempt = 0; attempt < 100; ++attempt) {
      body = client
                 .Post("/api/v1/activities/" + id + "/purchase", "",
                       {{"X-User-Id", fmt::format("after{}", i)}})
                 .body;
      if (body.find("\"reserved\"") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_NE(body.find("\"reserved\""), std::string::npos) << "instance " << i << ": " << body;
    const size_t at = body.find("\"order_id\":\"");
    if (at != std::string::npos) order_ids.push_back(body.substr(at + 12, 26));
  }
  // The whole sale: 153 units, all sold, each once.
  load::LoadReport all = *report;
  all.reserved_order_ids.insert(all.reserved_order_ids.end(), order_ids.begin(), order_ids.end());
  load::VerifyOptions verify = instances.Verify(id, all);
  verify.reserved_replies = kStock + static_cast<int64_t>(order_ids.size());
  auto verification = load::VerifySale(verify);
  EXPECT_TRUE(Verified(verification));
  EXPECT_EQ(order_ids.size(), 3u);
}

// A lottery with an admission queue, on the cluster: every ticket answered once by the queue
// consumer, exactly the prizes won, every win persisted (admin status, bounded wait).
TEST(ClusterSaleTest, AQueuedLotteryAnswersEveryTicketAndPersistsEveryWin) {
  RedisCluster cluster;
  Instances serve(cluster, 1);
  ASSERT_TRUE(serve.Start());
  const uint16_t port = serve.ports()[0];
  HttpClient admin("127.0.0.1", port);
  auto created = admin.Post(
      "/api/v1/admin/activities",
      R"({"id":"queued","title":"Q","kind":"lottery","per_user_limit":1,"start_ms":0,)"
      R"("end_ms":4000000000000,"prizes":[{"id":"mug","name":"Mug","weight":1,"stock":20}],)"
      R"("no_prize_weight":0,"admission":"queue","queue_capacity":1000})",
      Instances::Admin());
  ASSERT_TRUE(created.status == 200 || created.status == 201) << created.body;
  constexpr int kUsers = 50;
  std::vector<std::string> tickets;
  HttpClient client("127.0.0.1", port);
  for (int i = 0; i < kUsers; ++i) {
    auto queued =
        client.Post("/api/v1/activities/queued/draw", "", {{"X-User-Id", fmt::format("q{}", i)}});
    ASSERT_EQ(queued.status, 202) << queued.body;
    const size_t at = queued.body.find("\"ticket_url\":\"");
    ASSERT_NE(at, std::string::npos) << queued.body;
    const size_t start = at + 14;
    tickets.push_back(queued.body.substr(start, queued.body.find('"', start) - start));
  }
  int won = 0, sold_out = 0;
  for (int i = 0; i < kUsers; ++i) {
    std::string body;
    int status = 0;
    for (int attempt = 0; attempt < 20 && status != 200; ++attempt) {
      auto polled =
          client.Get(tickets[i] + "?wait_ms=3000", {{"X-User-Id", fmt::format("q{}", i)}});
      status = polled.status;
      body = polled.body;
    }
    ASSERT_EQ(status, 200) << "ticket " << i << ": " << body;
    if (body.find("\"won\"") != std::string::npos) ++won;
    if (body.find("\"sold_out\"") != std::string::npos) ++sold_out;
  }
  EXPECT_EQ(won, 20);
  EXPECT_EQ(sold_out, kUsers - 20);
  std::string status_body;
  bool persisted = false;
  for (int attempt = 0; attempt < 300 && !persisted; ++attempt) {
    status_body = admin.Get("/api/v1/admin/activities/queued", Instances::Admin()).body;
    persisted = status_body.find("\"persisted\":{\"orders\":20,") != std::string::npos;
    if (!persisted) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(persisted) << status_body;
}

// The activity's slot moves to another primary while the sale runs (SETSLOT IMPORTING/MIGRATING,
// MIGRATE of its keys two at a time, SETSLOT NODE): the instance follows ASK, TRYAGAIN and MOVED;
// every request is answered, nothing is an error, and the whole sale verifies exactly.
TEST(ClusterSaleTest, ASlotMigratedMidSaleKeepsTheSaleExact) {
  RedisCluster cluster;
  Instances serve(cluster, 1);
  ASSERT_TRUE(serve.Start());
  const uint16_t from = cluster.ports()[0];
  const uint16_t to = cluster.ports()[1];
  const std::string id = ActivityOn(cluster, from, "moving");
  const int slot = redis::KeySlot(id);
  constexpr int64_t kStock = 300;
  constexpr int64_t kRequests = 900;
  ASSERT_TRUE(serve.CreateActivity(id, kStock));

  load::LoadOptions options = serve.Load(id);
  options.mode = load::LoadMode::kOpen;  // spread over ~3 s, so the migration lands mid-sale
  options.rate = 300;
  options.connections = 16;
  options.requests = kRequests;
  options.users = kRequests;
  base::Result<load::LoadReport> report = base::Error{base::ErrorCode::kInternal, "not run"};
  std::thread sale([&] { report = load::RunLoad(options); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  cluster.BeginMigration(slot, from, to);
  while (cluster.MoveKeys(slot, from, to, 2) > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  cluster.FinishMigration(slot, to);
  sale.join();

  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(cluster.PrimaryOf(slot), to);
  EXPECT_EQ(report->completed, kRequests);
  EXPECT_EQ(report->ErrorCount(), 0) << load::FormatReport(*report, "load report:");
  // Every answer is reserved or sold out, or a 503 (did not run) if a retry ran out of time.
  const int64_t unavailable =
      report->http_statuses.contains(503) ? report->http_statuses.at(503) : 0;
  EXPECT_EQ(report->Count(1) + report->Count(-1) + unavailable, kRequests)
      << load::FormatReport(*report, "load report:");
  EXPECT_EQ(report->Count(1), kStock) << load::FormatReport(*report, "load report:");
  EXPECT_TRUE(Verified(load::VerifySale(serve.Verify(id, *report)))) << serve.Logs();
  // And the keys are on the new primary only.
  const std::string stock_key = fmt::format("fs:seckill:{{{}}}:stock", id);
  EXPECT_EQ(cluster.Command(to, {"EXISTS", stock_key})->integer, 1);
}

}  // namespace
}  // namespace flashsale
