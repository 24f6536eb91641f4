// The operator-facing surface of the `flashsale` binary as a process: --version and help, and
// JSON logs (`--log-format json`: every stderr line one JSON object; the access log's record of
// a purchase names its activity, order id and outcome).

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"
#include "support/flashsale_process.h"
#include "support/http_client.h"

namespace flashsale {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FlashsaleProcess;
using testing::FreePort;
using testing::HttpClient;
using testing::ReadFile;
using testing::TempDir;

// Runs the binary with `args` to its end (bounded); its exit code and output.
std::pair<int, std::string> RunBinary(const std::vector<std::string>& args, const TempDir& dir) {
  std::vector<std::string> argv = {FLASHSALE_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = dir / "run.log";
  std::remove(log.c_str());
  auto child = base::Subprocess::Spawn(argv, log);
  if (!child.ok() || !child->Wait(seconds(30))) return {-1, ""};
  const auto status = child->exit_status();
  return {status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1, ReadFile(log)};
}

TEST(OpsProcessTest, VersionNamesTheProjectVersionAndTheCommit) {
  TempDir dir("fs-ops");
  const auto [code, out] = RunBinary({"--version"}, dir);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out.rfind(fmt::format("flashsale {} (commit ", FLASHSALE_PROJECT_VERSION), 0), 0U)
      << out;
  EXPECT_EQ(RunBinary({"version"}, dir).second, out);
  const auto [help_code, help] = RunBinary({"help"}, dir);
  EXPECT_EQ(help_code, 0);
  for (std::string_view command : {"serve", "worker", "token", "load", "help"}) {
    EXPECT_NE(help.find(command), std::string::npos) << help;
  }
  const auto [serve_code, serve_help] = RunBinary({"help", "serve"}, dir);
  EXPECT_EQ(serve_code, 0);
  EXPECT_NE(serve_help.find("--log-format"), std::string::npos) << serve_help;
  EXPECT_EQ(RunBinary({"help", "nonsense"}, dir).first, 2);
}

TEST(OpsProcessTest, JsonLogsAreOneObjectPerLineAndNameThePurchase) {
  TempDir dir("fs-ops");
  const uint16_t port = FreePort();
  // stderr alone, in its own file: `exec` keeps the pid, so the child is flashsale itself.
  const std::string command = fmt::format(
      "exec '{}' serve --demo --data-dir '{}' --listen 127.0.0.1:{} --threads 1 "
      "--log-format json --access-log-sample 1 2>'{}'",
      FLASHSALE_BINARY, dir / "data", port, dir / "stderr.log");
  FlashsaleProcess serve("/bin/sh", {"-c", command}, dir / "stdout.log", dir / "data");
  ASSERT_TRUE(testing::WaitHealthy(serve, port, seconds(30)));

  HttpClient client("127.0.0.1", port);
  auto bought = client.Post("/api/v1/activities/demo/purchase", "", {{"X-User-Id", "alice"}});
  ASSERT_EQ(bought.status, 200);
  const json::value reply = json::parse(bought.body);
  const std::string order_id(reply.at("order_id").as_string());

  // The access record is written after the reply: wait for it (bounded).
  std::string logs;
  const auto until = std::chrono::steady_clock::now() + seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    logs = ReadFile(dir / "stderr.log");
    if (logs.find(order_id) != std::string::npos) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  serve.Signal(SIGTERM);
  ASSERT_TRUE(serve.WaitExit(seconds(30)).has_value());
  logs = ReadFile(dir / "stderr.log");

  int records = 0;
  int purchase_records = 0;
  std::istringstream lines(logs);
  for (std::string line; std::getline(lines, line);) {
    boost::system::error_code error;
    const json::value record = json::parse(line, error);
    ASSERT_FALSE(error) << "not JSON: " << line;
    ASSERT_TRUE(record.is_object()) << line;
    const json::object& fields = record.as_object();
    for (std::string_view key : {"time", "level", "message"}) {
      ASSERT_TRUE(fields.contains(key) && fields.at(key).is_string()) << key << " in " << line;
    }
    ++records;
    const auto* order = fields.if_contains("order_id");
    if (order != nullptr && order->as_string() == order_id) {
      ++purchase_records;
      EXPECT_EQ(fields.at("level").as_string(), "info");
      EXPECT_EQ(fields.at("activity").as_string(), "demo");
      EXPECT_EQ(fields.at("outcome").as_string(), "reserved");
      EXPECT_EQ(fields.at("status").as_int64(), 200);
      EXPECT_EQ(fields.at("method").as_string(), "POST");
      EXPECT_EQ(fields.at("target").as_string(), "/api/v1/activities/demo/purchase");
    }
  }
  EXPECT_GE(records, 3) << logs;  // a consumer started, the accesses, the shutdown
  EXPECT_EQ(purchase_records, 1) << logs;
  // The banner stays on stdout for people; stderr is for the shipper.
  EXPECT_NE(ReadFile(dir / "stdout.log").find("flashsale serving on"), std::string::npos);
}

}  // namespace
}  // namespace flashsale
