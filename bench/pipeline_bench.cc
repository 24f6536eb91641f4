// Orders persisted per second by the order pipeline: ONE in-process service::OrderConsumer
// draining an activity's stream into SQLite or MariaDB, at batch sizes 1, 10, 100 and 1000.
//
//   pipeline_bench [--orders N] [--backends sqlite,mariadb] [--batches 1,10,100,1000]
//                  [--rounds R]
//
// It starts a private redis-server and (for MariaDB) a private mariadbd. For every backend and
// batch size: a fresh database (SQLite: a file in a temporary directory, opened by SqliteStore with
// its own pragmas; MariaDB: a new database over the server's unix socket), a fresh activity, N
// order intents put in its stream by the real reserve script (pipelined, so filling is quick), then
// the consumer (options.batch = the batch size) drains the stream, timed from its first read to
// its last acknowledgement. At the end the database must hold exactly N orders, all persisted,
// none duplicate, failed or pending: otherwise the run stops with an error (exit 1).
//
// R rounds (default 3) alternate over the configurations; each one's best round is printed, with
// its slowest for the spread. Printed with it: where the time went, as the share spent inside
// Store::InsertOrders (a wrapper around the store times it), i.e. the database; the rest is the
// consumer's Redis reads and acknowledgements, parsing, and the hops between its I/O thread and
// its database thread. "store" is N / the time inside InsertOrders: what the database alone would
// allow. The aims (SQLite 50,000 and MariaDB 20,000 orders/s, with batching) are printed as met or
// not; nothing here asserts on time.

#include <sched.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/clock.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/embedded_scripts.h"
#include "service/admin.h"
#include "service/context.h"
#include "service/order_consumer.h"
#include "service/registry.h"
#include "store/mysql/store.h"
#include "store/sqlite_store.h"
#include "support/io_thread.h"
#include "support/mariadb_server.h"
#include "support/redis_helpers.h"
#include "support/redis_server.h"

namespace flashsale::bench {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

constexpr std::string_view kActivity = "bench";
constexpr double kSqliteAim = 50'000;
constexpr double kMariaDbAim = 20'000;

[[noreturn]] void Fail(const std::string& message) { throw std::runtime_error(message); }

// Forwards every call to the real store and times InsertOrders (called on the consumer's database
// thread; read once the drain is over).
class TimedStore final : public store::Store {
 public:
  explicit TimedStore(store::Store& inner) : inner_(inner) {}

  Seconds insert_time() const { return std::chrono::nanoseconds(insert_ns_.load()); }
  int64_t insert_calls() const { return insert_calls_.load(); }

  base::Status Migrate() override { return inner_.Migrate(); }
  base::Result<int> SchemaVersion() override { return inner_.SchemaVersion(); }
  base::Status Ping() override { return inner_.Ping(); }
  std::string Describe() const override { return inner_.Describe(); }
  base::Result<std::vector<store::ActivityRecord>> ListActivities() override {
    return inner_.ListActivities();
  }
  base::Result<store::ActivityRecord> GetActivity(std::string_view id, bool with_items) override {
    return inner_.GetActivity(id, with_items);
  }
  base::Result<store::ActivityRecord> CreateActivity(const core::Activity& activity,
                                                     int64_t now_ms) override {
    return inner_.CreateActivity(activity, now_ms);
  }
  base::Result<store::ActivityRecord> UpdateActivity(std::string_view id,
                                                     const store::ActivityUpdate& update,
                                                     int64_t now_ms) override {
    return inner_.UpdateActivity(id, update, now_ms);
  }
  base::Result<store::ActivityRecord> AddStock(std::string_view id, int64_t units,
                                               std::span<const std::string> items,
                                               int64_t now_ms) override {
    return inner_.AddStock(id, units, items, now_ms);
  }
  base::Status DeleteActivity(std::string_view id) override { return inner_.DeleteActivity(id); }
  using store::Store::InsertOrders;
  base::Result<std::vector<store::InsertOutcome>> InsertOrders(
      std::span<const store::OrderRecord> orders, int64_t now_ms,
      std::optional<int64_t> fence) override {
    const auto start = Clock::now();
    auto outcomes = inner_.InsertOrders(orders, now_ms, fence);
    insert_ns_ +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    ++insert_calls_;
    return outcomes;
  }
  base::Result<int64_t> AdvanceFence() override { return inner_.AdvanceFence(); }
  base::Result<int64_t> ReadFence() override { return inner_.ReadFence(); }
  base::Result<std::vector<std::pair<std::string, core::WriteSeq>>> WrittenSeqs() override {
    return inner_.WrittenSeqs();
  }
  base::Status FlagCompensation(std::span<const std::string> order_ids, int64_t now_ms) override {
    return inner_.FlagCompensation(order_ids, now_ms);
  }
  base::Result<store::OrderRecord> GetOrder(std::string_view order_id) override {
    return inner_.GetOrder(order_id);
  }
  base::Result<std::vector<store::OrderRecord>> OrdersOfUser(std::string_view user_id,
                                                             int64_t limit) override {
    return inner_.OrdersOfUser(user_id, limit);
  }
  base::Result<store::OrderCounts> CountOrders(std::string_view activity_id) override {
    return inner_.CountOrders(activity_id);
  }
  base::Result<std::vector<store::OrderRecord>> OrdersOfActivity(
      std::string_view activity_id) override {
    return inner_.OrdersOfActivity(activity_id);
  }
  base::Result<store::OrderPage> OrdersPage(std::string_view activity_id, std::string_view cursor,
                                            int64_t limit, store::OrderStates states) override {
    return inner_.OrdersPage(activity_id, cursor, limit, states);
  }
  base::Result<store::OrderReport> ReportOrders(std::string_view activity_id) override {
    return inner_.ReportOrders(activity_id);
  }
  base::Status AddAnswers(std::span<const store::AnswerCount> counts) override {
    return inner_.AddAnswers(counts);
  }
  base::Result<std::vector<store::OrderRecord>> CancelUnpaid(std::string_view activity_id,
                                                             int64_t before, int64_t limit,
                                                             int64_t now_ms) override {
    return inner_.CancelUnpaid(activity_id, before, limit, now_ms);
  }
  base::Result<store::PayOutcome> PayOrder(std::string_view order_id, int64_t now_ms) override {
    return inner_.PayOrder(order_id, now_ms);
  }
  base::Status RecordRefused(std::span<const store::RefusedOrder> orders, int64_t now_ms) override {
    return inner_.RecordRefused(orders, now_ms);
  }
  base::Result<std::vector<store::OrderEvent>> EventsAfter(int64_t after, int64_t limit) override {
    return inner_.EventsAfter(after, limit);
  }
  base::Result<int64_t> DeliveryCursor(std::string_view receiver) override {
    return inner_.DeliveryCursor(receiver);
  }
  base::Status SaveDelivery(const store::DeliveryUpdate& update, int64_t now_ms) override {
    return inner_.SaveDelivery(update, now_ms);
  }
  base::Result<std::vector<store::ParkedEvent>> ParkedEvents(std::string_view receiver,
                                                             int64_t limit) override {
    return inner_.ParkedEvents(receiver, limit);
  }
  base::Result<int64_t> RequestRetry(std::string_view receiver) override {
    return inner_.RequestRetry(receiver);
  }
  base::Result<store::OrderAudit> AuditOrders(std::string_view activity_id,
                                              int64_t per_user_limit) override {
    return inner_.AuditOrders(activity_id, per_user_limit);
  }

 private:
  store::Store& inner_;
  std::atomic<int64_t> insert_ns_{0};
  std::atomic<int64_t> insert_calls_{0};
};

enum class Backend { kSqlite, kMariaDb };

std::string_view Name(Backend backend) {
  return backend == Backend::kSqlite ? "sqlite" : "mariadb";
}
double Aim(Backend backend) { return backend == Backend::kSqlite ? kSqliteAim : kMariaDbAim; }

// Enough for a stable figure, few enough that unbatched runs (a commit per order) stay short.
int64_t DefaultOrders(int64_t batch) {
  if (batch >= 100) return 20'000;
  if (batch >= 10) return 10'000;
  return 2'000;
}

struct RunResult {
  Backend backend;
  int64_t batch = 0;
  int64_t orders = 0;
  Seconds elapsed{};
  Seconds in_store{};
  int64_t passes = 0;
  double Rate() const { return static_cast<double>(orders) / elapsed.count(); }
  double StoreRate() const { return static_cast<double>(orders) / in_store.count(); }
  double StoreShare() const { return in_store / elapsed; }
};

// Puts `n` order intents in the activity's stream through the reserve script (users u0..u<n-1>,
// one unit each), `in_flight` calls at a time on the context's connection; returns once every
// call reserved, and fails loudly otherwise.
class Filler {
 public:
  Filler(service::ServiceContext& context, int64_t n) : context_(context), n_(n) {}

  void Run(testing::IoThread& io, int64_t in_flight) {
    auto done = done_.get_future();
    io.Call([&] {
      for (int64_t i = 0; i < in_flight && issued_ < n_; ++i) Issue();
    });
    if (done.wait_for(std::chrono::minutes(5)) != std::future_status::ready) {
      Fail("filling the stream did not finish within 5 minutes");
    }
    done.get();
    if (failed_ > 0) {
      Fail(fmt::format("{} of {} reserve calls did not reserve; first: {}", failed_, n_,
                       first_error_));
    }
  }

 private:
  // On the I/O thread: each completion issues the next call.
  void Issue() {
    const int64_t i = issued_++;
    // Reserve copies the request into the command before it returns.
    const std::string order = context_.ids().Next();
    const std::string user = "u" + std::to_string(i);
    const keyspace::ReserveRequest request{
        .order_id = order, .user_id = user, .quantity = 1, .now_ms = context_.clock().NowMs()};
    context_.activity_scripts().Reserve(
        kActivity, request,
        keyspace::Handler<keyspace::Reservation>(
            [this](base::Result<keyspace::Reservation> result) {
              if (!result.ok() || result->outcome != core::Outcome::kReserved) {
                if (failed_++ == 0) {
                  first_error_ = result.ok()
                                     ? fmt::format("outcome {}", static_cast<int>(result->outcome))
                                     : result.error().ToString();
                }
              }
              if (++completed_ == n_) {
                done_.set_value();
              } else if (issued_ < n_) {
                Issue();
              }
            }));
  }

  service::ServiceContext& context_;
  const int64_t n_;
  int64_t issued_ = 0;
  int64_t completed_ = 0;
  int64_t failed_ = 0;
  std::string first_error_;
  std::promise<void> done_;
};

asio::awaitable<base::Result<service::ActivityState>> CreateBenchActivity(
    service::ServiceContext& context, core::Activity activity) {
  co_return co_await service::CreateActivity(context, activity);
}

// Passes until the consumer has handled `n` entries (or three passes in a row found nothing).
asio::awaitable<int64_t> Drain(service::OrderConsumer& consumer, int64_t n, const bool* stop,
                               int64_t* passes) {
  int64_t total = 0;
  int idle = 0;
  while (total < n && idle < 3) {
    const int64_t handled = co_await consumer.Pass(stop);
    ++*passes;
    total += handled;
    idle = handled == 0 ? idle + 1 : 0;
  }
  co_return total;
}

asio::awaitable<base::Result<keyspace::GroupInfo>> StreamInfo(service::ServiceContext& context) {
  co_return co_await context.order_stream().Info(kActivity);
}

// One measurement on a fresh database and a fresh activity.
RunResult RunOne(Backend backend, int64_t batch, int64_t n, const testing::RedisServer& redis,
                 const testing::MariaDbServer* mariadb) {
  // The database.
  std::string dir;
  std::string database;
  std::unique_ptr<store::Store> real_store;
  if (backend == Backend::kSqlite) {
    std::string templ =
        (std::filesystem::temp_directory_path() / "flashsale-pipeline-bench-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) Fail("mkdtemp failed");
    dir = templ;
    auto opened = store::SqliteStore::Open(dir + "/flashsale.db");
    if (!opened.ok()) Fail(opened.error().ToString());
    real_store = std::move(*opened);
  } else {
    std::random_device device;
    database = fmt::format("bench_b{}_{:06x}", batch, device() & 0xFFFFFF);
    mariadb->Query(fmt::format("CREATE DATABASE `{}` CHARACTER SET utf8mb4", database));
    auto opened = store::MySqlStore::Open(mariadb->socket_url(database));
    if (!opened.ok()) Fail(opened.error().ToString());
    real_store = std::move(*opened);
  }
  if (auto migrated = real_store->Migrate(); !migrated.ok()) Fail(migrated.error().ToString());
  TimedStore store(*real_store);

  // The consumer's world, as OrderPipeline gives it: an I/O thread with its Redis connection, a
  // database thread.
  service::ServiceSettings settings;
  settings.key_namespace = testing::UniqueNamespace();
  settings.secret = "bench";
  settings.db_timeout = std::chrono::seconds(60);
  service::ActivityRegistry registry;
  asio::thread_pool db(1);
  testing::IoThread io;
  redis::ConnectionOptions connection_options;
  connection_options.command_timeout = std::chrono::seconds(30);
  auto connection = testing::Connect(io, redis.unix_url(), connection_options);
  redis::ScriptRunner runner(connection, keyspace::Scripts());
  base::SecureRandom random;
  service::ServiceContext context(settings, runner, store, db.get_executor(), registry,
                                  base::SystemClock::Instance(), random);

  core::Activity activity;
  activity.id = std::string(kActivity);
  activity.start_ms = 0;
  activity.end_ms = 4'000'000'000'000;
  activity.per_user_limit = 1;  // a flash sale: one live order per user, the record's unique key
  activity.stock = n;
  auto created = io.Run(CreateBenchActivity(context, activity));
  if (!created.ok()) Fail(created.error().ToString());

  Filler(context, n).Run(io, 512);
  const keyspace::ActivityKeys keys(settings.key_namespace, kActivity);
  if (const int64_t length = redis.Integer({"XLEN", keys.stream()}); length != n) {
    Fail(fmt::format("the stream holds {} intents, not {}", length, n));
  }

  service::ConsumerOptions options;
  options.name = "bench";
  options.batch = batch;
  options.max_batch = batch;  // each row measures its batch size, not the growth to a larger one
  service::PipelineMetrics metrics;
  service::OrderConsumer consumer(context, context.order_stream(), options, metrics);
  const bool stop = false;
  int64_t passes = 0;
  const auto start = Clock::now();
  const int64_t handled = io.Run(Drain(consumer, n, &stop, &passes), std::chrono::minutes(10));
  const Seconds elapsed = Clock::now() - start;

  // Exactly N rows, every intent persisted once and acknowledged.
  auto counts = store.CountOrders(kActivity);
  if (!counts.ok()) Fail(counts.error().ToString());
  auto info = io.Run(StreamInfo(context));
  if (!info.ok()) Fail(info.error().ToString());
  if (handled != n || counts->orders != n ||
      metrics.persisted.value() != static_cast<uint64_t>(n) || metrics.duplicates.value() != 0 ||
      metrics.entry_failures.value() != 0 || metrics.dead_letters.value() != 0 ||
      metrics.db_errors.value() != 0 || info->pending != 0 || info->lag != 0) {
    Fail(fmt::format(
        "{} batch {}: expected {} orders; handled {}, rows {}, persisted {}, duplicates {}, "
        "entry failures {}, dead letters {}, db errors {}, pending {}, lag {}",
        Name(backend), batch, n, handled, counts->orders, metrics.persisted.value(),
        metrics.duplicates.value(), metrics.entry_failures.value(), metrics.dead_letters.value(),
        metrics.db_errors.value(), info->pending, info->lag));
  }

  RunResult result{backend, batch, n, elapsed, store.insert_time(), passes};
  testing::Stop(io, connection);
  db.join();
  real_store.reset();
  if (!dir.empty()) std::filesystem::remove_all(dir);
  if (!database.empty()) mariadb->Query(fmt::format("DROP DATABASE `{}`", database));
  // Leave nothing behind in the shared redis-server either.
  redis.Command({"DEL", keys.meta(), keys.stock(), keys.buyers(), keys.orders(), keys.stream(),
                 keys.user_orders(), keys.failures(), keys.dead()});
  return result;
}

std::string RedisVersion(const testing::RedisServer& redis) {
  const std::string info = redis.String({"INFO", "server"});
  const std::string_view key = "redis_version:";
  const size_t at = info.find(key);
  if (at == std::string::npos) return "?";
  const size_t end = info.find_first_of("\r\n", at);
  return info.substr(at + key.size(), end - at - key.size());
}

int Cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
}

std::string Kernel() {
  utsname name{};
  if (::uname(&name) != 0) return "?";
  return fmt::format("{} {} {}", name.sysname, name.release, name.machine);
}

struct Args {
  std::optional<int64_t> orders;
  std::vector<Backend> backends = {Backend::kSqlite, Backend::kMariaDb};
  std::vector<int64_t> batches = {1, 10, 100, 1000};
  int64_t rounds = 3;
};

std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> parts;
  for (size_t pos = 0; pos <= text.size();) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    if (comma > pos) parts.emplace_back(text.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return parts;
}

int64_t ParsePositive(const std::string& text, std::string_view what) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 1)
    Fail(fmt::format("{} '{}' is not a positive number", what, text));
  return value;
}

constexpr std::string_view kUsage =
    "usage: pipeline_bench [--orders N] [--backends sqlite,mariadb] [--batches 1,10,100,1000]\n"
    "                      [--rounds R]\n"
    "  --orders N    order intents per run (default: 20000 for batch >= 100, 10000 for batch >=\n"
    "                10, 2000 below)\n"
    "  --rounds R    runs of every configuration, alternating; the best is reported (default 3)\n";

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (i + 1 >= argc) Fail(fmt::format("{} needs a value\n{}", flag, kUsage));
    const std::string value = argv[++i];
    if (flag == "--orders") {
      args.orders = ParsePositive(value, "--orders");
    } else if (flag == "--backends") {
      args.backends.clear();
      for (const auto& name : SplitCommas(value)) {
        if (name == "sqlite") {
          args.backends.push_back(Backend::kSqlite);
        } else if (name == "mariadb" || name == "mysql") {
          args.backends.push_back(Backend::kMariaDb);
        } else {
          Fail(fmt::format("unknown backend '{}' (sqlite, mariadb)", name));
        }
      }
    } else if (flag == "--rounds") {
      args.rounds = ParsePositive(value, "--rounds");
    } else if (flag == "--batches") {
      args.batches.clear();
      for (const auto& batch : SplitCommas(value))
        args.batches.push_back(ParsePositive(batch, "batch"));
    } else {
      Fail(fmt::format("unknown flag '{}'\n{}", flag, kUsage));
    }
  }
  if (args.backends.empty() || args.batches.empty()) Fail("nothing to run");
  return args;
}

int Main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  spdlog::set_level(spdlog::level::warn);

  const testing::RedisServer redis;  // AOF off: the figure is the consumer's and the database's
  std::optional<testing::MariaDbServer> mariadb;
  bool with_mariadb = false;
  for (Backend backend : args.backends) with_mariadb |= backend == Backend::kMariaDb;
  if (with_mariadb) mariadb.emplace();

  std::cout << "order pipeline: one OrderConsumer draining N intents into the database\n";
  std::cout << fmt::format("machine: {} cores, {}, redis {}, sqlite {}", Cores(), Kernel(),
                           RedisVersion(redis), sqlite3_libversion());
  if (mariadb) {
    std::cout << fmt::format(", mariadb {} (innodb_flush_log_at_trx_commit={})",
                             mariadb->Scalar("SELECT VERSION()"),
                             mariadb->Scalar("SELECT @@innodb_flush_log_at_trx_commit"));
  }
  std::cout << "\n";
  std::cout << "redis and mariadb over unix sockets; sqlite WAL, synchronous=NORMAL; files under "
            << std::filesystem::temp_directory_path().string() << "\n\n";

  // Rounds alternate over every configuration; each configuration's best round is reported (a
  // shared machine only ever slows a round down), with its slowest for the spread.
  struct Measured {
    Backend backend;
    int64_t batch;
    std::optional<RunResult> best, worst;
  };
  std::vector<Measured> measured;
  for (Backend backend : args.backends) {
    for (int64_t batch : args.batches) measured.push_back({backend, batch, {}, {}});
  }
  for (int64_t round = 1; round <= args.rounds; ++round) {
    for (Measured& m : measured) {
      const int64_t n = args.orders.value_or(DefaultOrders(m.batch));
      const RunResult r = RunOne(m.backend, m.batch, n, redis, mariadb ? &*mariadb : nullptr);
      std::cerr << fmt::format("round {}: {} batch {}: {:.0f} orders/s\n", round, Name(m.backend),
                               m.batch, r.Rate());
      if (!m.best || r.Rate() > m.best->Rate()) m.best = r;
      if (!m.worst || r.Rate() < m.worst->Rate()) m.worst = r;
    }
  }

  std::cout << fmt::format(
      "best of {} rounds; \"slowest\": the slowest round; \"store\": orders / time "
      "inside InsertOrders; \"in db\": that time's share of the run\n\n",
      args.rounds);
  const auto row = [](const std::string& backend, const std::string& batch,
                      const std::string& orders, const std::string& seconds,
                      const std::string& rate, const std::string& slowest,
                      const std::string& store_rate, const std::string& share,
                      const std::string& aim) {
    std::cout << fmt::format("{:<8} {:>5} {:>7} {:>8} {:>10} {:>10} {:>10} {:>6}  {}\n", backend,
                             batch, orders, seconds, rate, slowest, store_rate, share, aim);
  };
  row("backend", "batch", "orders", "seconds", "orders/s", "slowest", "store", "in db", "aim");
  for (const Measured& m : measured) {
    const RunResult& r = *m.best;
    row(std::string(Name(m.backend)), std::to_string(m.batch), std::to_string(r.orders),
        fmt::format("{:.3f}", r.elapsed.count()), fmt::format("{:.0f}", r.Rate()),
        fmt::format("{:.0f}", m.worst->Rate()), fmt::format("{:.0f}", r.StoreRate()),
        fmt::format("{:.0f} %", 100 * r.StoreShare()),
        fmt::format("{} {:.0f}", r.Rate() >= Aim(m.backend) ? "meets" : "below", Aim(m.backend)));
  }

  // The aim is for batching: the best batched (batch >= 100) figure of each backend.
  std::cout << "\n";
  for (Backend backend : args.backends) {
    const RunResult* best = nullptr;
    for (const Measured& m : measured) {
      if (m.backend == backend && m.batch >= 100 && (!best || m.best->Rate() > best->Rate())) {
        best = &*m.best;
      }
    }
    if (best == nullptr) continue;
    std::cout << fmt::format(
        "{:<8} with batching: {:.0f} orders/s at batch {}: {} the {:.0f} "
        "orders/s aim\n",
        Name(backend), best->Rate(), best->batch, best->Rate() >= Aim(backend) ? "meets" : "below",
        Aim(backend));
  }
  return 0;
}

}  // namespace
}  // namespace flashsale::bench

int main(int argc, char** argv) {
  try {
    return flashsale::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "pipeline_bench: " << e.what() << "\n";
    return 1;
  }
}
