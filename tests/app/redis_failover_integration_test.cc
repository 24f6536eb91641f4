// Drill 6.3 of the issue "When Redis fails", on real processes: a primary and a replica
// redis-server started by the test, `flashsale serve` selling on the primary under load, the
// primary SIGKILLed mid-sale and the replica promoted (`REPLICAOF NO ONE`), once in
// `--durability async` and once in `--durability wait`. The replica's link to the primary runs
// through a forwarder (tests/support/tcp_proxy.h) that the test cuts a moment before the kill, so
// the replica misses the last writes, as when the primary's host or network fails first.
//
// How the service is pointed at the promoted replica, two ways:
// - live: serve reaches Redis through a second forwarder (a virtual IP, a DNS name, a proxy that
//   follows the failover) that the test moves to the promoted replica. serve keeps running: its
//   connections break, reconnect to a server with another run_id, the sale freezes, the
//   lost-write repair runs (the record's orders the replica never received are applied again) and
//   the sale resumes;
// - restarted: serve is restarted with the replica's URL (SIGTERM, then serve again on the same
//   data directory), as an operator does. The new serve meets a run_id without a repair marker,
//   starts frozen, runs the repair and opens.
// In `wait` the test also starts a new replica for the promoted server first (WAIT 1 needs one),
// as the operator would.
//
// Each run ends with the whole check (tests/support/sale_drill.h): sold <= stock, database rows =
// units Redis holds after the repair, nobody above the limit, no order twice, and the
// acknowledged orders that exist nowhere counted against the replies the test saw. In `wait` that
// count is 0. In `async` it is compared with what the service reported: a serve that kept
// running remembers what it acknowledged and counts exactly the orders found nowhere; a restarted
// one can only count lost orders that left a trace on the promoted server (an idempotency record
// or a stream entry, written by the same script as the order), so it never reports more than the
// test proves and usually 0.
//
// Every wait is bounded; figures (recovery time, losses) are printed, never asserted.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/flashsale_process.h"
#include "support/http_client.h"
#include "support/redis_server.h"
#include "support/sale_drill.h"
#include "support/tcp_proxy.h"
#include "support/wait.h"

namespace flashsale {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FlashsaleProcess;
using testing::FreePort;
using testing::HttpClient;
using testing::RedisServer;
using testing::RedisServerOptions;
using testing::SaleLoad;
using testing::TempDir;
using SteadyClock = std::chrono::steady_clock;

constexpr auto kStartupTimeout = seconds(60);
constexpr int64_t kStock = 300;
constexpr int64_t kUsers = 450;

using testing::Eventually;
using testing::MsSince;

// A server that replicates from 127.0.0.1:<primary_port> (0: a primary).
RedisServerOptions ReplicaOf(uint16_t primary_port) {
  RedisServerOptions options;
  options.extra_args = {"--repl-diskless-sync-delay", "0"};
  if (primary_port != 0) {
    options.extra_args.insert(options.extra_args.end(),
                              {"--replicaof", "127.0.0.1", std::to_string(primary_port)});
  }
  return options;
}

bool LinkUp(const RedisServer& replica) {
  return Eventually(
      [&] {
        return replica.String({"INFO", "replication"}).find("master_link_status:up") !=
               std::string::npos;
      },
      seconds(30), milliseconds(50));
}

std::unique_ptr<FlashsaleProcess> Serve(const TempDir& tmp, uint16_t port,
                                        const std::string& redis_url, const std::string& durability,
                                        const std::string& ns, const std::string& log) {
  return std::make_unique<FlashsaleProcess>(
      FLASHSALE_BINARY,
      std::vector<std::string>{"serve",
                               "--listen",
                               fmt::format("127.0.0.1:{}", port),
                               "--data-dir",
                               tmp / "data",
                               "--redis-url",
                               redis_url,
                               "--key-namespace",
                               ns,
                               "--demo",
                               "--demo-stock",
                               std::to_string(kStock),
                               "--threads",
                               "2",
                               "--durability",
                               durability,
                               "--durability-wait-ms",
                               "2000",
                               "--claim-idle-ms",
                               "2000"},
      tmp / log, tmp / "data");
}

struct Repaired {
  int64_t lost = -1;     // acknowledged_lost
  int64_t applied = -1;  // orders_applied
};

// What the repair the running serve confirmed last reported (admin status); -1: none.
Repaired ReportedRepair(uint16_t port, const std::string& data_dir) {
  std::string token = testing::ReadFile(data_dir + "/admin-token");
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  HttpClient client("127.0.0.1", port);
  Repaired repaired;
  Eventually(
      [&] {
        const testing::HttpResult result =
            client.Get("/api/v1/admin/redis", {{"Authorization", "Bearer " + token}});
        boost::system::error_code error;
        const json::value value = json::parse(result.body, error);
        if (error || !value.is_object() || value.at("frozen").as_bool()) return false;
        const json::array& events = value.at("events").as_array();
        if (events.empty() || events.back().at("repaired_ms").as_int64() == 0) return false;
        repaired.lost = events.back().at("repair").at("acknowledged_lost").as_int64();
        repaired.applied = events.back().at("repair").at("orders_applied").as_int64();
        return true;
      },
      seconds(30), milliseconds(100));
  return repaired;
}

enum class Pointing { kLive, kRestarted };

void Drill63(const std::string& durability, Pointing pointing) {
  TempDir tmp("fs-failover");
  const std::string ns = testing::UniqueNamespace();
  RedisServer primary(ReplicaOf(0));
  // The replica's link goes through a forwarder the test can cut (a partition).
  testing::TcpProxy link(primary.port());
  RedisServer replica(ReplicaOf(link.port()));
  ASSERT_TRUE(LinkUp(replica));
  // Streaming (the primary put the replica online after its first acknowledgement): writes made
  // before then reach the replica only once it is.
  ASSERT_TRUE(Eventually(
      [&] {
        return primary.String({"INFO", "replication"}).find("state=online") != std::string::npos;
      },
      seconds(30), milliseconds(50)));

  // What serve connects to (live: moved to the promoted replica by the test).
  testing::TcpProxy front(primary.port());
  const uint16_t port = FreePort();
  auto serve = Serve(tmp, port,
                     pointing == Pointing::kLive ? fmt::format("redis://127.0.0.1:{}", front.port())
                                                 : primary.tcp_url(),
                     durability, ns, "serve1.log");
  ASSERT_TRUE(testing::WaitHealthy(*serve, port, kStartupTimeout)) << serve->Log();

  SaleLoad load(port, kUsers, 6);
  ASSERT_TRUE(Eventually([&] { return load.reserved() >= 80; }, seconds(60))) << serve->Log();
  // The replica's link goes silent, the sale goes on on the primary for a moment, and the
  // primary dies: what the replica never received is what the promotion loses. In async buyers
  // were told "reserved" for some of it (the rest reached the record and is applied again by the
  // repair); in wait, WAIT 1 was not confirmed, so they were told the outcome is unknown.
  // The kill waits until the record holds some of the orders the replica missed (async), so that
  // the repair has something to apply again, or until some buyers were told the outcome is
  // unknown (wait, where each WAIT runs to its timeout), or 60 more were sold.
  const std::string db = tmp / "data/flashsale.db";
  const auto recorded = [&] {
    return testing::SqliteScalar(db, "SELECT COUNT(*) FROM orders WHERE activity_id = 'demo'");
  };
  const int64_t before = load.reserved();
  const int64_t unknown_before = load.unknown_outcomes();
  link.Cut();
  const int64_t recorded_at_cut = recorded();
  Eventually(
      [&] {
        return recorded() >= recorded_at_cut + 20 ||
               load.unknown_outcomes() >= unknown_before + 6 ||
               load.reserved() >= before + 60;  // stock left for the sale after the failover
      },
      seconds(30), milliseconds(10));
  std::cout << fmt::format("link cut: the record went from {} to {} orders before the kill\n",
                           recorded_at_cut, recorded());
  load.MarkKill();
  const auto killed_at = SteadyClock::now();
  primary.Kill();
  const int64_t reserved_at_kill = load.reserved();
  const int64_t behind = reserved_at_kill - before;
  ASSERT_EQ(replica.String({"REPLICAOF", "NO", "ONE"}), "OK");
  const int64_t promoted_ms = MsSince(killed_at);
  // wait: the promoted server needs a replica of its own for WAIT 1.
  std::unique_ptr<RedisServer> second_replica;
  if (durability == "wait") {
    second_replica = std::make_unique<RedisServer>(ReplicaOf(replica.port()));
    ASSERT_TRUE(LinkUp(*second_replica));
  }

  // The service pointed at the promoted replica.
  uint16_t again = port;
  if (pointing == Pointing::kLive) {
    front.Retarget(replica.port());
  } else {
    serve->Signal(SIGTERM);
    if (!serve->WaitExit(seconds(30)).has_value()) {
      serve->Signal(SIGKILL);
      ASSERT_TRUE(serve->WaitExit(seconds(30)).has_value());
    }
    again = FreePort();
    serve = Serve(tmp, again, replica.tcp_url(), durability, ns, "serve2.log");
    ASSERT_TRUE(testing::WaitHealthy(*serve, again, kStartupTimeout)) << serve->Log();
    load.set_port(again);
  }
  const int64_t serving_ms = MsSince(killed_at);
  ASSERT_TRUE(load.Finish(seconds(90))) << serve->Log();

  const Repaired repaired = ReportedRepair(again, tmp / "data");
  const int64_t reported = repaired.lost;
  const testing::WholeCheckResult checked =
      testing::ExpectWholeCheck({.redis_url = replica.tcp_url(),
                                 .key_namespace = ns,
                                 .db_path = tmp / "data/flashsale.db",
                                 .stock = kStock,
                                 .acknowledged = load.order_ids()});
  std::cout << fmt::format(
      "drill 6.3 ({}, {}): {} reserved while the replica's link was cut; replica promoted {} ms "
      "after the kill, serve pointed at it after {} ms, "
      "first reserved purchase after {} ms; {} acknowledged, {} acknowledged and lost (the "
      "service's repair reported {}; it applied {} orders of the record again); {} retries, {} "
      "unknown outcomes\n",
      durability, pointing == Pointing::kLive ? "live" : "serve restarted", behind, promoted_ms,
      serving_ms, load.recovered_ms(), load.reserved(), checked.lost, reported, repaired.applied,
      load.retries(), load.unknown_outcomes());
  if (!checked.lost_at.empty()) {
    std::cout << fmt::format(
        "the lost orders were acknowledged {} to {} (of {}; the link was cut after the {}th, the "
        "primary killed after the {}th)\n",
        checked.lost_at.front() + 1, checked.lost_at.back() + 1, load.reserved(), before,
        reserved_at_kill);
  }
  EXPECT_GE(load.recovered_ms(), 0) << "no purchase succeeded after the failover";
  EXPECT_TRUE(load.retry_after_on_every_503());
  ASSERT_GE(reported, 0) << "the repair did not report:\n" << serve->Log();
  EXPECT_LE(load.reserved(), kStock + checked.lost) << "more acknowledged than units and losses";
  if (pointing == Pointing::kLive) {
    EXPECT_EQ(reported, checked.lost) << "the service's count of acknowledged orders lost";
  } else {
    EXPECT_LE(reported, checked.lost) << "the service counted losses the test did not see";
  }
  if (durability == "wait") {
    EXPECT_EQ(checked.lost, 0) << "an order confirmed by the replica was lost";
    EXPECT_EQ(reported, 0);
  }
}

TEST(RedisFailoverDrill, Drill63PrimaryKilledReplicaPromotedMidSaleAsync) {
  Drill63("async", Pointing::kLive);
}
TEST(RedisFailoverDrill, Drill63PrimaryKilledReplicaPromotedMidSaleWait) {
  Drill63("wait", Pointing::kLive);
}
TEST(RedisFailoverDrill, Drill63PrimaryKilledReplicaPromotedServeRestartedAsync) {
  Drill63("async", Pointing::kRestarted);
}
TEST(RedisFailoverDrill, Drill63PrimaryKilledReplicaPromotedServeRestartedWait) {
  Drill63("wait", Pointing::kRestarted);
}

}  // namespace
}  // namespace flashsale
