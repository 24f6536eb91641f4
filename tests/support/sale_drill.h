#pragma once
// The drills' sale under load and their whole check (issue "When Redis fails", point 6), shared by
// the drills on the private redis-server (tests/app/redis_failure_integration_test.cc) and on a
// replicated one (tests/app/redis_failover_integration_test.cc).
//
// SaleLoad: users u<i> buy one unit of the demo activity over keep-alive HTTP connections to a
// `flashsale serve`, each until a definite answer; a 503 or a broken connection is retried with
// the same Idempotency-Key. Every "reserved" reply's order id is kept: those are the orders the
// test saw acknowledged.
//
// ExpectWholeCheck: once the pipeline has drained, sold <= stock, the database rows = the units
// Redis holds after the repair, nobody above the limit, no order twice (load::VerifySale), and the
// acknowledged orders that are in the record; the ones that are not are counted and returned
// (acknowledged-but-lost), for the drill to assert 0 or to compare with what the service
// reported.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace flashsale::testing {

class SaleLoad {
 public:
  // `activity`: its purchase route is /api/v1/activities/<activity>/purchase.
  SaleLoad(uint16_t port, int64_t users, int threads, std::string activity = "demo");
  ~SaleLoad();
  SaleLoad(const SaleLoad&) = delete;
  SaleLoad& operator=(const SaleLoad&) = delete;

  void set_port(uint16_t port) { port_ = port; }
  // While held, no new request is sent (those under way finish): a drill lets the pipeline catch
  // up at a chosen point of the sale.
  void Hold(bool held) { held_ = held; }
  // Times the recovery after a kill: from here to the first reservation answered to a request
  // sent after a failure was seen (a request answered just before the kill does not count).
  void MarkKill();
  int64_t reserved();
  // Waits for every user to get a definite answer (bounded); true if they all did.
  bool Finish(std::chrono::milliseconds timeout);

  std::vector<std::string> order_ids();
  int64_t recovered_ms();
  int64_t retries() const { return retries_; }
  int64_t unknown_outcomes() const { return unknown_; }
  bool retry_after_on_every_503() const { return retry_after_missing_ == 0; }

 private:
  void Join();
  void Run(int first, int step);

  std::atomic<uint16_t> port_;
  const int64_t users_;
  const std::string path_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> held_{false};
  std::atomic<int64_t> finished_{0};
  std::atomic<int64_t> retries_{0};
  std::atomic<int64_t> unknown_{0};
  std::atomic<int64_t> retry_after_missing_{0};
  std::mutex mutex_;
  std::vector<std::string> order_ids_;  // guarded by mutex_
  std::optional<std::chrono::steady_clock::time_point> kill_at_;
  std::optional<std::chrono::steady_clock::time_point> failed_at_;
  int64_t recovered_ms_ = -1;
  std::vector<std::thread> workers_;
};

struct WholeCheckOptions {
  std::string redis_url;  // the Redis that serves the sale now
  std::string key_namespace = "fs";
  std::string db_path;  // the SQLite record
  std::string activity = "demo";
  int64_t stock = 0;
  std::vector<std::string> acknowledged;  // order ids the test was told "reserved"
};

struct WholeCheckResult {
  int64_t sold = -1;            // live units in the record
  int64_t lost = -1;            // acknowledged order ids in neither the record nor (so) Redis
  std::vector<size_t> lost_at;  // their positions in `acknowledged`
};

// Every part of the check but the acknowledged-lost count is asserted here (gtest EXPECT/ADD_
// FAILURE); that count is returned for the caller to assert.
WholeCheckResult ExpectWholeCheck(const WholeCheckOptions& options);

// One integer from a SQLite file, or -1.
int64_t SqliteScalar(const std::string& db_path, const std::string& sql);
// The first column of every row, as text (empty when the file cannot be read).
std::vector<std::string> SqliteColumn(const std::string& db_path, const std::string& sql);

}  // namespace flashsale::testing
