// Issue 35, point 3: `flashsale orders export` as a person runs it, against a real `flashsale
// serve` on a fresh data directory: the command finds the server and its admin token through
// --data-dir, walks the admin API's pages and writes them as they arrive. The last test (label
// `slow`) exports 1,000,000 orders written straight into the SQLite record and checks that the
// command's peak resident memory stays bounded: one page in memory at a time, whatever the size.
// Every child is killed by PID at the end of its test; every wait is bounded.

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/flashsale_process.h"
#include "support/http_client.h"

extern char** environ;

namespace flashsale {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FreePort;
using testing::HttpClient;
using testing::ReadFile;
using testing::TempDir;

constexpr auto kStartupTimeout = seconds(20);

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FLASHSALE_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FLASHSALE_TEST_ASAN 1
#endif

// A serve on a fresh data directory (SQLite record in it), its admin token read once healthy.
struct Service {
  TempDir tmp{"fs-export"};
  std::string data_dir = tmp / "data";
  uint16_t port = FreePort();
  testing::FlashsaleProcess serve;
  std::string admin_token;

  Service()
      : serve(FLASHSALE_BINARY,
              {"serve", "--listen", fmt::format("127.0.0.1:{}", port), "--data-dir", data_dir,
               "--threads", "2"},
              tmp / "serve.log", data_dir) {}

  ::testing::AssertionResult Start() {
    auto healthy = testing::WaitHealthy(serve, port, kStartupTimeout);
    if (!healthy) return healthy;
    std::string token = ReadFile(data_dir + "/admin-token");
    admin_token = token.substr(0, token.find('\n'));
    return ::testing::AssertionSuccess();
  }
  int Create(const std::string& body) {
    HttpClient client("127.0.0.1", port);
    return client
        .Post("/api/v1/admin/activities", body, {{"Authorization", "Bearer " + admin_token}})
        .status;
  }
  // Runs SQL on the record, as a second connection (the serve holds its own), in one transaction.
  void Sql(const std::string& sql) const {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((data_dir + "/flashsale.db").c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    char* message = nullptr;
    const int rc =
        sqlite3_exec(db, ("BEGIN;" + sql + ";COMMIT;").c_str(), nullptr, nullptr, &message);
    const std::string text = message ? message : "";
    sqlite3_free(message);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << text;
  }
};

// `count` orders of `activity` (ids <prefix>00000000 up), every third paid and every third
// cancelled, written with one INSERT ... SELECT in one transaction.
std::string InsertOrdersSql(const std::string& activity, const std::string& prefix, int64_t count) {
  return fmt::format(
      "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {2}) "
      "INSERT INTO orders (order_id, activity_id, user_id, quantity, items, state, single_unit, "
      "created_ms, persisted_ms, stream_id, draw_no, state_ms, refund_due, compensation_due) "
      "SELECT '{1}' || printf('%08d', i), '{0}', 'user-' || i, 1 + i % 2, CASE WHEN i % 5 = 0 "
      "THEN 'I' || i || ' J' || i ELSE '' END, CASE i % 3 WHEN 0 THEN 'reserved' WHEN 1 THEN "
      "'paid' ELSE 'cancelled' END, 0, 1000 + i, 2000 + i, '1-' || i, 0, CASE i % 3 WHEN 0 THEN 0 "
      "ELSE 3000 + i END, 0, 0 FROM n",
      activity, prefix, count);
}

struct Measured {
  std::optional<int> status;  // empty: killed at the deadline
  int64_t max_rss_kb = 0;     // the child's peak resident set (getrusage's ru_maxrss)
  milliseconds elapsed{0};
};

// `flashsale args...` to completion (SIGKILLed at `deadline`), stdout and stderr to `log`, with
// `env` added to the environment; the child's own peak memory from wait4's rusage.
Measured RunMeasured(const std::vector<std::string>& args, const std::string& log,
                     std::chrono::seconds deadline, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {FLASHSALE_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> arg_pointers;
  for (std::string& arg : argv) arg_pointers.push_back(arg.data());
  arg_pointers.push_back(nullptr);
  std::vector<std::string> environment = env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view line = *entry;
    bool replaced = false;
    for (const std::string& added : env) {
      if (line.substr(0, line.find('=') + 1) == added.substr(0, added.find('=') + 1)) {
        replaced = true;
      }
    }
    if (!replaced) environment.emplace_back(line);
  }
  std::vector<char*> env_pointers;
  for (std::string& entry : environment) env_pointers.push_back(entry.data());
  env_pointers.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, arg_pointers[0], &actions, nullptr, arg_pointers.data(),
                                  env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  Measured measured;
  if (spawned != 0) {
    ADD_FAILURE() << "posix_spawn: " << std::strerror(spawned);
    return measured;
  }
  for (;;) {
    int status = 0;
    rusage usage{};
    const pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) {
      measured.status = status;
      measured.max_rss_kb = usage.ru_maxrss;
      break;
    }
    if (std::chrono::steady_clock::now() - start > deadline) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  measured.elapsed =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  return measured;
}

int ExitCode(const Measured& run) {
  return run.status && WIFEXITED(*run.status) ? WEXITSTATUS(*run.status) : -1;
}

TEST(OrdersExport, JsonAndCsvToAFileOrStdoutWithAStateFilter) {
  Service service;
  ASSERT_TRUE(service.Start()) << service.serve.Log();
  ASSERT_EQ(service.Create(R"({"id":"small","stock":100,"per_user_limit":5})"), 201);
  ASSERT_NO_FATAL_FAILURE(service.Sql(InsertOrdersSql("small", "s", 7)));
  const std::string dir = service.data_dir;

  // JSON, pages of 2, into a file: one array of every order.
  const std::string json_file = service.tmp / "small.json";
  auto run = RunMeasured({"orders", "export", "--activity", "small", "--format", "json",
                          "--page-size", "2", "--output", json_file, "--data-dir", dir},
                         service.tmp / "json.log", seconds(60));
  ASSERT_EQ(ExitCode(run), 0) << ReadFile(service.tmp / "json.log");
  EXPECT_NE(ReadFile(service.tmp / "json.log").find("7 order(s) in 4 page(s)"), std::string::npos)
      << ReadFile(service.tmp / "json.log");
  EXPECT_FALSE(std::filesystem::exists(json_file + ".partial"));
  const json::value all = json::parse(ReadFile(json_file));
  ASSERT_EQ(all.as_array().size(), 7u);
  EXPECT_EQ(all.as_array()[0].at("order_id").as_string(), "s00000000");
  EXPECT_EQ(all.as_array()[6].at("order_id").as_string(), "s00000006");
  EXPECT_EQ(all.as_array()[1].at("paid_ms").as_int64(), 3001);
  EXPECT_EQ(all.as_array()[2].at("cancelled_ms").as_int64(), 3002);
  EXPECT_EQ(json::serialize(all.as_array()[5].at("items")), R"(["I5","J5"])");

  // CSV of the paid and cancelled ones, on stdout, by the positional activity id.
  run = RunMeasured({"orders", "export", "small", "--state", "paid,cancelled", "--page-size", "3",
                     "--data-dir", dir},
                    service.tmp / "csv.log", seconds(60));
  ASSERT_EQ(ExitCode(run), 0) << ReadFile(service.tmp / "csv.log");
  const std::string csv = ReadFile(service.tmp / "csv.log");
  EXPECT_EQ(csv.find("order_id,activity_id,user_id"), 0u) << csv;
  EXPECT_EQ(csv.find("order_id", 1), std::string::npos) << "one header row:\n" << csv;
  for (const char* id : {"s00000001", "s00000002", "s00000004", "s00000005"}) {
    EXPECT_NE(csv.find(std::string("\r\n") + id + ","), std::string::npos) << id << "\n" << csv;
  }
  for (const char* id : {"s00000000", "s00000003", "s00000006"}) {
    EXPECT_EQ(csv.find(id), std::string::npos) << id << " is reserved\n" << csv;
  }

  // An activity that does not exist: exit 1, the reason, no file left behind.
  const std::string missing = service.tmp / "missing.csv";
  run = RunMeasured(
      {"orders", "export", "--activity", "nope", "--output", missing, "--data-dir", dir},
      service.tmp / "missing.log", seconds(60));
  EXPECT_EQ(ExitCode(run), 1);
  EXPECT_NE(ReadFile(service.tmp / "missing.log").find("404"), std::string::npos)
      << ReadFile(service.tmp / "missing.log");
  EXPECT_FALSE(std::filesystem::exists(missing));
  EXPECT_FALSE(std::filesystem::exists(missing + ".partial"));
  // A state the record has not: refused before any call.
  run = RunMeasured({"orders", "export", "small", "--state", "won", "--data-dir", dir},
                    service.tmp / "won.log", seconds(60));
  EXPECT_EQ(ExitCode(run), 2) << ReadFile(service.tmp / "won.log");
}

// 1,000,000 orders through `flashsale orders export` as CSV: every row, once, in order, with the
// command's peak resident memory bounded (the rows are about 70 MB of CSV; a command that held
// them would exceed the bound).
TEST(OrdersExportMillion, AMillionOrdersExportInBoundedMemory) {
  constexpr int64_t kOrders = 1'000'000;
  Service service;
  ASSERT_TRUE(service.Start()) << service.serve.Log();
  ASSERT_EQ(service.Create(R"({"id":"big","stock":2000000,"per_user_limit":5})"), 201);
  const auto insert_start = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(service.Sql(InsertOrdersSql("big", "b", kOrders)));
  const auto inserted_in =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - insert_start);

  const std::string file = service.tmp / "big.csv";
#ifdef FLASHSALE_TEST_ASAN
  // Under ASan the command's resident memory is ASan's allocator's as much as the command's: a CI
  // run (clang 14, quarantine 8 MB) saw 350 MiB where the dev build holds 12.7 MiB for the same
  // export. The bound is asserted where malloc is the program's own (the dev and release builds,
  // as alloc_integration_test's counts); here the export's rows are still checked in full.
  const std::vector<std::string> env = {"ASAN_OPTIONS=quarantine_size_mb=8:detect_leaks=0"};
  constexpr bool kBounded = false;
#else
  const std::vector<std::string> env;
  constexpr bool kBounded = true;
#endif
  constexpr int64_t kBoundKb = 64 * 1024;
  const auto run = RunMeasured({"orders", "export", "--activity", "big", "--format", "csv",
                                "--output", file, "--data-dir", service.data_dir},
                               service.tmp / "export.log", seconds(240), env);
  ASSERT_EQ(ExitCode(run), 0) << ReadFile(service.tmp / "export.log");
  std::cout << "[ export   ] " << kOrders << " orders inserted in " << inserted_in.count()
            << " ms; exported in " << run.elapsed.count() << " ms; the command's peak RSS "
            << run.max_rss_kb / 1024.0 << " MiB; file " << std::filesystem::file_size(file)
            << " bytes\n";
  RecordProperty("export_ms", static_cast<int>(run.elapsed.count()));
  RecordProperty("export_max_rss_kb", static_cast<int>(run.max_rss_kb));
  EXPECT_GT(run.max_rss_kb, 0);
  if (kBounded) {
    EXPECT_LT(run.max_rss_kb, kBoundKb) << "the command held more than a page or two";
  }

  // Every order once, by id: the ids rise row after row, and there are kOrders of them.
  std::ifstream in(file, std::ios::binary);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line.substr(0, line.find(',')), "order_id");
  int64_t rows = 0;
  std::string previous;
  int64_t paid = 0;
  while (std::getline(in, line)) {
    ASSERT_TRUE(line.ends_with('\r')) << "row " << rows << ": " << line;
    const std::string id = line.substr(0, line.find(','));
    if (id <= previous) {
      ADD_FAILURE() << "row " << rows << ": " << id << " after " << previous;
      break;
    }
    previous = id;
    if (line.find(",paid,") != std::string::npos) ++paid;
    ++rows;
  }
  EXPECT_EQ(rows, kOrders);
  EXPECT_EQ(previous, fmt::format("b{:08}", kOrders - 1));
  EXPECT_EQ(paid, kOrders / 3);
}

}  // namespace
}  // namespace flashsale
