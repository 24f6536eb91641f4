// Faults under load: SCRIPT FLUSH in the middle of a sale (zero failed calls), and redis-server
// killed with SIGKILL and restarted from its AOF in the middle of a sale (calls fail clearly while
// it is down, succeed after, and no order is recorded twice).

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "keyspace/activity_fixture.h"
#include "keyspace/embedded_scripts.h"
#include "support/reserve_load.h"

namespace flashsale::keyspace {
namespace {

using core::Outcome;
using testing::RedisServer;
using testing::RedisServerOptions;
using namespace std::chrono_literals;

// Checks a finished sale against Redis: the stream holds exactly the orders reported reserved,
// each once, and the counters add up.
void ExpectExactSale(const RedisServer& server, const ActivityKeys& keys,
                     const testing::ReserveLoadReport& report, int64_t stock) {
  std::set<std::string> reserved;
  for (const auto& attempt : report.attempts) {
    if (attempt.resolved && attempt.outcome == Outcome::kReserved) {
      EXPECT_TRUE(reserved.insert(attempt.order_id).second);
    }
  }
  auto entries = server.Command({"XRANGE", keys.stream(), "-", "+"});
  std::multiset<std::string> in_stream;
  for (auto& fields : testing::StreamIntents(entries.get())) in_stream.insert(fields["order_id"]);
  EXPECT_EQ(in_stream.size(), reserved.size());
  EXPECT_EQ(std::set<std::string>(in_stream.begin(), in_stream.end()), reserved);
  EXPECT_EQ(server.Integer({"HLEN", keys.orders()}), static_cast<int64_t>(reserved.size()));
  const int64_t remaining = server.Integer({"GET", keys.stock()});
  EXPECT_GE(remaining, 0);
  EXPECT_EQ(remaining + static_cast<int64_t>(reserved.size()), stock);
}

class ScriptFlushTest : public testing::ActivityFixture {};

TEST_F(ScriptFlushTest, FlushesInTheMiddleOfASaleFailNoCall) {
  constexpr int64_t kStock = 5000;
  ASSERT_TRUE(SetUpActivity(Activity("flush", kStock, 1)).ok());
  testing::ReserveLoadOptions options;
  options.url = server_->unix_url();
  options.key_namespace = ns_;
  options.activity_id = "flush";
  options.attempts = 40000;
  options.users = 1000000;
  options.now_ms = 1500;
  options.midway_at = 5000;
  options.midway = [&] {
    for (int i = 0; i < 5; ++i) {
      server_->Command({"SCRIPT", "FLUSH"});
      std::this_thread::sleep_for(20ms);
    }
  };
  const auto report = testing::RunReserveLoad(options);
  ASSERT_EQ(report.caller_exceptions, 0);
  EXPECT_EQ(report.failed_calls, 0)
      << (report.sample_errors.empty() ? "" : report.sample_errors[0]);
  EXPECT_EQ(report.Unresolved(), 0);
  EXPECT_GT(report.script_reloads, 0u) << "the flushes should have hit calls in flight";
  for (const auto& attempt : report.attempts) EXPECT_EQ(attempt.calls, 1);
  EXPECT_EQ(report.Count(Outcome::kReserved), kStock);
  ExpectExactSale(*server_, Keys("flush"), report, kStock);
}

TEST(RedisRestartTest, KilledAndRestartedMidSaleNothingReservedTwice) {
  // appendfsync always: every write Redis acknowledged survives SIGKILL.
  RedisServer server(RedisServerOptions{.appendonly = true, .appendfsync = "always"});
  const std::string ns = testing::UniqueNamespace();
  constexpr int64_t kStock = 3000;
  {
    testing::IoThread io;
    auto connection = testing::Connect(io, server.tcp_url());
    redis::ScriptRunner runner(connection, keyspace::Scripts());
    ActivityScripts scripts(runner, ns);
    core::Activity activity = testing::ActivityFixture::Activity("crash", kStock, 1);
    auto setup = io.Run(scripts.AsyncSetup(activity, boost::asio::use_awaitable));
    ASSERT_TRUE(setup.ok()) << setup.error().ToString();
    testing::Stop(io, connection);
  }

  testing::ReserveLoadOptions options;
  options.url = server.tcp_url();
  options.key_namespace = ns;
  options.activity_id = "crash";
  options.attempts = 20000;
  options.users = 1000000;
  options.now_ms = 1500;
  options.call_timeout = 500ms;
  options.midway_at = 4000;
  options.midway = [&] {
    server.Kill();
    std::this_thread::sleep_for(500ms);  // down for a while, under load
    server.Start();
  };
  const auto report = testing::RunReserveLoad(options);

  ASSERT_EQ(report.caller_exceptions, 0);
  EXPECT_EQ(report.Unresolved(), 0);
  // While it was down, calls failed, each with a code that says what happened and a message
  // that names the server.
  EXPECT_GT(report.failed_calls, 0);
  for (const auto& [code, count] : report.error_codes) {
    EXPECT_TRUE(code == base::ErrorCode::kUnavailable || code == base::ErrorCode::kUnknownOutcome)
        << base::ToString(code) << " x" << count;
  }
  for (const auto& message : report.sample_errors) {
    EXPECT_NE(message.find("127.0.0.1"), std::string::npos) << message;
  }
  // After the restart the sale went on: it sold out.
  EXPECT_EQ(report.Count(Outcome::kReserved), kStock);
  ActivityKeys keys(ns, "crash");
  ExpectExactSale(server, keys, report, kStock);
}

}  // namespace
}  // namespace flashsale::keyspace
