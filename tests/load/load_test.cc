// The load generator and the sale's verification against a real `flashsale serve` process (its
// own embedded redis-server and SQLite file in a temporary directory): closed loop, open loop and
// a burst sell exactly the stock and verify; token identity; and verification that fails, naming
// its check, when the database was tampered with. Counts only, never timings.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "load/load_generator.h"
#include "load/verify.h"
#include "support/flashsale_process.h"
#include "support/http_client.h"

namespace flashsale {
namespace {

using std::chrono::seconds;
using testing::FlashsaleProcess;
using testing::HttpClient;
using testing::TempDir;

constexpr std::string_view kAdminToken = "load-test-admin-token";

// A running `flashsale serve` in a fresh data directory.
class Serve {
 public:
  explicit Serve(const std::string& identity)
      : data_dir_(tmp_ / "data"), port_(testing::FreePort()) {
    process_ = std::make_unique<FlashsaleProcess>(
        FLASHSALE_BINARY,
        std::vector<std::string>{"serve", "--listen", fmt::format("127.0.0.1:{}", port_),
                                 "--data-dir", data_dir_, "--identity", identity, "--threads", "2",
                                 "--admin-token", std::string(kAdminToken), "--log-level", "warn"},
        tmp_ / "serve.log", data_dir_);
  }

  ::testing::AssertionResult Start() { return testing::WaitHealthy(*process_, port_, seconds(20)); }

  // An open activity with `stock` units, one per user.
  ::testing::AssertionResult CreateActivity(const std::string& id, int64_t stock) {
    HttpClient client("127.0.0.1", port_);
    const std::string body = fmt::format(
        R"({{"id":"{}","stock":{},"per_user_limit":1,"start_ms":0,"end_ms":4000000000000}})", id,
        stock);
    auto created = client.Post("/api/v1/admin/activities", body,
                               {{"Authorization", "Bearer " + std::string(kAdminToken)}});
    if (created.status == 200 || created.status == 201) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << created.status << " " << created.body;
  }

  // An open lottery: `prize_stock` mugs of weight 1 against a no-prize weight of 3, one draw per
  // user (most draws win nothing, as in the demo lottery).
  ::testing::AssertionResult CreateLottery(const std::string& id, int64_t prize_stock) {
    HttpClient client("127.0.0.1", port_);
    const std::string body = fmt::format(
        R"({{"id":"{}","kind":"lottery","per_user_limit":1,"start_ms":0,"end_ms":4000000000000,)"
        R"("no_prize_weight":3,"prizes":[{{"id":"mug","name":"Mug","weight":1,"stock":{}}}]}})",
        id, prize_stock);
    auto created = client.Post("/api/v1/admin/activities", body,
                               {{"Authorization", "Bearer " + std::string(kAdminToken)}});
    if (created.status == 200 || created.status == 201) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << created.status << " " << created.body;
  }

  load::LoadOptions Load(const std::string& activity) const {
    load::LoadOptions options;
    options.port = port_;
    options.activity = activity;
    options.keep_order_ids = true;
    options.request_timeout_ms = 10000;
    return options;
  }

  load::VerifyOptions Verify(const std::string& activity, const load::LoadReport& report) const {
    load::VerifyOptions options;
    options.redis_url = "unix://" + data_dir_ + "/redis.sock";
    options.db_url = "sqlite:" + db_path();
    options.activity = activity;
    options.reserved_replies = report.Count(1);
    options.reserved_order_ids = report.reserved_order_ids;
    options.drain_timeout_ms = 30000;
    return options;
  }

  std::string db_path() const { return data_dir_ + "/flashsale.db"; }
  const std::string& data_dir() const { return data_dir_; }
  uint16_t port() const { return port_; }
  std::string Log() const { return process_->Log(); }
  const TempDir& tmp() const { return tmp_; }

 private:
  TempDir tmp_;
  std::string data_dir_;
  uint16_t port_;
  std::unique_ptr<FlashsaleProcess> process_;
};

std::string Describe(const load::LoadReport& report) {
  return load::FormatReport(report, "load report:");
}

// All `requests` answered, no errors: exactly `stock` reserved (each with an order id), the rest
// sold out.
::testing::AssertionResult SoldExactly(const load::LoadReport& report, int64_t requests,
                                       int64_t stock) {
  const bool sold = report.completed == requests && report.ErrorCount() == 0 &&
                    report.Count(1) == stock && report.Count(-1) == requests - stock &&
                    static_cast<int64_t>(report.reserved_order_ids.size()) == stock;
  if (sold) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected " << stock << " reserved and "
                                       << requests - stock << " sold out of " << requests << "\n"
                                       << Describe(report);
}

// Every check passed, or the ones that did not with what they saw.
::testing::AssertionResult Verified(const base::Result<load::Verification>& verification) {
  if (!verification.ok()) {
    return ::testing::AssertionFailure() << "could not verify: " << verification.error().ToString();
  }
  if (verification->checks.size() != 8) {
    return ::testing::AssertionFailure() << verification->checks.size() << " checks, not 8";
  }
  if (!verification->ok()) {
    return ::testing::AssertionFailure() << load::FormatVerification(*verification);
  }
  return ::testing::AssertionSuccess();
}

bool Failed(const load::Verification& verification, std::string_view check) {
  for (const load::VerifyCheck& c : verification.checks) {
    if (c.name == check) return !c.passed;
  }
  ADD_FAILURE() << "no check named " << check;
  return false;
}

// Runs SQL on the serve's SQLite file (WAL: alongside the running server).
void Tamper(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << sql << ": " << message;
}

TEST(LoadTest, ClosedLoopSellsExactlyTheStockAndTheSaleVerifies) {
  Serve serve("gateway");
  ASSERT_TRUE(serve.Start());
  ASSERT_TRUE(serve.CreateActivity("closed", 40));

  load::LoadOptions options = serve.Load("closed");
  options.mode = load::LoadMode::kClosed;
  options.connections = 16;
  options.threads = 2;
  options.requests = 200;
  options.users = 200;  // sequential: 200 different users
  auto report = load::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->sent, 200) << Describe(*report);
  EXPECT_TRUE(SoldExactly(*report, 200, 40));
  EXPECT_EQ(report->statuses.at(1), "reserved");
  EXPECT_EQ(report->statuses.at(-1), "sold_out");
  EXPECT_EQ(report->http_statuses.at(200), 200) << Describe(*report);
  EXPECT_EQ(report->latency.count(), 200);

  EXPECT_TRUE(Verified(load::VerifySale(serve.Verify("closed", *report))));
}

TEST(LoadTest, OpenLoopAndABurstSellExactlyTheStockAndTheSalesVerify) {
  Serve serve("gateway");
  ASSERT_TRUE(serve.Start());
  ASSERT_TRUE(serve.CreateActivity("open", 25));
  ASSERT_TRUE(serve.CreateActivity("burst", 30));

  load::LoadOptions open = serve.Load("open");
  open.mode = load::LoadMode::kOpen;
  open.rate = 400;
  open.requests = 100;
  open.connections = 20;
  open.users = 100;
  auto open_report = load::RunLoad(open);
  ASSERT_TRUE(open_report.ok()) << open_report.error().ToString();
  EXPECT_TRUE(SoldExactly(*open_report, 100, 25));
  EXPECT_EQ(open_report->latency.count(), 100);
  EXPECT_TRUE(Verified(load::VerifySale(serve.Verify("open", *open_report))));

  // A burst: 150 users (random ids among a billion, seeded) within 0.2 s on 150 connections.
  load::LoadOptions burst = serve.Load("burst");
  burst.mode = load::LoadMode::kOpen;
  burst.requests = 150;
  burst.rate = 150 / 0.2;
  burst.connections = 150;
  burst.threads = 2;
  burst.users = 1'000'000'000;
  burst.random_users = true;
  burst.seed = 7;
  auto burst_report = load::RunLoad(burst);
  ASSERT_TRUE(burst_report.ok()) << burst_report.error().ToString();
  EXPECT_TRUE(SoldExactly(*burst_report, 150, 30));
  EXPECT_TRUE(Verified(load::VerifySale(serve.Verify("burst", *burst_report))));
}

TEST(LoadTest, TokenIdentitySignsWithTheServersSecretAndAWrongSecretIsRefused) {
  Serve serve("token");
  ASSERT_TRUE(serve.Start());
  ASSERT_TRUE(serve.CreateActivity("tokens", 10));
  const std::string secret = testing::ReadFile(serve.data_dir() + "/secret");
  ASSERT_GE(secret.size(), 16u);

  load::LoadOptions wrong = serve.Load("tokens");
  wrong.token_secret = "not-the-server-secret-at-all";
  wrong.requests = 20;
  wrong.connections = 4;
  auto refused = load::RunLoad(wrong);
  ASSERT_TRUE(refused.ok()) << refused.error().ToString();
  EXPECT_EQ(refused->http_statuses[401], 20) << Describe(*refused);
  EXPECT_EQ(refused->Count(1), 0) << Describe(*refused);

  load::LoadOptions right = serve.Load("tokens");
  right.token_secret = secret.substr(0, secret.find('\n'));
  right.requests = 50;
  right.users = 50;
  right.connections = 8;
  auto report = load::RunLoad(right);
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_TRUE(SoldExactly(*report, 50, 10));
  EXPECT_TRUE(Verified(load::VerifySale(serve.Verify("tokens", *report))));
}

// Draws of a lottery with a no-prize weight: Redis records every draw (a no-prize draw too, so a
// retry replays it), the database only the wins. The verification compares wins with rows, and
// passes; the binary's own `--action draw` run verifies too.
TEST(LoadTest, DrawsOfALotteryWithANoPrizeWeightVerify) {
  Serve serve("gateway");
  ASSERT_TRUE(serve.Start());
  ASSERT_TRUE(serve.CreateLottery("raffle", 200));

  load::LoadOptions options = serve.Load("raffle");
  options.action = "draw";
  options.requests = 120;
  options.users = 120;
  options.connections = 8;
  auto report = load::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->completed, 120) << Describe(*report);
  EXPECT_EQ(report->ErrorCount(), 0) << Describe(*report);
  // Weights 1 : 3 over 120 draws: both outcomes all but certainly occur (each is missing with a
  // chance below 1e-14), and the prizes (200) never run out.
  ASSERT_GT(report->Count(1), 0) << Describe(*report);
  ASSERT_GT(report->Count(2), 0) << Describe(*report);
  EXPECT_EQ(report->Count(1) + report->Count(2), 120) << Describe(*report);

  auto verification = load::VerifySale(serve.Verify("raffle", *report));
  EXPECT_TRUE(Verified(verification));
  if (verification.ok()) {
    const std::string text = load::FormatVerification(*verification);
    EXPECT_NE(text.find(fmt::format("{} draws that won nothing", report->Count(2))),
              std::string::npos)
        << text;
  }

  FlashsaleProcess run(
      FLASHSALE_BINARY,
      {"load", "--url", fmt::format("http://127.0.0.1:{}", serve.port()), "--activity", "raffle",
       "--action", "draw", "--data-dir", serve.data_dir(), "--requests", "40", "--users", "1000000",
       "--user-ids", "random", "--connections", "4", "--drain-timeout-ms", "20000"},
      serve.tmp() / "draw.log");
  const auto status = run.WaitExit(seconds(60));
  ASSERT_TRUE(status.has_value()) << run.Log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << base::DescribeExitStatus(*status) << "\n"
      << run.Log();
  EXPECT_NE(run.Log().find("verified: the sale holds together"), std::string::npos) << run.Log();
}

TEST(LoadTest, AnUnreachableServerIsCountedAsConnectionErrorsNotACrash) {
  load::LoadOptions options;
  options.port = testing::FreePort();  // nobody listens
  options.requests = 10;
  options.connections = 2;
  options.connect_timeout_ms = 1000;
  auto report = load::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->completed, 0);
  EXPECT_EQ(report->sent, 10);
  EXPECT_GE(report->errors["connect"], 10) << Describe(*report);
  EXPECT_EQ(report->latency.count(), 0);
}

TEST(LoadTest, VerificationFailsNamingTheCheckWhenTheDatabaseIsTamperedWith) {
  Serve serve("gateway");
  ASSERT_TRUE(serve.Start());
  ASSERT_TRUE(serve.CreateActivity("tamper", 20));
  load::LoadOptions options = serve.Load("tamper");
  options.requests = 60;
  options.users = 60;
  options.connections = 8;
  auto report = load::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  ASSERT_TRUE(SoldExactly(*report, 60, 20));
  ASSERT_TRUE(Verified(load::VerifySale(serve.Verify("tamper", *report))));

  // A lost row: one order the buyer was told "reserved" is gone from the record.
  const std::string lost = report->reserved_order_ids.front();
  Tamper(serve.db_path(), fmt::format("DELETE FROM orders WHERE order_id = '{}'", lost));
  auto after_delete = load::VerifySale(serve.Verify("tamper", *report));
  ASSERT_TRUE(after_delete.ok()) << after_delete.error().ToString();
  EXPECT_FALSE(after_delete->ok());
  EXPECT_TRUE(Failed(*after_delete, "db units")) << load::FormatVerification(*after_delete);
  EXPECT_TRUE(Failed(*after_delete, "lost intents")) << load::FormatVerification(*after_delete);
  EXPECT_FALSE(Failed(*after_delete, "redis stock")) << load::FormatVerification(*after_delete);
  EXPECT_NE(load::FormatVerification(*after_delete).find(lost), std::string::npos);

  // The binary says so too: exit 1 and the failed check's name.
  const testing::TempDir& tmp = serve.tmp();
  FlashsaleProcess run(FLASHSALE_BINARY,
                       {"load", "--url", fmt::format("http://127.0.0.1:{}", serve.port()),
                        "--activity", "tamper", "--data-dir", serve.data_dir(), "--requests", "5",
                        "--connections", "2", "--drain-timeout-ms", "20000"},
                       tmp / "load.log");
  const auto status = run.WaitExit(seconds(60));
  ASSERT_TRUE(status.has_value()) << run.Log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1)
      << base::DescribeExitStatus(*status) << "\n"
      << run.Log();
  EXPECT_NE(run.Log().find("FAIL  db units"), std::string::npos) << run.Log();
  EXPECT_NE(run.Log().find("verification FAILED"), std::string::npos) << run.Log();

  // An intent recorded twice: a copy of a row under another order id (the copy claims not to be
  // a limit-1 order, so the schema's own guard lets it in).
  const std::string copied = report->reserved_order_ids.back();
  Tamper(serve.db_path(),
         fmt::format("INSERT INTO orders (order_id, activity_id, user_id, quantity, items, state, "
                     "single_unit, created_ms, persisted_ms, stream_id) SELECT order_id || 'x', "
                     "activity_id, user_id, quantity, items, state, 0, created_ms, persisted_ms, "
                     "stream_id FROM orders WHERE order_id = '{}'",
                     copied));
  auto after_copy = load::VerifySale(serve.Verify("tamper", *report));
  ASSERT_TRUE(after_copy.ok()) << after_copy.error().ToString();
  EXPECT_TRUE(Failed(*after_copy, "duplicate orders")) << load::FormatVerification(*after_copy);
  EXPECT_TRUE(Failed(*after_copy, "per-user limit")) << load::FormatVerification(*after_copy);
}

TEST(LoadTest, TheCommandRefusesSettingsThatMakeNoRunWithExit2) {
  TempDir tmp;
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"load", "--mode", "open", "--requests", "10"}, "open loop needs a rate"},
      {{"load", "--connections", "3"}, "number of requests or a duration"},
      {{"load", "--requests", "1", "--verify"}, "--verify needs the sale's Redis and database"},
      {{"load", "--requests", "1", "--identity", "token"}, "token identity needs"},
      {{"load", "--requests", "1", "--url", "ftp://x"}, "must be http://host:port"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    FlashsaleProcess run(FLASHSALE_BINARY, cases[i].args, tmp / fmt::format("case{}.log", i));
    const auto status = run.WaitExit(seconds(30));
    ASSERT_TRUE(status.has_value()) << cases[i].says;
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2)
        << cases[i].says << ": " << base::DescribeExitStatus(*status) << "\n"
        << run.Log();
    EXPECT_NE(run.Log().find(cases[i].says), std::string::npos) << run.Log();
  }
}

}  // namespace
}  // namespace flashsale
