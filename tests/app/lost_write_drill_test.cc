// Drills of the issue "Lost writes caught from the data" (point 5), on real processes: a
// `flashsale serve` on a TCP redis-server started by the test, with its own SQLite record.
//
// 1. Behind a forwarder the test controls (tests/support/tcp_proxy.h, a stand-in for a Redis proxy
//    or a managed endpoint): serve's connections go through it to redis-server A. After some
//    sales, a second redis-server B is started from A's snapshot of before the last ones, and the
//    forwarder sends the bytes of serve's open connections to B between two requests. No
//    connection breaks, so serve makes no handshake and sees no run_id: only the data can tell.
//    The next purchase finds B behind the write sequence serve saw acknowledged: refused (503)
//    before anything is written, the activity frozen (sequence_behind), repaired (the record's
//    orders B lacks applied again), and the sale ends exact.
// 2. Under load (the built-in load generator, load::RunLoad, 128 keep-alive connections, so the
//    service sends batches of reservations): a redis-server with AOF (everysec) SIGKILLed and
//    started again from a copy of its AOF directory taken seconds before. The sale ends exact, no
//    order stream entry was written between the kill and the end of the repair (entries the
//    record persisted, by their ids, and every entry written on the restarted server, read as it
//    was written: each carries the repair's epoch in its write sequence), and the acknowledged
//    orders the cut AOF lost are counted by the test against the replies the load saw and
//    compared with what the service reports (durability async loses them; that is the mode's
//    known cost).
//
// Each ends with the whole check (tests/support/sale_drill.h): record units <= stock, Redis
// remaining + record units = stock after the repair, nobody above the limit, no order twice, and
// the acknowledged orders that exist nowhere counted. Figures (time frozen, orders applied again,
// acknowledged orders lost) are printed, never asserted on timing. Every wait is bounded; every
// child is stopped by its PID at the end of its scope.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "keyspace/activity_scripts.h"
#include "load/load_generator.h"
#include "support/flashsale_process.h"
#include "support/http_client.h"
#include "support/redis_server.h"
#include "support/sale_drill.h"
#include "support/tcp_proxy.h"
#include "support/wait.h"

namespace flashsale {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;
using testing::Eventually;
using testing::FlashsaleProcess;
using testing::FreePort;
using testing::HttpClient;
using testing::HttpResult;
using testing::RedisServer;
using testing::RedisServerOptions;
using testing::TempDir;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kStartupTimeout = 60s;
constexpr auto kProgressTimeout = 60s;

json::value Parse(const std::string& body) {
  boost::system::error_code error;
  json::value value = json::parse(body, error);
  return error ? json::value() : value;
}

// The integer at `path` in `value`, or -1.
int64_t IntAt(const json::value& value, std::initializer_list<std::string_view> path) {
  const json::value* at = &value;
  for (std::string_view key : path) {
    if (!at->is_object()) return -1;
    const json::value* next = at->as_object().if_contains(key);
    if (next == nullptr) return -1;
    at = next;
  }
  return at->is_int64() ? at->as_int64() : -1;
}

std::string StringAt(const json::value& value, std::string_view key) {
  if (!value.is_object()) return "";
  const json::value* at = value.as_object().if_contains(key);
  return at != nullptr && at->is_string() ? std::string(at->as_string()) : "";
}

int64_t NowMs() { return base::SystemClock::Instance().NowMs(); }

// The milliseconds part of a stream entry id ("1718000000000-3"), or -1.
int64_t IdMs(std::string_view id) {
  const size_t dash = id.find('-');
  if (dash == std::string_view::npos || dash == 0) return -1;
  try {
    return std::stoll(std::string(id.substr(0, dash)));
  } catch (const std::exception&) {
    return -1;
  }
}

// The epoch of a write sequence field s = "epoch.seq", or -1.
int64_t EpochOf(std::string_view s) {
  const size_t dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0) return -1;
  try {
    return std::stoll(std::string(s.substr(0, dot)));
  } catch (const std::exception&) {
    return -1;
  }
}

// A `flashsale serve` of the drills, its admin token, and a client.
class Serve {
 public:
  Serve(const TempDir& tmp, const std::string& redis_url, const std::string& ns,
        std::vector<std::string> more)
      : data_dir_(tmp / "data"), port_(FreePort()) {
    std::vector<std::string> args = {"serve",
                                     "--listen",
                                     fmt::format("127.0.0.1:{}", port_),
                                     "--data-dir",
                                     data_dir_,
                                     "--redis-url",
                                     redis_url,
                                     "--key-namespace",
                                     ns,
                                     "--threads",
                                     "2"};
    args.insert(args.end(), more.begin(), more.end());
    process_ =
        std::make_unique<FlashsaleProcess>(FLASHSALE_BINARY, args, tmp / "serve.log", data_dir_);
  }

  ::testing::AssertionResult Start() {
    auto healthy = testing::WaitHealthy(*process_, port_, kStartupTimeout);
    if (!healthy) return healthy;
    token_ = testing::ReadFile(data_dir_ + "/admin-token");
    while (!token_.empty() && (token_.back() == '\n' || token_.back() == '\r')) token_.pop_back();
    client_ = std::make_unique<HttpClient>("127.0.0.1", port_);
    return ::testing::AssertionSuccess();
  }

  uint16_t port() const { return port_; }
  std::string db_path() const { return data_dir_ + "/flashsale.db"; }
  std::string Log() const { return process_->Log(); }
  HttpClient& client() { return *client_; }
  std::map<std::string, std::string> Admin() const {
    return {{"Authorization", "Bearer " + token_}};
  }
  json::value RedisStatus() { return Parse(client_->Get("/api/v1/admin/redis", Admin()).body); }
  json::value ActivityStatus(const std::string& id) {
    return Parse(client_->Get("/api/v1/admin/activities/" + id, Admin()).body);
  }

 private:
  std::string data_dir_;
  uint16_t port_;
  std::unique_ptr<FlashsaleProcess> process_;
  std::string token_;
  std::unique_ptr<HttpClient> client_;
};

// --- Drill 1: behind a forwarder, sent to an older copy of the server ---------------------------

class ProxyDrill : public ::testing::Test {
 protected:
  static constexpr int64_t kStock = 10;

  HttpResult Buy(const std::string& user) {
    HttpResult result =
        serve_->client().Post("/api/v1/activities/drill/purchase", "", {{"X-User-Id", user}});
    const json::value body = Parse(result.body);
    if (result.status == 200 && IntAt(body, {"code"}) == 1) {
      acknowledged_.push_back(StringAt(body, "order_id"));
    }
    return result;
  }

  // Until the record holds `orders` orders of the sale (bounded).
  ::testing::AssertionResult WaitPersisted(int64_t orders) {
    int64_t seen = -1;
    const bool done = Eventually(
        [&] {
          seen = IntAt(serve_->ActivityStatus("drill"), {"persisted", "orders"});
          return seen == orders;
        },
        kProgressTimeout, 100ms);
    if (done) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "the record holds " << seen << " orders, not " << orders << "; serve log:\n"
           << serve_->Log();
  }

  TempDir tmp_{"fs-proxy-drill"};
  std::string ns_ = testing::UniqueNamespace();
  RedisServer a_;
  testing::TcpProxy proxy_{a_.port()};
  std::unique_ptr<Serve> serve_;
  std::vector<std::string> acknowledged_;  // order ids the test was told "reserved"
};

// A proxy that sends serve's open connections to an older copy of the server: caught from the
// write sequence at the next purchase, with no reconnect, no handshake and no run_id seen.
TEST_F(ProxyDrill, AnOlderCopyBehindTheSameConnectionsIsCaughtFromTheSequence) {
  // The reconciliation job is left out (0): it would apply the record's orders to B too, on its
  // own schedule, and the repair's count of orders applied again would depend on when it ran.
  serve_ = std::make_unique<Serve>(
      tmp_, fmt::format("redis://127.0.0.1:{}", proxy_.port()), ns_,
      std::vector<std::string>{"--identity", "gateway", "--registry-poll-ms", "100",
                               "--reconcile-every-ms", "0", "--log-level", "info"});
  ASSERT_TRUE(serve_->Start()) << serve_->Log();
  const int64_t now = NowMs();
  const HttpResult created = serve_->client().Post(
      "/api/v1/admin/activities",
      fmt::format(R"({{"id":"drill","title":"Drill","stock":{},"per_user_limit":1,)"
                  R"("start_ms":{},"end_ms":{}}})",
                  kStock, now - 1000, now + 3'600'000),
      serve_->Admin());
  ASSERT_EQ(created.status, 201) << created.body;

  // 3 sold and persisted; A's snapshot then, with the repair's lock in it only (so that B comes
  // up with the repair held by the test, and the frozen sale can be looked at without timing).
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(Buy(fmt::format("u{}", i)).status, 200);
  ASSERT_TRUE(WaitPersisted(3));
  const std::string lock = ns_ + ":jobs:{repair}:lock";
  ASSERT_EQ(a_.String({"SET", lock, "held-by-the-drill"}), "OK");
  ASSERT_EQ(a_.String({"SAVE"}), "OK");
  ASSERT_EQ(a_.Integer({"DEL", lock}), 1);
  const std::string older = tmp_ / "older.rdb";
  fs::copy_file(a_.dir() + "/dump.rdb", older);
  // 3 more, acknowledged and persisted: what B will lack.
  for (int i = 4; i <= 6; ++i) {
    const HttpResult bought = Buy(fmt::format("u{}", i));
    ASSERT_EQ(bought.status, 200) << bought.body;
    ASSERT_EQ(IntAt(Parse(bought.body), {"code"}), 1) << bought.body;
  }
  ASSERT_TRUE(WaitPersisted(6));

  // B: another redis-server, started from A's older snapshot.
  RedisServer b;
  b.Kill();
  fs::copy_file(older, b.dir() + "/dump.rdb", fs::copy_options::overwrite_existing);
  b.Start();
  const keyspace::ActivityKeys keys(ns_, "drill");
  ASSERT_EQ(b.String({"GET", keys.stock()}), "7");
  ASSERT_EQ(b.Integer({"EXISTS", lock}), 1);
  ASSERT_EQ(a_.String({"GET", keys.stock()}), "4");

  // Between two requests, serve's connections are sent to B: no connection is made to the proxy
  // from here on (no reconnect, so no handshake).
  const uint64_t accepted = proxy_.accepted();
  proxy_.Switch(b.port());

  // u4 again: refused before anything is written (without the check: reserved a second time).
  const HttpResult again = Buy("u4");
  EXPECT_EQ(again.status, 503) << again.body;
  EXPECT_NE(again.body.find("paused"), std::string::npos) << again.body;
  EXPECT_TRUE(again.headers.contains("retry-after")) << again.body;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Buy(fmt::format("f{}", i)).status, 503);
  EXPECT_EQ(b.String({"GET", keys.stock()}), "7") << "a unit was sold while frozen";
  const json::value frozen = serve_->RedisStatus();
  ASSERT_TRUE(frozen.is_object()) << frozen;
  const json::array& now_frozen = frozen.at("activities").at("frozen").as_array();
  ASSERT_EQ(now_frozen.size(), 1u) << frozen;
  EXPECT_EQ(now_frozen[0].at("activity_id").as_string(), "drill");
  EXPECT_EQ(now_frozen[0].at("reason").as_string(), "sequence_behind") << frozen;
  EXPECT_EQ(IntAt(now_frozen[0], {"redis_holds", "seq"}), 3) << frozen;
  EXPECT_EQ(IntAt(now_frozen[0], {"floor", "seq"}), 6) << frozen;
  EXPECT_TRUE(serve_->ActivityStatus("drill").at("frozen").as_bool());
  // Caught from the data alone: the run_id watch saw nothing (the startup's servers only).
  EXPECT_FALSE(frozen.at("frozen").as_bool()) << frozen;
  for (const json::value& event : frozen.at("events").as_array()) {
    EXPECT_TRUE(event.at("startup").as_bool()) << "a server event was seen: " << frozen;
  }
  EXPECT_EQ(proxy_.accepted(), accepted) << "serve reconnected";

  // The repair let go: B gets the 3 orders of the record it lacks, u4 cannot buy twice.
  ASSERT_EQ(b.Integer({"DEL", lock}), 1);
  const auto released_at = Clock::now();
  HttpResult after;
  ASSERT_TRUE(Eventually(
      [&] {
        after = Buy("u4");
        return after.status != 503;
      },
      kProgressTimeout, 50ms))
      << serve_->Log();
  const int64_t selling_again_ms = testing::MsSince(released_at);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(IntAt(Parse(after.body), {"code"}), 0) << "u4 bought twice: " << after.body;
  EXPECT_EQ(b.String({"GET", keys.stock()}), "4") << "the 3 persisted orders not applied again";
  const json::value repaired = serve_->RedisStatus();
  ASSERT_TRUE(repaired.is_object()) << repaired;
  EXPECT_TRUE(repaired.at("activities").at("frozen").as_array().empty()) << repaired;
  const json::array& recent = repaired.at("activities").at("recent").as_array();
  ASSERT_FALSE(recent.empty()) << repaired;
  const json::value& freeze = recent.back();
  EXPECT_EQ(StringAt(freeze, "reason"), "sequence_behind");
  EXPECT_EQ(IntAt(freeze, {"orders_applied"}), 3) << repaired;
  EXPECT_EQ(IntAt(freeze, {"oversold_units"}), 0) << repaired;
  EXPECT_GE(IntAt(freeze, {"refused"}), 6) << repaired;

  // The rest of the sale: 4 units left for 14 new buyers; then the whole check on B.
  int64_t sold = 0;
  for (int i = 7; i <= 20; ++i) {
    const HttpResult bought = Buy(fmt::format("u{}", i));
    ASSERT_EQ(bought.status, 200) << bought.body;
    if (IntAt(Parse(bought.body), {"code"}) == 1) ++sold;
  }
  EXPECT_EQ(sold, 4);
  ASSERT_TRUE(WaitPersisted(kStock));
  const testing::WholeCheckResult checked =
      testing::ExpectWholeCheck({.redis_url = b.tcp_url(),
                                 .key_namespace = ns_,
                                 .db_path = serve_->db_path(),
                                 .activity = "drill",
                                 .stock = kStock,
                                 .acknowledged = acknowledged_});
  EXPECT_EQ(checked.sold, kStock);
  EXPECT_EQ(checked.lost, 0) << "an acknowledged order was lost";
  const std::string metrics = serve_->client().Get("/metrics").body;
  EXPECT_NE(metrics.find("flashsale_repair_acknowledged_lost_total 0\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("flashsale_redis_events_total 0\n"), std::string::npos) << metrics;
  EXPECT_EQ(proxy_.accepted(), accepted) << "serve reconnected";
  std::printf(
      "drill 5.3 (proxy sent serve's connections to an older copy): activity 'drill' frozen %lld "
      "ms (sequence_behind; the repair held by the test until it had looked), selling again %lld "
      "ms after the repair was let go; %lld orders applied again; %lld purchases refused while "
      "frozen; %lld acknowledged orders lost (the service counted %s); %zu acknowledged, %lld "
      "units in the record of %lld\n",
      static_cast<long long>(IntAt(freeze, {"thawed_ms"}) - IntAt(freeze, {"since_ms"})),
      static_cast<long long>(selling_again_ms),
      static_cast<long long>(IntAt(freeze, {"orders_applied"})),
      static_cast<long long>(IntAt(freeze, {"refused"})), static_cast<long long>(checked.lost),
      metrics.find("flashsale_repair_acknowledged_lost_total 0\n") != std::string::npos ? "0"
                                                                                        : "more",
      acknowledged_.size(), static_cast<long long>(checked.sold), static_cast<long long>(kStock));
}

// --- Drill 2: under load, Redis restarted from an AOF cut seconds back --------------------------

// Every entry written to an order stream from `after_ms` on, read as it is written (polled every
// 20 ms on its own thread: the pipeline trims the entries it persisted, every few seconds, and
// never the newest ones), with its write sequence field `s`.
class StreamFollower {
 public:
  StreamFollower(const RedisServer& redis, std::string stream, int64_t after_ms)
      : redis_(redis), stream_(std::move(stream)), last_(fmt::format("{}-0", after_ms)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~StreamFollower() { Stop(); }
  StreamFollower(const StreamFollower&) = delete;
  StreamFollower& operator=(const StreamFollower&) = delete;

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // id -> s ("" when the entry has none).
  const std::map<std::string, std::string>& entries() const { return entries_; }
  // The order intents in them (an entry holds a reserve call's batch: one `o` field each).
  int64_t intents() const { return intents_; }

 private:
  void Run() {
    while (!stop_) {
      try {
        const testing::SyncReply range =
            redis_.Command({"XRANGE", stream_, "(" + last_, "+", "COUNT", "1000"});
        if (range && range->type == REDIS_REPLY_ARRAY) {
          for (size_t i = 0; i < range->elements; ++i) {
            const redisReply* entry = range->element[i];
            const std::string id(entry->element[0]->str, entry->element[0]->len);
            std::string s;
            const redisReply* fields = entry->element[1];
            for (size_t f = 0; f + 1 < fields->elements; f += 2) {
              const std::string_view name(fields->element[f]->str, fields->element[f]->len);
              if (name == "s") s.assign(fields->element[f + 1]->str, fields->element[f + 1]->len);
              if (name == "o") ++intents_;
            }
            entries_[id] = s;
            last_ = id;
          }
          if (range->elements == 1000) continue;
        }
      } catch (const std::exception&) {
        // Redis unreachable for a moment: the next round
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  const RedisServer& redis_;
  const std::string stream_;
  std::string last_;
  std::map<std::string, std::string> entries_;
  int64_t intents_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The AOF directory of a Redis 7 (appendonlydir: a manifest, a base file and incremental files)
// copied as it is, mid-write: the last incremental file may end in the middle of a command, which
// Redis truncates when it loads it (aof-load-truncated, on by default).
void CopyAof(const std::string& from_dir, const std::string& to) {
  fs::remove_all(to);
  fs::copy(from_dir + "/appendonlydir", to, fs::copy_options::recursive);
}

TEST(LostWriteDrill, RedisRestartedFromAnAofCutSecondsBackUnderLoadIsRepairedExactly) {
  // The load runs for kLoadSeconds (or kRequests), the kill comes about 3 s in, so that the sale
  // goes on after the repair; the stock runs out after the restart in most runs, so that the
  // units the lost orders held are sold again and the sale ends at its stock, not above.
  constexpr int64_t kStock = 40000;
  constexpr int64_t kRequests = 400000;
  constexpr double kLoadSeconds = 15;
  TempDir tmp("fs-aof-drill");
  const std::string ns = testing::UniqueNamespace();
  // AOF on, fsync every second; no automatic rewrite during the drill, so that the directory
  // copied is one manifest's files.
  RedisServer redis(RedisServerOptions{.appendonly = true,
                                       .appendfsync = "everysec",
                                       .extra_args = {"--auto-aof-rewrite-percentage", "0"}});
  Serve serve(tmp, redis.tcp_url(), ns,
              {"--demo", "--demo-stock", std::to_string(kStock), "--durability", "async",
               "--claim-idle-ms", "2000", "--log-level", "info"});
  ASSERT_TRUE(serve.Start()) << serve.Log();

  // The load: 128 connections, each user once (sequential ids), bounded by time and requests.
  load::LoadOptions options;
  options.port = serve.port();
  options.activity = "demo";
  options.connections = 128;
  options.threads = 2;
  options.requests = kRequests;
  options.duration_s = kLoadSeconds;
  options.users = kRequests;
  options.random_users = false;
  options.keep_order_ids = true;
  options.progress_interval_ms = 100;
  std::atomic<int64_t> reserved{0};
  options.progress = [&reserved](const load::LoadProgress& progress) {
    reserved = progress.reserved;
  };
  std::optional<base::Result<load::LoadReport>> report;
  std::thread loading([&] { report.emplace(load::RunLoad(options)); });
  struct Joined {
    std::thread& thread;
    ~Joined() {
      if (thread.joinable()) thread.join();
    }
  } joined{loading};

  // A copy of the AOF once the sale is under way, then more sales, then the kill: Redis comes
  // back from the copy, without what was written after it.
  ASSERT_TRUE(Eventually([&] { return reserved >= 1000; }, kProgressTimeout))
      << "the load did not get going; serve log:\n"
      << serve.Log();
  const std::string cut = tmp / "aof-cut";
  const auto cut_at = Clock::now();
  CopyAof(redis.dir(), cut);
  const int64_t reserved_at_cut = reserved;
  // Seconds of sales after the copy (at least 2 s, and 500 more reservations, bounded).
  Eventually([&] { return testing::MsSince(cut_at) >= 2000 && reserved >= reserved_at_cut + 500; },
             kProgressTimeout);
  const int64_t reserved_at_kill = reserved;
  const int64_t kill_ms = NowMs();
  const int64_t aof_age_ms = testing::MsSince(cut_at);
  redis.Kill();
  fs::remove_all(redis.dir() + "/appendonlydir");
  fs::copy(cut, redis.dir() + "/appendonlydir", fs::copy_options::recursive);
  redis.Start();
  const int64_t back_ms = NowMs();
  StreamFollower follower(redis, keyspace::ActivityKeys(ns, "demo").stream(), kill_ms);

  loading.join();
  ASSERT_TRUE(report.has_value() && report->ok())
      << (report.has_value() ? report->error().ToString() : "no report");
  const load::LoadReport& ran = **report;

  // The event's repair, as the service reports it.
  json::value status;
  ASSERT_TRUE(Eventually(
      [&] {
        status = serve.RedisStatus();
        if (!status.is_object() || status.at("frozen").as_bool()) return false;
        const json::array& events = status.at("events").as_array();
        return !events.empty() && !events.back().at("startup").as_bool() &&
               IntAt(events.back(), {"repaired_ms"}) > 0;
      },
      kProgressTimeout, 100ms))
      << status << "\n"
      << serve.Log();
  const json::value event = status.at("events").as_array().back();
  const int64_t repaired_ms = IntAt(event, {"repaired_ms"});
  const int64_t epoch = IntAt(event, {"repair", "epoch"});

  // The whole check, with the acknowledged orders lost counted against the load's replies.
  const testing::WholeCheckResult checked =
      testing::ExpectWholeCheck({.redis_url = redis.tcp_url(),
                                 .key_namespace = ns,
                                 .db_path = serve.db_path(),
                                 .activity = "demo",
                                 .stock = kStock,
                                 .acknowledged = ran.reserved_order_ids});
  follower.Stop();
  EXPECT_LE(ran.Count(1), kStock + checked.lost) << "more acknowledged than units and losses";
  // What the service counted, once the check above saw the pipeline drained (an activity's own
  // freeze and repair, if one came after the event's, counts on the same event).
  status = serve.RedisStatus();
  const json::value last = status.at("events").as_array().back();
  const int64_t reported_lost = IntAt(last, {"repair", "acknowledged_lost"});
  EXPECT_EQ(reported_lost, checked.lost) << "the service's count of acknowledged orders lost";

  // No entry between the kill and the end of the repair: by the ids of the entries the record
  // persisted (every order's entry), and by every entry written on the restarted server, each
  // with the repair's epoch (the repair writes none of its own).
  const int64_t in_window = testing::SqliteScalar(
      serve.db_path(),
      fmt::format("SELECT COUNT(*) FROM orders WHERE activity_id = 'demo' AND "
                  "CAST(substr(stream_id, 1, instr(stream_id, '-') - 1) AS INTEGER) "
                  "BETWEEN {} AND {}",
                  kill_ms, repaired_ms - 1));
  EXPECT_EQ(in_window, 0) << "orders persisted from entries written between the kill and the end "
                             "of the repair";
  const int64_t after_repair = testing::SqliteScalar(
      serve.db_path(),
      fmt::format("SELECT COUNT(*) FROM orders WHERE activity_id = 'demo' AND "
                  "CAST(substr(stream_id, 1, instr(stream_id, '-') - 1) AS INTEGER) >= {}",
                  repaired_ms));
  int64_t followed_early = 0;
  int64_t followed_old_epoch = 0;
  for (const auto& [id, s] : follower.entries()) {
    if (IdMs(id) < repaired_ms) {
      ++followed_early;
      ADD_FAILURE() << "entry " << id << " (s=" << s << ") written before the repair ended at "
                    << repaired_ms;
    }
    if (EpochOf(s) != epoch) {
      ++followed_old_epoch;
      ADD_FAILURE() << "entry " << id << " carries s=" << s << ", not the repair's epoch " << epoch;
    }
  }
  // The follower missed nothing: its entries hold every order sold on the restarted server.
  EXPECT_EQ(follower.intents(), after_repair)
      << "the follower saw " << follower.entries().size() << " entries with " << follower.intents()
      << " orders, the record holds " << after_repair << " orders sold after the repair";

  // Frozen per activity: the server's event froze every activity (one here); an activity's own
  // freeze (sequence_behind) after it, if any, is listed too.
  std::string activity_freezes;
  for (const json::value& freeze : status.at("activities").at("recent").as_array()) {
    activity_freezes += fmt::format(" '{}' {} {} ms ({} orders applied again);",
                                    StringAt(freeze, "activity_id"), StringAt(freeze, "reason"),
                                    IntAt(freeze, {"thawed_ms"}) - IntAt(freeze, {"since_ms"}),
                                    IntAt(freeze, {"orders_applied"}));
  }
  std::printf(
      "drill 5.4 (under load, Redis restarted from an AOF cut %lld ms back): %lld reserved at the "
      "cut, %lld at the kill; back %lld ms after the kill; activity 'demo' frozen %lld ms (the "
      "server's event: every activity of it), repaired %lld ms after the kill; %lld orders (%lld "
      "units) applied again;%s %lld acknowledged, %lld acknowledged orders lost (the service "
      "counted %lld), %lld units in the record of %lld; %lld entries followed on the restarted "
      "server, %lld orders in them (%lld before the repair's end, %lld not of epoch %lld), %lld "
      "orders persisted from entries between the kill and the repair's end, %lld after; requests: "
      "%lld answered, %lld "
      "503\n",
      static_cast<long long>(aof_age_ms), static_cast<long long>(reserved_at_cut),
      static_cast<long long>(reserved_at_kill), static_cast<long long>(back_ms - kill_ms),
      static_cast<long long>(IntAt(last, {"frozen_ms"})),
      static_cast<long long>(repaired_ms - kill_ms),
      static_cast<long long>(IntAt(last, {"repair", "orders_applied"})),
      static_cast<long long>(IntAt(last, {"repair", "units_applied"})),
      activity_freezes.empty() ? " no activity's own freeze;" : activity_freezes.c_str(),
      static_cast<long long>(ran.Count(1)), static_cast<long long>(checked.lost),
      static_cast<long long>(reported_lost), static_cast<long long>(checked.sold),
      static_cast<long long>(kStock), static_cast<long long>(follower.entries().size()),
      static_cast<long long>(follower.intents()), static_cast<long long>(followed_early),
      static_cast<long long>(followed_old_epoch), static_cast<long long>(epoch),
      static_cast<long long>(in_window), static_cast<long long>(after_repair),
      static_cast<long long>(ran.completed),
      static_cast<long long>(ran.http_statuses.contains(503) ? ran.http_statuses.at(503) : 0));
}

}  // namespace
}  // namespace flashsale
