// The order pipeline under faults, end to end: real `flashsale worker` processes persisting the
// order intents of a real redis-server into a real MariaDB, while workers are SIGKILLed (between
// the commit and the XACK, or anywhere under load), the database is stopped or crashes and comes
// back, consumers race on the same entries, and a poison entry keeps failing.
//
// Every test ends in the same exact check (ExpectExactlyOnce): once the group has nothing pending
// and nothing undelivered, the orders in the database are exactly the orders Redis recorded as
// reserved (same ids, users and quantities), none twice, their units are the units Redis
// reserved, and the dead-letter stream holds only what the test expects there.
//
// One MariaDB server per suite (a database per test), one redis-server per test. Every child
// process (workers, redis-server, mariadbd) is stopped by its PID at the end of its scope, also
// when an assertion fails; every wait is bounded; nothing asserts on timing.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <mariadb/mysql.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/subprocess.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/draw_queue.h"
#include "keyspace/embedded_scripts.h"
#include "keyspace/order_stream.h"
#include "keyspace/service_state.h"
#include "redis/scripts.h"
#include "service/jobs.h"
#include "service/order_consumer.h"
#include "store/mysql/store.h"
#include "support/flashsale_process.h"
#include "support/io_thread.h"
#include "support/mariadb_server.h"
#include "support/redis_helpers.h"
#include "support/redis_server.h"
#include "support/wait.h"

namespace flashsale {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using testing::Eventually;
using testing::IoThread;
using testing::MariaDbServer;
using testing::ReadFile;
using testing::RedisServer;
using testing::TempDir;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kDrainTimeout = 60s;     // until the group has nothing pending and nothing new
constexpr auto kStartTimeout = 20s;     // until a worker prints its banner
constexpr auto kExitTimeout = 30s;      // until a signalled worker has exited
constexpr auto kProgressTimeout = 30s;  // until the pipeline has made the progress a test waits for

// --- Small helpers -----------------------------------------------------------------------------

std::string Tail(const std::string& text, size_t max_bytes = 3000) {
  return text.size() > max_bytes ? "..." + text.substr(text.size() - max_bytes) : text;
}

std::string Str(const redisReply* reply) {
  return reply != nullptr && reply->str != nullptr ? std::string(reply->str, reply->len)
                                                   : std::string();
}

// A redis reply of alternating names and values (RESP2 maps: HGETALL, XINFO, stream fields).
std::map<std::string, std::string> Pairs(const redisReply* reply) {
  std::map<std::string, std::string> out;
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return out;
  for (size_t i = 0; i + 1 < reply->elements; i += 2) {
    const redisReply* value = reply->element[i + 1];
    out[Str(reply->element[i])] =
        value->type == REDIS_REPLY_INTEGER ? std::to_string(value->integer) : Str(value);
  }
  return out;
}

// The first few elements of `a` that are not in `b`, for failure messages.
std::string FirstMissing(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::string out;
  int shown = 0;
  for (const auto& id : a) {
    if (b.count(id) != 0) continue;
    if (shown++ == 10) {
      out += " ...";
      break;
    }
    out += " " + id;
  }
  return out;
}

// --- A `flashsale worker` child process --------------------------------------------------------

// Its stdout and stderr go to `log`. SIGKILLed (by its PID) and reaped at the end of the scope if
// it is still running, so a failed assertion leaves no worker behind.
class Worker {
 public:
  // `failpoints`: the value of FLASHSALE_FAILPOINTS for this child only (set through env(1),
  // which execs the binary: the pid is the worker's).
  Worker(const std::vector<std::string>& args, std::string log, const std::string& failpoints = "")
      : log_(std::move(log)) {
    std::vector<std::string> argv;
    if (!failpoints.empty()) argv = {"env", "FLASHSALE_FAILPOINTS=" + failpoints};
    argv.emplace_back(FLASHSALE_BINARY);
    argv.insert(argv.end(), args.begin(), args.end());
    auto spawned = base::Subprocess::Spawn(argv, log_);
    if (!spawned) throw std::runtime_error("spawn flashsale worker: " + spawned.error().message);
    process_.emplace(std::move(spawned).value());
  }
  ~Worker() {
    if (process_ && process_->Running()) {
      process_->Signal(SIGKILL);
      process_->Wait(10s);
    }
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  pid_t pid() const { return process_->pid(); }
  bool Running() { return process_->Running(); }
  void Signal(int signal) { process_->Signal(signal); }
  // The exit status once it has exited within `timeout`; empty if it has not.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout) {
    if (!process_->Wait(timeout)) return std::nullopt;
    return process_->exit_status();
  }
  std::string Log() const { return ReadFile(log_); }
  std::string Describe() const { return fmt::format("worker {} log:\n{}", pid(), Tail(Log())); }

  // Until the banner (printed once its consumers run), or it exits, or the timeout.
  ::testing::AssertionResult WaitStarted() {
    const bool started = Eventually(
        [&] { return !Running() || Log().find("flashsale worker:") != std::string::npos; },
        kStartTimeout, 20ms);
    if (started && Running()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << (started ? "exited during startup; " : "no banner within 20 s; ") << Describe();
  }

  // SIGTERM, a clean exit (code 0) within the bound, and the summary it logs at level info:
  // {persisted, duplicates, dead letters}.
  ::testing::AssertionResult StopCleanly(std::array<int64_t, 3>* summary = nullptr) {
    Signal(SIGTERM);
    const std::optional<int> status = WaitExit(kExitTimeout);
    if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
      return ::testing::AssertionFailure()
             << "after SIGTERM: "
             << (status ? base::DescribeExitStatus(*status) : std::string("still running")) << "; "
             << Describe();
    }
    if (summary != nullptr) {
      static const std::regex line(
          R"(stopped: (\d+) orders persisted, (\d+) duplicates, (\d+) dead letters)");
      const std::string log = Log();
      std::smatch match;
      if (!std::regex_search(log, match, line)) {
        return ::testing::AssertionFailure() << "no 'stopped:' summary; " << Describe();
      }
      for (size_t i = 0; i < 3; ++i) (*summary)[i] = std::stoll(match[i + 1].str());
    }
    return ::testing::AssertionSuccess();
  }

 private:
  std::string log_;
  std::optional<base::Subprocess> process_;
};

// --- Order intents: reservations through the reserve script ----------------------------------

struct Reservations {
  std::vector<std::string> order_ids;  // reserved
  int64_t units = 0;                   // reserved units
  int64_t refused = 0;                 // a definite outcome other than reserved
  int64_t unresolved = 0;              // no definite outcome after every retry
  void Merge(const Reservations& other) {
    order_ids.insert(order_ids.end(), other.order_ids.begin(), other.order_ids.end());
    units += other.units;
    refused += other.refused;
    unresolved += other.unresolved;
  }
};

using QuantityOf = std::function<int64_t(int64_t)>;  // user index -> units to reserve

int64_t OneUnit(int64_t) { return 1; }

// Reserves units for distinct users (u<i>, order o<i>) with many calls in flight, on an I/O thread
// and a connection of its own. A call that fails is retried with the same order id (the script is
// idempotent on it), so every attempt ends with a definite outcome.
class Producer {
 public:
  Producer(const std::string& url, const std::string& key_namespace, std::string activity)
      : activity_(std::move(activity)) {
    connection_ = testing::Connect(io_, url);
    runner_ = std::make_unique<redis::ScriptRunner>(connection_, keyspace::Scripts());
    scripts_ = std::make_unique<keyspace::ActivityScripts>(*runner_, key_namespace);
  }
  ~Producer() { testing::Stop(io_, connection_); }
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Users first .. first+count-1, `parallel` callers. Throws if it does not finish within 120 s.
  // Safe to call from several threads at once (with ranges that do not overlap).
  Reservations Reserve(int64_t first, int64_t count, int parallel,
                       const QuantityOf& quantity = OneUnit) {
    auto batch = std::make_shared<Batch>();
    batch->activity = activity_;
    batch->next = first;
    batch->end = first + count;
    batch->quantity = quantity;
    std::vector<std::future<void>> callers;
    for (int i = 0; i < parallel; ++i) {
      callers.push_back(asio::co_spawn(io_.context(), Caller(batch, *scripts_), asio::use_future));
    }
    const auto until = Clock::now() + 120s;
    for (auto& caller : callers) {
      if (caller.wait_until(until) != std::future_status::ready) {
        throw std::runtime_error("reservations did not finish within 120 s");
      }
    }
    for (auto& caller : callers) caller.get();
    return batch->result;
  }

 private:
  struct Batch {  // shared by the callers of one Reserve, all on the producer's I/O thread
    std::string activity;
    int64_t next = 0;
    int64_t end = 0;
    QuantityOf quantity;
    Reservations result;
  };

  static asio::awaitable<void> Caller(std::shared_ptr<Batch> batch,
                                      keyspace::ActivityScripts& scripts) {
    asio::steady_timer pause(co_await asio::this_coro::executor);
    while (batch->next < batch->end) {
      const int64_t index = batch->next++;
      const std::string order_id = fmt::format("o{}", index);
      const std::string user_id = fmt::format("u{}", index);
      const int64_t quantity = batch->quantity(index);
      const keyspace::ReserveRequest request{.order_id = order_id,
                                             .user_id = user_id,
                                             .quantity = quantity,
                                             .now_ms = base::SystemClock::Instance().NowMs()};
      bool resolved = false;
      for (int attempt = 0; attempt < 200 && !resolved; ++attempt) {
        auto reply = co_await scripts.AsyncReserve(batch->activity, request, asio::use_awaitable);
        if (reply.ok()) {
          resolved = true;
          if (reply->outcome == core::Outcome::kReserved) {
            batch->result.order_ids.push_back(order_id);
            batch->result.units += quantity;
          } else {
            ++batch->result.refused;
          }
          break;
        }
        pause.expires_after(20ms);
        co_await pause.async_wait(asio::use_awaitable);
      }
      if (!resolved) ++batch->result.unresolved;
    }
  }

  std::string activity_;
  IoThread io_;
  std::shared_ptr<redis::Connection> connection_;
  std::unique_ptr<redis::ScriptRunner> runner_;
  std::unique_ptr<keyspace::ActivityScripts> scripts_;
};

// Reservations that keep coming while a test does its damage: chunks of `chunk` users with a pause
// between them, on a thread of its own (stopped and joined at the end of the scope).
class BackgroundLoad {
 public:
  BackgroundLoad(Producer& producer, int64_t first, int64_t total, int64_t chunk,
                 std::chrono::milliseconds pause, QuantityOf quantity = OneUnit)
      : thread_([this, &producer, first, total, chunk, pause, quantity](std::stop_token stop) {
          try {
            for (int64_t done = 0; done < total && !stop.stop_requested(); done += chunk) {
              const Reservations some =
                  producer.Reserve(first + done, std::min(chunk, total - done), 8, quantity);
              {
                std::lock_guard lock(mutex_);
                result_.Merge(some);
              }
              attempted_ += std::min(chunk, total - done);
              std::this_thread::sleep_for(pause);
            }
          } catch (const std::exception& error) {
            std::lock_guard lock(mutex_);
            error_ = error.what();
          }
          finished_ = true;
        }) {}

  int64_t attempted() const { return attempted_.load(); }
  bool finished() const { return finished_.load(); }
  // Waits (bounded) for the last chunk; the reservations made, or an error.
  Reservations Finish(std::string* error) {
    Eventually([&] { return finished(); }, 180s);
    std::lock_guard lock(mutex_);
    *error = finished() ? error_ : "the background reservations did not finish within 180 s";
    return result_;
  }

 private:
  std::mutex mutex_;
  Reservations result_;
  std::string error_;
  std::atomic<int64_t> attempted_{0};
  std::atomic<bool> finished_{false};
  std::jthread thread_;  // last: stopped and joined first
};

// A root session of its own on the test's MariaDB (unix socket), e.g. to hold a lock across
// statements; closing it (at the end of the scope) rolls back whatever it holds.
class MariaDbSession {
 public:
  MariaDbSession(const std::string& socket_path, const std::string& database)
      : mysql_(mysql_init(nullptr)) {
    if (mysql_ == nullptr) throw std::runtime_error("mysql_init failed");
    const unsigned connect_timeout_s = 10;
    const unsigned io_timeout_s = 30;
    const unsigned protocol = MYSQL_PROTOCOL_SOCKET;
    mysql_optionsv(mysql_, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout_s);
    mysql_optionsv(mysql_, MYSQL_OPT_READ_TIMEOUT, &io_timeout_s);
    mysql_optionsv(mysql_, MYSQL_OPT_WRITE_TIMEOUT, &io_timeout_s);
    mysql_optionsv(mysql_, MYSQL_OPT_PROTOCOL, &protocol);
    if (mysql_real_connect(mysql_, "localhost", "root", nullptr, database.c_str(), 0,
                           socket_path.c_str(), 0) == nullptr) {
      const std::string error = mysql_error(mysql_);
      mysql_close(mysql_);
      throw std::runtime_error("test mariadb session: " + error);
    }
  }
  ~MariaDbSession() { mysql_close(mysql_); }
  MariaDbSession(const MariaDbSession&) = delete;
  MariaDbSession& operator=(const MariaDbSession&) = delete;

  // Runs one statement (its rows, if any, are read and dropped); throws on an error.
  void Exec(const std::string& sql) {
    if (mysql_query(mysql_, sql.c_str()) != 0) {
      throw std::runtime_error(
          fmt::format("test mariadb session '{}': {}", sql, mysql_error(mysql_)));
    }
    if (MYSQL_RES* rows = mysql_store_result(mysql_)) mysql_free_result(rows);
  }

 private:
  MYSQL* mysql_;
};

// How StartWorker runs a `flashsale worker`.
struct WorkerOptions {
  int consumers = 2;
  int claim_idle_ms = 300;
  int batch = 100;                 // --consumer-batch (the default)
  std::string log_level = "warn";  // "info" logs the persisted/duplicates summary at exit
  std::string failpoints;          // FLASHSALE_FAILPOINTS of this worker
  int reconcile_every_ms = 0;      // the jobs: off unless a test wants them
  int prewarm_every_ms = 0;
};

// --- The fixture -------------------------------------------------------------------------------

class PipelineFaultTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { mariadb_ = new MariaDbServer(); }
  static void TearDownTestSuite() {
    delete mariadb_;  // stops mariadbd by its PID
    mariadb_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(mariadb_, nullptr);
    // A test that failed while the database was down must not take the next ones with it.
    if (mariadb_->pid() == -1) mariadb_->Start();
    redis_ = std::make_unique<RedisServer>();
    db_url_ = mariadb_->UniqueDatabase();
    db_name_ = db_url_.substr(db_url_.rfind('/') + 1);
    auto store = store::MySqlStore::Open(db_url_);
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
    redis_.reset();  // stops redis-server by its PID
  }

  // An open counted activity in the database and in Redis (stock loaded once).
  void CreateActivity(const std::string& id, int64_t stock, int64_t per_user_limit = 1) {
    core::Activity activity;
    activity.id = id;
    activity.title = "fault test";
    activity.start_ms = 0;
    activity.end_ms = 4'000'000'000'000;
    activity.per_user_limit = per_user_limit;
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

  Producer MakeProducer(const std::string& activity) {
    return Producer(redis_->unix_url(), namespace_, activity);
  }

  // `flashsale worker` on this test's Redis, database and key namespace; its log in tmp_.
  std::unique_ptr<Worker> StartWorker(const std::string& name, const WorkerOptions& options = {}) {
    const std::vector<std::string> args = {
        "worker", "--redis-url", redis_->unix_url(), "--db-url", db_url_, "--key-namespace",
        namespace_, "--data-dir", tmp_.path(), "--consumers", std::to_string(options.consumers),
        "--consumer-batch", std::to_string(options.batch), "--claim-idle-ms",
        std::to_string(options.claim_idle_ms), "--max-deliveries", "3", "--registry-poll-ms", "50",
        "--reconcile-every-ms", std::to_string(options.reconcile_every_ms), "--prewarm-every-ms",
        std::to_string(options.prewarm_every_ms), "--rebuild-grace-ms", "1000",
        // Read during the load too: a background load of
        // 4,000 intents/s would otherwise be left unread as
        // a burst, and the kills would land after it.
        "--consumer-burst-rate", "0", "--log-level", options.log_level};
    return std::make_unique<Worker>(args, tmp_ / (name + ".log"), options.failpoints);
  }

  keyspace::ActivityKeys Keys(const std::string& activity) const { return {namespace_, activity}; }

  // A read, so retried while our connection is not back yet (after a Redis restart it waits out
  // its reconnect backoff, and a command meanwhile is refused unsent), for at most 5 s.
  keyspace::GroupInfo Group(const std::string& activity) {
    std::optional<base::Result<keyspace::GroupInfo>> info;
    Eventually(
        [&] {
          info.emplace(io_.Run(stream_->Info(activity)));
          return info->ok() || info->error().code != base::ErrorCode::kUnavailable;
        },
        5s, 50ms);
    if (!info->ok()) throw std::runtime_error("group info: " + info->error().ToString());
    return **info;
  }

  // Nothing pending and nothing undelivered. Redis cannot always tell the lag (-1, after
  // deletions); then every entry was delivered if the last delivered id is the stream's last id.
  bool Drained(const std::string& activity, keyspace::GroupInfo* seen = nullptr) {
    const keyspace::GroupInfo info = Group(activity);
    if (seen != nullptr) *seen = info;
    if (info.pending != 0) return false;
    if (info.lag == 0) return true;
    if (info.lag > 0) return false;
    auto stream = redis_->Command({"XINFO", "STREAM", Keys(activity).stream()});
    return Pairs(stream.get())["last-generated-id"] == info.last_delivered_id;
  }

  int64_t RowsInDb(const std::string& activity) {
    return std::stoll(mariadb_->Scalar(
        fmt::format("SELECT COUNT(*) FROM orders WHERE activity_id = '{}'", activity), db_name_));
  }

  // Consumer name -> entries pending for it, for the consumers that have any.
  std::map<std::string, int64_t> PendingPerConsumer(const std::string& activity) {
    std::map<std::string, int64_t> out;
    auto consumers = redis_->Command(
        {"XINFO", "CONSUMERS", Keys(activity).stream(), keyspace::OrderStream::kGroup});
    for (size_t i = 0; i < consumers->elements; ++i) {
      auto consumer = Pairs(consumers->element[i]);
      const int64_t pending = std::stoll(consumer["pending"]);
      if (pending > 0) out[consumer["name"]] = pending;
    }
    return out;
  }

  int64_t DeadLetters(const std::string& activity) {
    return redis_->Integer({"XLEN", Keys(activity).dead()});
  }

  // The exact check. Waits (bounded) until the group has nothing pending and nothing undelivered,
  // then: the orders in the database are the orders Redis recorded as reserved (same ids, users,
  // quantities), none twice, their units are the units Redis reserved, and the dead-letter stream
  // holds `dead_letters` entries. Worker logs are added to failure messages.
  void ExpectExactlyOnce(const std::string& activity, int64_t dead_letters,
                         const std::vector<Worker*>& workers) {
    std::string logs;
    const auto describe = [&] {
      if (logs.empty()) {
        for (Worker* worker : workers) logs += worker->Describe() + "\n";
      }
      return logs;
    };
    keyspace::GroupInfo info;
    const bool drained = Eventually([&] { return Drained(activity, &info); }, kDrainTimeout, 50ms);
    ASSERT_TRUE(drained) << "the group of '" << activity << "' did not drain within 60 s: pending "
                         << info.pending << ", lag " << info.lag << ", length " << info.length
                         << "\n"
                         << describe();

    // What Redis recorded: order id -> (user, quantity), and the units it reserved.
    const keyspace::ActivityKeys keys = Keys(activity);
    std::map<std::string, keyspace::RecordedOrder> recorded;
    std::map<std::string, std::string> recorded_user;
    {
      auto all = redis_->Command({"HGETALL", keys.orders()});
      for (const auto& [order_id, record] : Pairs(all.get())) {
        ASSERT_TRUE(record.starts_with("R|")) << order_id << " -> " << record;
        auto parsed = keyspace::ParseOrderRecord(order_id, record);
        ASSERT_TRUE(parsed.has_value()) << order_id << " -> " << record;
        recorded[order_id] = *parsed;
        recorded_user[order_id] = record.substr(2, record.find('|', 2) - 2);
      }
    }
    int64_t recorded_units = 0;
    for (const auto& [id, order] : recorded) recorded_units += order.quantity;
    const int64_t reserved_units = redis_->SumOfHash(keys.buyers());  // units the buyers hold
    EXPECT_EQ(recorded_units, reserved_units) << "Redis disagrees with itself";

    // What the database holds.
    const auto rows = mariadb_->Query(
        fmt::format(
            "SELECT order_id, user_id, quantity, state FROM orders WHERE activity_id = '{}'",
            activity),
        db_name_);
    const auto totals = mariadb_->Query(
        fmt::format("SELECT COUNT(*), COUNT(DISTINCT order_id), COUNT(DISTINCT stream_id), "
                    "COALESCE(SUM(quantity), 0) FROM orders WHERE activity_id = '{}'",
                    activity),
        db_name_);
    ASSERT_EQ(totals.rows.size(), 1u);
    const int64_t count = std::stoll(*totals.rows[0][0]);
    const int64_t distinct_orders = std::stoll(*totals.rows[0][1]);
    const int64_t distinct_entries = std::stoll(*totals.rows[0][2]);
    const int64_t units = std::stoll(*totals.rows[0][3]);

    std::set<std::string> in_db;
    std::set<std::string> in_redis;
    for (const auto& [id, order] : recorded) in_redis.insert(id);
    int mismatches = 0;
    for (const auto& row : rows.rows) {
      const std::string& id = *row[0];
      in_db.insert(id);
      auto it = recorded.find(id);
      if (it == recorded.end()) continue;  // reported by the set comparison below
      if (*row[1] != recorded_user[id] || std::stoll(*row[2]) != it->second.quantity ||
          *row[3] != "reserved") {
        if (mismatches++ < 5) {
          ADD_FAILURE() << "order " << id << " in the database: user " << *row[1] << ", quantity "
                        << *row[2] << ", state " << *row[3] << "; Redis: user " << recorded_user[id]
                        << ", quantity " << it->second.quantity;
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
    EXPECT_EQ(in_db.size(), in_redis.size());
    EXPECT_TRUE(in_db == in_redis)
        << "reserved in Redis, not in the database (lost):" << FirstMissing(in_redis, in_db)
        << "\nin the database, not reserved in Redis:" << FirstMissing(in_db, in_redis) << "\n"
        << describe();
    EXPECT_EQ(count, distinct_orders) << "an order written twice";
    EXPECT_EQ(count, distinct_entries) << "a stream entry written twice";
    EXPECT_EQ(count, static_cast<int64_t>(recorded.size()));
    EXPECT_EQ(units, reserved_units) << "units in the database != units reserved in Redis";

    // The store's own count agrees.
    auto counted = store_->CountOrders(activity);
    ASSERT_TRUE(counted.ok()) << counted.error().ToString();
    EXPECT_EQ(counted->orders, count);
    EXPECT_EQ(counted->units, units);

    EXPECT_EQ(DeadLetters(activity), dead_letters) << describe();
    // No delivery of a good entry failed (a dead-lettered entry's count goes with it).
    // No delivery of a good entry failed (a dead-lettered entry's count goes with it): neither a
    // crash, nor the database, nor a redelivery is the entries' fault.
    auto failures = redis_->Command({"HGETALL", keys.failures()});
    const std::map<std::string, std::string> failed = Pairs(failures.get());
    std::string some;
    for (const auto& [entry, n] : failed) {
      if (some.size() > 200) {
        some += " ...";
        break;
      }
      some += " " + entry + "=" + n;
    }
    EXPECT_EQ(failed.size(), 0u) << "failed deliveries counted against entries:" << some << "\n"
                                 << describe();
  }

  static MariaDbServer* mariadb_;
  TempDir tmp_{
      "fs-fault"};  // worker data directory and logs; outlives the workers (test-body locals)
  std::unique_ptr<RedisServer> redis_;
  std::string db_url_;
  std::string db_name_;
  std::unique_ptr<store::MySqlStore> store_;
  std::string namespace_;
  IoThread io_;
  std::shared_ptr<redis::Connection> connection_;
  std::unique_ptr<redis::ScriptRunner> runner_;
  std::unique_ptr<keyspace::ActivityScripts> scripts_;
  std::unique_ptr<keyspace::OrderStream> stream_;
};
MariaDbServer* PipelineFaultTest::mariadb_ = nullptr;

// --- a) SIGKILL between the commit and the XACK ------------------------------------------------

TEST_F(PipelineFaultTest, KilledBetweenCommitAndAckLosesNothingAndWritesNothingTwice) {
  ASSERT_NO_FATAL_FAILURE(CreateActivity("commit", 4000));
  Producer producer = MakeProducer("commit");
  const Reservations reserved = producer.Reserve(0, 3000, 32);
  ASSERT_EQ(reserved.order_ids.size(), 3000u);
  ASSERT_EQ(reserved.unresolved, 0);

  // The failpoint raises SIGKILL right after the worker's first batch commit, before its XACK.
  auto doomed = StartWorker("doomed", {.consumers = 1, .failpoints = "kill-after-commit:1"});
  const std::optional<int> status = doomed->WaitExit(kExitTimeout);
  ASSERT_TRUE(status.has_value()) << "the failpoint did not fire; " << doomed->Describe();
  ASSERT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL)
      << base::DescribeExitStatus(*status) << "; " << doomed->Describe();

  // Its batch is in the database, and every entry of it is still pending in Redis.
  const auto committed = mariadb_->Query(
      "SELECT order_id, stream_id FROM orders WHERE activity_id = 'commit'", db_name_);
  const int64_t rows_before = static_cast<int64_t>(committed.rows.size());
  ASSERT_GT(rows_before, 0) << "nothing committed before the kill";
  const keyspace::GroupInfo after_kill = Group("commit");
  EXPECT_EQ(after_kill.pending, rows_before) << "the one batch it read was committed, not acked";
  std::set<std::string> pending_ids;
  {
    auto pending = redis_->Command(
        {"XPENDING", Keys("commit").stream(), keyspace::OrderStream::kGroup, "-", "+", "10000"});
    for (size_t i = 0; i < pending->elements; ++i) {
      pending_ids.insert(Str(pending->element[i]->element[0]));
    }
  }
  for (const auto& row : committed.rows) {
    EXPECT_EQ(pending_ids.count(*row[1]), 1u)
        << "order " << *row[0] << " (entry " << *row[1] << ") is in the database but not pending";
  }

  // A normal worker claims the orphaned entries: they are found duplicate, not written again.
  auto rescuer = StartWorker("rescuer", {.consumers = 1, .log_level = "info"});
  ASSERT_TRUE(rescuer->WaitStarted());
  ASSERT_NO_FATAL_FAILURE(ExpectExactlyOnce("commit", 0, {doomed.get(), rescuer.get()}));
  EXPECT_EQ(RowsInDb("commit"), 3000);
  std::array<int64_t, 3> summary{};
  ASSERT_TRUE(rescuer->StopCleanly(&summary));
  EXPECT_EQ(summary[0], 3000 - rows_before) << "persisted";
  EXPECT_EQ(summary[1], rows_before) << "redelivered entries found duplicate";
  EXPECT_EQ(summary[2], 0) << "dead letters";
}

// --- b) SIGKILL anywhere under load ------------------------------------------------------------

TEST_F(PipelineFaultTest, KilledMidBatchUnderLoadLosesNothing) {
  // Up to 3 units per user, so units and orders differ.
  ASSERT_NO_FATAL_FAILURE(CreateActivity("midbatch", 20000, 3));
  const QuantityOf quantity = [](int64_t user) { return 1 + user % 3; };
  Producer producer = MakeProducer("midbatch");
  auto first = StartWorker("first");
  ASSERT_TRUE(first->WaitStarted());
  BackgroundLoad load(producer, 0, 4000, 100, 25ms, quantity);

  // Once the worker is busy (orders written, a batch in hand), SIGKILL it.
  const bool busy = Eventually(
      [&] {
        return RowsInDb("midbatch") >= 600 && (Group("midbatch").pending > 0 || load.finished());
      },
      kProgressTimeout, 10ms);
  first->Signal(SIGKILL);
  ASSERT_TRUE(busy) << "the worker did not get busy; " << first->Describe();
  const std::optional<int> status = first->WaitExit(kExitTimeout);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL)
      << base::DescribeExitStatus(*status);
  const keyspace::GroupInfo at_kill = Group("midbatch");
  const bool load_running = !load.finished();
  RecordProperty("pending_at_kill", std::to_string(at_kill.pending));
  RecordProperty("load_running_at_kill", load_running ? "yes" : "no");

  auto second = StartWorker("second");
  ASSERT_TRUE(second->WaitStarted());
  std::string error;
  const Reservations reserved = load.Finish(&error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(reserved.unresolved, 0);
  ASSERT_EQ(reserved.order_ids.size(), 4000u);
  ASSERT_NO_FATAL_FAILURE(ExpectExactlyOnce("midbatch", 0, {first.get(), second.get()}));
  EXPECT_EQ(RowsInDb("midbatch"), 4000);
  EXPECT_EQ(redis_->SumOfHash(Keys("midbatch").buyers()), reserved.units);
  EXPECT_TRUE(second->Running()) << second->Describe();
}

// --- c) The database unreachable for a while ---------------------------------------------------

TEST_F(PipelineFaultTest, AnUnreachableDatabaseHoldsTheBacklogUntilItIsBack) {
  ASSERT_NO_FATAL_FAILURE(CreateActivity("outage", 5000));
  Producer producer = MakeProducer("outage");
  ASSERT_EQ(producer.Reserve(0, 1000, 32).order_ids.size(), 1000u);
  auto worker = StartWorker("worker");
  ASSERT_TRUE(worker->WaitStarted());
  ASSERT_NO_FATAL_FAILURE(ExpectExactlyOnce("outage", 0, {worker.get()}));

  mariadb_->Stop();
  const Reservations more = producer.Reserve(1000, 1500, 32);
  ASSERT_EQ(more.order_ids.size(), 1500u) << "the purchase path does not need the database";

  // The worker takes a batch per consumer, fails to write it, and holds it: retrying.
  EXPECT_TRUE(Eventually([&] { return worker->Log().find("retrying in") != std::string::npos; },
                         kProgressTimeout))
      << worker->Describe();
  // A few seconds of outage: the backlog stays in Redis, nothing is dead-lettered or counted
  // against the entries, and the worker stays up.
  const auto outage_end = Clock::now() + 3s;
  while (Clock::now() < outage_end && worker->Running()) std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(worker->Running()) << worker->Describe();
  const keyspace::GroupInfo held = Group("outage");
  EXPECT_GT(held.pending, 0) << "the consumers hold their batches";
  EXPECT_EQ(held.pending + held.lag, 1500)
      << "nothing acknowledged while the database is down (pending " << held.pending << ", lag "
      << held.lag << ")";
  EXPECT_EQ(held.dead_letters, 0);
  EXPECT_EQ(redis_->Integer({"HLEN", Keys("outage").failures()}), 0)
      << "an unreachable database is not the entries' fault";

  mariadb_->Start();
  ASSERT_NO_FATAL_FAILURE(ExpectExactlyOnce("outage", 0, {worker.get()}));
  EXPECT_EQ(RowsInDb("outage"), 2500);
  EXPECT_TRUE(worker->Running()) << worker->Describe();
  EXPECT_EQ(worker->Log().find("dead-letter"), std::string::npos) << worker->Describe();
}

// --- d) MariaDB crashes and restarts under load ------------------------------------------------

TEST_F(PipelineFaultTest, ADatabaseCrashAndRestartUnderLoadLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(CreateActivity("crash", 6000));
  Producer producer = MakeProducer("crash");
  auto one = StartWorker("one");
  auto two = StartWorker("two");
  ASSERT_TRUE(one->WaitStarted());
  ASSERT_TRUE(two->WaitStarted());
  BackgroundLoad load(producer, 0, 4000, 100, 25ms);

  ASSERT_TRUE(Eventually([&] { return RowsInDb("crash") >= 800; }, kProgressTimeout, 10ms))
      << one->Describe() << two->Describe();
  mariadb_->Kill();
  // More orders while it is down (whatever the background load has left), so the workers have
  // something to write: they notice (a write fails and is held), then the server comes back and
  // recovers.
  const Reservations during = producer.Reserve(4000, 200, 8);
  ASSERT_EQ(during.order_ids.size(), 200u);
  EXPECT_TRUE(Eventually(
      [&] {
        return one->Log().find("retrying in") != std::string::npos ||
               two->Log().find("retrying in") != std::string::npos;
      },
      kProgressTimeout))
      << one->Describe() << two->Describe();
  const int64_t attempted_during_outage = load.attempted();
  mariadb_->Start();
  RecordProperty("reservations_when_restarted", std::to_string(attempted_during_outage));

  std::string error;
  const Reservations reserved = load.Finish(&error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(reserved.order_ids.size(), 4000u);
  ASSERT_NO_FATAL_FAILURE(ExpectExactlyOnce("crash", 0, {one.get(), two.get()}));
  EXPECT_EQ(RowsInDb("crash"), 4200);
  EXPECT_TRUE(one->Running()) << one->Describe();
  EXPECT_TRUE(two->Running()) << two->Describe();
}

// --- e) Consumers racing on the same entries ---------------------------------------------------

TEST_F(PipelineFaultTest, ConsumersRacingOnTheSameEntriesWriteEachOrderOnce) {
  ASSERT_NO_FATAL_FAILURE(CreateActivity("race", 4000));
  Producer producer = MakeProducer("race");
  ASSERT_EQ(producer.Reserve(0, 3000, 32).order_ids.size(), 3000u);

  // A consumer that reads a batch and stalls: it never acknowledges.
  ASSERT_TRUE(io_.Run(stream_->EnsureGroup("race")).ok());
  auto stalled = io_.Run(stream_->ReadNew("race", "stalled", 500));
  ASSERT_TRUE(stalled.ok()) << stalled.error().ToString();
  ASSERT_EQ(stalled->size(), 500u);

  // Two workers that claim anything idle for 100 ms, and both write the same orders at once. A
  // session of the test holds a gap lock that keeps every insert into the orders table waiting
  // (reads go on). The first worker takes every new entry in one batch (and the stalled ones, on
  // its first claim) and waits on the lock; the second finds nothing new and claims what the
  // first holds; then the lock goes and both write.
  const WorkerOptions racing{.claim_idle_ms = 100, .batch = 5000, .log_level = "info"};
  std::unique_ptr<Worker> left;
  std::unique_ptr<Worker> right;
  {
    MariaDbSession blocker(mariadb_->socket_path(), db_name_);
    blocker.Exec("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    blocker.Exec("BEGIN");
    blocker.Exec("SELECT order_id FROM orders WHERE order_id >= '' FOR UPDATE");
    left = StartWorker("left", racing);
    ASSERT_TRUE(left->WaitStarted());
    // The first worker holds every entry: all new ones read, the stalled ones claimed.
    ASSERT_TRUE(Eventually(
        [&] {
          const auto pending = PendingPerConsumer("race");
          return Group("race").lag == 0 && pending.count("stalled") == 0 && pending.size() >= 1;
        },
        kProgressTimeout))
        << left->Describe();
    right = StartWorker("right", racing);
    ASSERT_TRUE(right->WaitStarted());
    // The second one claims (some of) them while the first is still waiting to write them.
    const std::string right_name = fmt::format("-{}-", right->pid());
    const bool claimed = Eventually(
        [&] {
          for (const auto& [name, pending] : PendingPerConsumer("race")) {
            if (name.find(right_name) != std::string::npos) return true;
          }
          return false;
        },
        kProgressTimeout);
    ASSERT_TRUE(claimed) << "the second worker claimed nothing; " << right->Describe();
    EXPECT_EQ(RowsInDb("race"), 0) << "nothing can be written while the lock is held";
    blocker.Exec("COMMIT");
  }
  ASSERT_NO_FATAL_FAILURE(ExpectExactlyOnce("race", 0, {left.get(), right.get()}));

  // The stalled consumer wakes up and writes its batch after all: every order is found there.
  auto activity = store_->GetActivity("race", false);
  ASSERT_TRUE(activity.ok()) << activity.error().ToString();
  std::vector<store::OrderRecord> late;
  std::vector<std::string> late_ids;
  for (const auto& intent : *stalled) {
    auto order = service::OrderRecordOf(intent, *activity);
    ASSERT_TRUE(order.ok()) << order.error().ToString();
    late.push_back(*order);
    late_ids.push_back(intent.entry_id);
  }
  auto outcomes = store_->InsertOrders(late, base::SystemClock::Instance().NowMs());
  ASSERT_TRUE(outcomes.ok()) << outcomes.error().ToString();
  for (size_t i = 0; i < outcomes->size(); ++i) {
    EXPECT_EQ((*outcomes)[i], store::InsertOutcome::kDuplicate) << late[i].order_id;
  }
  auto acked = io_.Run(stream_->Ack("race", late_ids, true));
  ASSERT_TRUE(acked.ok());
  EXPECT_EQ(*acked, 0) << "the workers acknowledged them already";
  ASSERT_NO_FATAL_FAILURE(ExpectExactlyOnce("race", 0, {left.get(), right.get()}));

  // Across both workers, each order was inserted exactly once.
  std::array<int64_t, 3> left_summary{};
  std::array<int64_t, 3> right_summary{};
  ASSERT_TRUE(left->StopCleanly(&left_summary));
  ASSERT_TRUE(right->StopCleanly(&right_summary));
  EXPECT_EQ(left_summary[0] + right_summary[0], 3000)
      << "persisted: " << left_summary[0] << " + " << right_summary[0]
      << "; duplicates: " << left_summary[1] << " + " << right_summary[1];
  EXPECT_GT(left_summary[1] + right_summary[1], 0)
      << "both wrote the claimed orders; persisted " << left_summary[0] << " + " << right_summary[0]
      << "\n"
      << left->Describe() << right->Describe();
  EXPECT_EQ(left_summary[2] + right_summary[2], 0);
  // A redelivered order is a duplicate, never a double sale of its own user.
  for (Worker* worker : {left.get(), right.get()}) {
    EXPECT_EQ(worker->Log().find("already has a live order"), std::string::npos)
        << "a redelivered order was refused as a second live order of its user; "
        << worker->Describe();
  }
  RecordProperty("duplicates", std::to_string(left_summary[1] + right_summary[1]));
}

// --- f) A poison entry -------------------------------------------------------------------------

TEST_F(PipelineFaultTest, APoisonEntryEndsInTheDeadLetterStreamAndTheRestIsPersisted) {
  ASSERT_NO_FATAL_FAILURE(CreateActivity("poison", 3000));
  Producer producer = MakeProducer("poison");
  ASSERT_EQ(producer.Reserve(0, 1000, 32).order_ids.size(), 1000u);
  // An intent no consumer can read (quantity is not a number), among good ones.
  const std::string poison_id =
      Str(redis_
              ->Command({"XADD", Keys("poison").stream(), "*", "order_id", "poison-1", "user_id",
                         "eve", "quantity", "lots", "items", "", "ts", "1"})
              .get());
  ASSERT_FALSE(poison_id.empty());
  ASSERT_EQ(producer.Reserve(1000, 1000, 32).order_ids.size(), 1000u);

  auto worker = StartWorker("worker");
  ASSERT_TRUE(worker->WaitStarted());
  ASSERT_TRUE(Eventually([&] { return DeadLetters("poison") == 1; }, kDrainTimeout))
      << worker->Describe();
  // The good ones exactly once; the poison one only in the dead-letter stream.
  ASSERT_NO_FATAL_FAILURE(ExpectExactlyOnce("poison", 1, {worker.get()}));
  EXPECT_EQ(RowsInDb("poison"), 2000);
  EXPECT_TRUE(Eventually(
      [&] { return worker->Log().find("moved to the dead-letter stream") != std::string::npos; },
      10s))
      << worker->Describe();

  auto dead = redis_->Command({"XRANGE", Keys("poison").dead(), "-", "+"});
  ASSERT_EQ(dead->elements, 1u);
  std::map<std::string, std::string> letter = Pairs(dead->element[0]->element[1]);
  EXPECT_EQ(letter["original_id"], poison_id);
  EXPECT_EQ(letter["order_id"], "poison-1");
  EXPECT_EQ(letter["user_id"], "eve");
  EXPECT_EQ(letter["quantity"], "lots");
  EXPECT_EQ(letter["deliveries"], "3");
  EXPECT_NE(letter["error"].find("quantity"), std::string::npos) << letter["error"];
  EXPECT_FALSE(letter["dead_ms"].empty());
  // Nothing of it is left behind: not pending, no failure count.
  EXPECT_EQ(Group("poison").pending, 0);
  EXPECT_EQ(redis_->Integer({"HEXISTS", Keys("poison").failures(), poison_id}), 0);
  EXPECT_EQ(mariadb_->Scalar("SELECT COUNT(*) FROM orders WHERE order_id = 'poison-1'", db_name_),
            "0");
  EXPECT_TRUE(worker->Running()) << worker->Describe();
}

// --- g) A lottery's admission queue with a consumer SIGKILLed mid-way --------------------------

class QueueFaultTest : public PipelineFaultTest {
 protected:
  // An open lottery with an admission queue, in the database and in Redis: prizes a (weight 1,
  // 40 units) and b (weight 2, 60 units), "no prize" weight 3, one draw per user.
  void CreateQueuedLottery(const std::string& id, core::Admission admission) {
    core::Activity activity;
    activity.id = id;
    activity.title = "queue fault test";
    activity.start_ms = 0;
    activity.end_ms = 4'000'000'000'000;
    activity.lottery = core::Lottery{.prizes = {{"a", "A", 1, 40}, {"b", "B", 2, 60}},
                                     .no_prize_weight = 3,
                                     .admission = admission,
                                     .queue_capacity = 100'000};
    activity.stock = 100;
    auto created = store_->CreateActivity(activity, base::SystemClock::Instance().NowMs());
    ASSERT_TRUE(created.ok()) << created.error().ToString();
    auto setup = io_.Run(SetUpActivity(activity));
    ASSERT_TRUE(setup.ok()) << setup.error().ToString();
    redis_->Command({"INCR", keyspace::NamespaceKeys(namespace_).registry_version()});
  }

  // Tickets t<i> for users u<i>, i in [0, count), straight into the queue.
  void Enqueue(const std::string& activity, int count) {
    keyspace::DrawQueue queue(*runner_, namespace_);
    for (int i = 0; i < count; ++i) {
      const std::string ticket = fmt::format("t{}", i);
      const std::string user = fmt::format("u{}", i);
      const keyspace::EnqueueRequest request{.ticket_id = ticket,
                                             .user_id = user,
                                             .now_ms = base::SystemClock::Instance().NowMs(),
                                             .capacity = 100'000,
                                             .ticket_ttl_ms = 3'600'000,
                                             .user_token = user};
      auto queued = io_.Run(queue.Enqueue(activity, request));
      ASSERT_TRUE(queued.ok()) << queued.error().ToString();
      ASSERT_EQ(queued->outcome, keyspace::EnqueueOutcome::kQueued);
    }
  }

  // Every ticket decided (bounded wait), then the exact check: each ticket has one outcome (won,
  // no prize or all gone; never "limit reached", which a second draw for it would have been),
  // each user drew at most once, no prize over-issued, and every win is one row in the database.
  void ExpectEveryTicketAnsweredOnce(const std::string& activity, int count,
                                     const std::vector<Worker*>& workers) {
    std::string logs;
    for (Worker* worker : workers) logs += worker->Describe() + "\n";
    keyspace::DrawQueue queue(*runner_, namespace_);
    std::map<std::string, keyspace::TicketState> states;
    const bool decided = Eventually(
        [&] {
          for (int i = static_cast<int>(states.size()); i < count; ++i) {
            auto state =
                io_.Run(queue.Ticket(activity, fmt::format("t{}", i), fmt::format("u{}", i)));
            if (!state.ok() || state->state != keyspace::TicketState::State::kDecided) return false;
            states[fmt::format("t{}", i)] = *state;
          }
          return true;
        },
        kDrainTimeout, 50ms);
    ASSERT_TRUE(decided) << states.size() << " of " << count << " tickets decided\n" << logs;

    std::map<std::string, int64_t> won;
    int64_t no_prize = 0, gone = 0;
    std::set<std::string> win_ids;
    for (const auto& [ticket, state] : states) {
      switch (state.outcome) {
        case core::Outcome::kReserved:
          ++won[state.prize_id];
          win_ids.insert(state.order_id);
          EXPECT_EQ(state.order_id, ticket);
          EXPECT_EQ(state.draws, 1);
          break;
        case core::Outcome::kNoPrize:
          ++no_prize;
          break;
        case core::Outcome::kSoldOut:
          ++gone;
          break;
        default:
          ADD_FAILURE() << ticket << ": outcome " << static_cast<int>(state.outcome);
      }
    }
    EXPECT_LE(won["a"], 40);
    EXPECT_LE(won["b"], 60);
    EXPECT_EQ(won["a"] + won["b"] + no_prize + gone, count);
    const keyspace::ActivityKeys keys = Keys(activity);
    for (const auto& [user, draws] : Pairs(redis_->Command({"HGETALL", keys.buyers()}).get())) {
      EXPECT_EQ(draws, "1") << user << " drew more than once";
    }
    EXPECT_EQ(redis_->Integer({"HLEN", keys.buyers()}), count - gone);
    // The queue is empty: every entry acknowledged and deleted.
    EXPECT_TRUE(Eventually(
        [&] {
          return redis_->Integer({"XLEN", keys.queue()}) == 0;
        },
        10s))
        << redis_->Integer({"XLEN", keys.queue()}) << " entries left in the queue";

    // Every win persisted once, under its draw number.
    ASSERT_TRUE(Eventually([&] { return Drained(activity); }, kDrainTimeout)) << logs;
    const auto rows = mariadb_->Query(
        fmt::format("SELECT order_id, draw_no, items FROM orders WHERE activity_id = '{}'",
                    activity),
        db_name_);
    std::set<std::string> in_db;
    for (const auto& row : rows.rows) {
      EXPECT_TRUE(in_db.insert(*row[0]).second) << *row[0] << " twice";
      EXPECT_EQ(*row[1], "1");
    }
    EXPECT_EQ(in_db, win_ids) << "missing from the database:" << FirstMissing(win_ids, in_db);
  }
};

TEST_F(QueueFaultTest, AConsumerKilledMidwayLeavesEveryTicketAnsweredOnce) {
  ASSERT_NO_FATAL_FAILURE(CreateQueuedLottery("lq", core::Admission::kQueue));
  ASSERT_NO_FATAL_FAILURE(Enqueue("lq", 400));
  // The doomed worker dies by SIGKILL after its 60th draw, before acknowledging its batch.
  auto doomed = StartWorker("doomed", {.consumers = 1, .failpoints = "kill-after-draw:60"});
  const std::optional<int> status = doomed->WaitExit(kExitTimeout);
  ASSERT_TRUE(status.has_value()) << "the failpoint did not fire; " << doomed->Describe();
  ASSERT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL)
      << base::DescribeExitStatus(*status) << "; " << doomed->Describe();
  // Drawn but not acknowledged: its batch is still pending in the group, for another to claim.
  auto pending = redis_->Command({"XPENDING", Keys("lq").queue(), "draw"});
  ASSERT_EQ(pending->type, REDIS_REPLY_ARRAY);
  EXPECT_GT(pending->element[0]->integer, 0) << "nothing pending after the kill";

  auto rescuer = StartWorker("rescuer", {.consumers = 2});
  ASSERT_TRUE(rescuer->WaitStarted());
  ASSERT_NO_FATAL_FAILURE(ExpectEveryTicketAnsweredOnce("lq", 400, {doomed.get(), rescuer.get()}));
  EXPECT_TRUE(rescuer->StopCleanly());
}

TEST_F(QueueFaultTest, AStrictQueueHasOneConsumerAtATimeAndTheNextTakesOverWhenItDies) {
  ASSERT_NO_FATAL_FAILURE(CreateQueuedLottery("fifo", core::Admission::kFifo));
  ASSERT_NO_FATAL_FAILURE(Enqueue("fifo", 300));
  auto doomed = StartWorker("doomed", {.consumers = 2, .failpoints = "kill-after-draw:80"});
  const std::optional<int> status = doomed->WaitExit(kExitTimeout);
  ASSERT_TRUE(status.has_value()) << "the failpoint did not fire; " << doomed->Describe();
  ASSERT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);
  // Its lease is still in Redis; the next holder gets it once it expires, with a newer fence.
  EXPECT_EQ(redis_->Integer({"GET", Keys("fifo").queue_fence()}), 1);

  auto next = StartWorker("next", {.consumers = 2, .log_level = "info"});
  ASSERT_TRUE(next->WaitStarted());
  ASSERT_NO_FATAL_FAILURE(ExpectEveryTicketAnsweredOnce("fifo", 300, {doomed.get(), next.get()}));
  EXPECT_EQ(redis_->Integer({"GET", Keys("fifo").queue_fence()}), 2);
  // One consumer at a time: of the new worker's two consumers, one held the lock.
  const std::string log = next->Log();
  size_t holders = 0;
  for (size_t at = log.find("holds the fifo lock"); at != std::string::npos;
       at = log.find("holds the fifo lock", at + 1)) {
    ++holders;
  }
  EXPECT_EQ(holders, 1u) << next->Describe();
  EXPECT_TRUE(next->StopCleanly());
}

// --- h) Drills: Redis restarted from its AOF, Redis wiped, in the middle of a sale --------------

class DrillTest : public PipelineFaultTest {
 protected:
  // Replaces the test's redis-server with one that keeps an AOF fsynced on every write.
  void UseRedisWithAof() {
    testing::Stop(io_, connection_);
    redis_ = std::make_unique<RedisServer>(
        testing::RedisServerOptions{.appendonly = true, .appendfsync = "always"});
    connection_ = testing::Connect(io_, redis_->unix_url());
    runner_ = std::make_unique<redis::ScriptRunner>(connection_, keyspace::Scripts());
    scripts_ = std::make_unique<keyspace::ActivityScripts>(*runner_, namespace_);
    stream_ = std::make_unique<keyspace::OrderStream>(*runner_, namespace_);
  }

  int64_t Remaining(const std::string& activity) {
    auto stock = redis_->Command({"GET", Keys(activity).stock()});
    return stock->type == REDIS_REPLY_STRING ? std::stoll(Str(stock.get())) : -1;
  }
  int64_t UnitsInDb(const std::string& activity) {
    return std::stoll(mariadb_->Scalar(
        fmt::format("SELECT COALESCE(SUM(quantity), 0) FROM orders WHERE activity_id = '{}' AND "
                    "state <> 'cancelled'",
                    activity),
        db_name_));
  }
  int64_t UsersTwiceInDb(const std::string& activity) {
    return std::stoll(mariadb_->Scalar(
        fmt::format("SELECT COUNT(*) FROM (SELECT user_id FROM orders WHERE activity_id = '{}' "
                    "AND state <> 'cancelled' GROUP BY user_id HAVING COUNT(*) > 1) t",
                    activity),
        db_name_));
  }
};

TEST_F(DrillTest, RedisRestartedFromItsAofMidSaleKeepsTheInvariant) {
  ASSERT_NO_FATAL_FAILURE(UseRedisWithAof());
  ASSERT_NO_FATAL_FAILURE(CreateActivity("aof", 3000));
  auto worker = StartWorker("worker", {.reconcile_every_ms = 500});
  ASSERT_TRUE(worker->WaitStarted());
  Producer producer = MakeProducer("aof");
  BackgroundLoad load(producer, 0, 4000, 200, 20ms);
  ASSERT_TRUE(Eventually([&] { return load.attempted() >= 1000; }, kProgressTimeout));
  redis_->Kill();  // SIGKILL: no save, only the AOF
  std::this_thread::sleep_for(500ms);
  redis_->Start();
  std::string error;
  const Reservations reserved = load.Finish(&error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(reserved.unresolved, 0);
  EXPECT_EQ(static_cast<int64_t>(reserved.order_ids.size()), 3000) << "the whole stock sold";
  // Every acknowledged write survived: the exact check, and the invariant with nothing left.
  ASSERT_NO_FATAL_FAILURE(ExpectExactlyOnce("aof", 0, {worker.get()}));
  EXPECT_EQ(Remaining("aof") + UnitsInDb("aof"), 3000);
  EXPECT_EQ(Remaining("aof"), 0);
}

TEST_F(DrillTest, RedisWipedMidSaleStopsTheSaleUntilReconciliationRebuildsItNothingOversold) {
  constexpr int64_t kStock = 2000;
  ASSERT_NO_FATAL_FAILURE(CreateActivity("wipe", kStock));
  Producer producer = MakeProducer("wipe");
  const Reservations before = producer.Reserve(0, 800, 32);
  ASSERT_EQ(before.order_ids.size(), 800u);
  // A worker persists what it can; then Redis loses everything (a wipe, a failover to an empty
  // replica) while more intents may still be in the stream.
  auto worker = StartWorker("worker", {.log_level = "info", .reconcile_every_ms = 300});
  ASSERT_TRUE(worker->WaitStarted());
  ASSERT_TRUE(Eventually([&] { return RowsInDb("wipe") >= 400; }, kProgressTimeout))
      << worker->Describe();
  redis_->Command({"FLUSHALL"});
  const int64_t persisted_at_wipe = RowsInDb("wipe");
  {  // The sale has stopped at once: nothing to sell from until the rebuild (a grace of 1 s).
    const keyspace::ReserveRequest probe{
        .order_id = "probe", .user_id = "probe", .now_ms = base::SystemClock::Instance().NowMs()};
    auto refused = io_.Run(scripts_->AsyncReserve("wipe", probe, asio::use_awaitable));
    ASSERT_TRUE(refused.ok()) << refused.error().ToString();
    EXPECT_EQ(refused->outcome, core::Outcome::kUnknownActivity);
  }

  // The sale has stopped: the scripts no longer know the activity (until it is rebuilt).
  // Reconciliation rebuilds it from the record: the sale resumes with what the record says is
  // left, the record's buyers still refused.
  // The rebuild loads the activity closed, applies the record's orders in chunks, then opens it:
  // open means rebuilt (EXISTS alone could see it between two chunks).
  ASSERT_TRUE(Eventually(
      [&] {
        return redis_->String({"HGET", Keys("wipe").meta(), "state"}) == "open";
      },
      kProgressTimeout))
      << worker->Describe();
  const int64_t persisted = RowsInDb("wipe");
  EXPECT_GE(persisted, persisted_at_wipe);
  EXPECT_EQ(Remaining("wipe"), kStock - persisted) << "rebuilt from the record";
  // The same users and order ids as before: those the record has are replayed (their orders
  // were restored), only those whose orders were lost with Redis take a unit again.
  const Reservations again = producer.Reserve(0, 800, 16);
  EXPECT_EQ(static_cast<int64_t>(again.order_ids.size()), 800);
  EXPECT_EQ(Remaining("wipe"), kStock - 800);
  const Reservations after = producer.Reserve(800, 3000, 32);
  EXPECT_EQ(after.unresolved, 0);

  // Drained: nothing oversold, nobody twice, and Redis and the record agree on every unit.
  ASSERT_TRUE(Eventually([&] { return Drained("wipe"); }, kDrainTimeout)) << worker->Describe();
  EXPECT_EQ(UnitsInDb("wipe"), kStock) << "sold out exactly";
  EXPECT_EQ(Remaining("wipe"), 0);
  EXPECT_EQ(UsersTwiceInDb("wipe"), 0);
  const std::string report =
      redis_->String({"GET", keyspace::ActivityKeys(namespace_, "wipe").reconcile_report()});
  EXPECT_NE(report.find("\"drift\":0"), std::string::npos) << report;
  EXPECT_NE(worker->Log().find("rebuilt"), std::string::npos) << worker->Describe();
}

TEST_F(DrillTest, DatabaseWritesFailingForAWhileLoseNothingAndTheInvariantHolds) {
  constexpr int64_t kStock = 1500;
  ASSERT_NO_FATAL_FAILURE(CreateActivity("dbdown", kStock));
  auto worker = StartWorker("worker", {.reconcile_every_ms = 300});
  ASSERT_TRUE(worker->WaitStarted());
  Producer producer = MakeProducer("dbdown");
  ASSERT_EQ(producer.Reserve(0, 300, 16).order_ids.size(), 300u);
  mariadb_->Stop();  // every write fails from here
  ASSERT_EQ(producer.Reserve(300, 900, 16).order_ids.size(), 900u) << "sales go on";
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(worker->Running()) << worker->Describe();
  mariadb_->Start();
  // The backlog drains: every unit Redis sold is one row, none twice, nothing dead-lettered...
  ASSERT_NO_FATAL_FAILURE(ExpectExactlyOnce("dbdown", 0, {worker.get()}));
  // ...and the invariant holds to the unit, as reconciliation sees it too.
  EXPECT_EQ(Remaining("dbdown") + UnitsInDb("dbdown"), kStock);
  EXPECT_EQ(UnitsInDb("dbdown"), 1200);
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string report = redis_->String(
            {"GET", keyspace::ActivityKeys(namespace_, "dbdown").reconcile_report()});
        return report.find("\"db_live\":1200") != std::string::npos &&
               report.find("\"drift\":0") != std::string::npos;
      },
      kProgressTimeout))
      << redis_->String({"GET", keyspace::ActivityKeys(namespace_, "dbdown").reconcile_report()});
}

}  // namespace
}  // namespace flashsale
