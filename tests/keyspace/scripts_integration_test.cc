// The script registry on a real redis-server: SCRIPT LOAD of every embedded script, transparent
// reload after SCRIPT FLUSH (also with a full pipeline in flight), and the shebang flags that make
// Redis refuse a writing script over maxmemory before it runs.

#include <future>
#include <map>
#include <sstream>

#include "keyspace/activity_fixture.h"
#include "keyspace/embedded_scripts.h"

namespace flashsale::keyspace {
namespace {

using core::Outcome;
using testing::ActivityFixture;
using namespace std::chrono_literals;

class ScriptsTest : public ActivityFixture {};

TEST_F(ScriptsTest, LoadAllLoadsEveryEmbeddedScript) {
  server_->Command({"SCRIPT", "FLUSH"});
  auto loaded = io_.Run(runner_->AsyncLoadAll(boost::asio::use_awaitable));
  ASSERT_TRUE(loaded.ok()) << loaded.error().ToString();
  for (const auto& script : Scripts().scripts()) {
    auto exists = server_->Command({"SCRIPT", "EXISTS", script.sha1});
    ASSERT_EQ(exists->elements, 1u);
    EXPECT_EQ(exists->element[0]->integer, 1) << script.name;
  }
}

TEST_F(ScriptsTest, NoScriptReloadsAndRetriesTransparently) {
  ASSERT_TRUE(SetUpActivity(Activity("ns", 10)).ok());
  server_->Command({"SCRIPT", "FLUSH"});
  const uint64_t before = io_.Call([&] { return runner_->reloads(); });
  auto reserved = Reserve("ns", "o1", "alice");
  ASSERT_TRUE(reserved.ok()) << reserved.error().ToString();
  EXPECT_EQ(reserved->outcome, Outcome::kReserved);
  EXPECT_EQ(io_.Call([&] { return runner_->reloads(); }), before + 1);
  EXPECT_EQ(Status("ns").reserved, 1);  // ran once, not twice
}

TEST_F(ScriptsTest, FlushWithAFullPipelineReloadsOnceAndLosesNothing) {
  ASSERT_TRUE(SetUpActivity(Activity("pipe", 100000, 1)).ok());
  ASSERT_TRUE(Reserve("pipe", "warm", "warm").ok());  // the script is cached now
  server_->Command({"SCRIPT", "FLUSH"});
  const uint64_t reloads_before = io_.Call([&] { return runner_->reloads(); });

  // 2,000 reserves sent from one handler: all in flight at once, all answered NOSCRIPT.
  constexpr int kCalls = 2000;
  std::vector<std::string> orders, users;
  for (int i = 0; i < kCalls; ++i) {
    orders.push_back("o" + std::to_string(i));
    users.push_back("u" + std::to_string(i));
  }
  std::atomic<int> reserved = 0, failed = 0, left = kCalls;
  std::promise<void> done;
  io_.Call([&] {
    for (int i = 0; i < kCalls; ++i) {
      scripts_->Reserve("pipe", ReserveRequest{orders[i], users[i], 1, 1500},
                        Handler<Reservation>([&](base::Result<Reservation> result) {
                          if (result.ok() && result->outcome == Outcome::kReserved) {
                            ++reserved;
                          } else {
                            ++failed;
                          }
                          if (--left == 0) done.set_value();
                        }));
    }
  });
  ASSERT_EQ(done.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(reserved.load(), kCalls);
  // One SCRIPT LOAD for the whole pipeline, not one per call.
  EXPECT_EQ(io_.Call([&] { return runner_->reloads(); }), reloads_before + 1);
  EXPECT_EQ(Status("pipe").stream_length, kCalls + 1);
}

TEST_F(ScriptsTest, OverMaxmemoryAWritingScriptIsRefusedBeforeItWrites) {
  ASSERT_TRUE(SetUpActivity(Activity("oom", 10)).ok());
  ASSERT_TRUE(io_.Run(runner_->AsyncLoadAll(boost::asio::use_awaitable)).ok());
  server_->Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  server_->Command({"CONFIG", "SET", "maxmemory", "1"});

  auto refused = Reserve("oom", "o1", "alice");
  const std::string status_during = [&] {
    auto status = io_.Run(scripts_->AsyncStatus("oom", boost::asio::use_awaitable));
    return status.ok() ? "ok" : status.error().message;
  }();
  server_->Command({"CONFIG", "SET", "maxmemory", "0"});

  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, base::ErrorCode::kRemote);
  EXPECT_TRUE(refused.error().message.starts_with("OOM")) << refused.error().message;
  // The read-only status script (flags=no-writes) still runs under OOM.
  EXPECT_EQ(status_during, "ok");
  // Nothing was written: no unit taken, no intent, no buyer.
  const auto status = Status("oom");
  EXPECT_EQ(status.remaining, 10);
  EXPECT_EQ(status.reserved, 0);
  EXPECT_EQ(status.stream_length, 0);
  EXPECT_EQ(status.buyers, 0);
  // And once memory is back, the same order goes through.
  EXPECT_EQ(Reserve("oom", "o1", "alice")->outcome, Outcome::kReserved);
}

// The embedded scripts, with some bodies replaced and their headers (KEYS, ARGV, RETURNS) kept.
redis::ScriptSet WithBodies(const std::map<std::string, std::string>& bodies) {
  std::vector<std::pair<std::string, std::string>> sources;
  for (const auto& embedded : EmbeddedScripts()) {
    std::string source(embedded.source);
    if (auto body = bodies.find(std::string(embedded.name)); body != bodies.end()) {
      std::string header;
      std::istringstream lines(source);
      for (std::string line;
           std::getline(lines, line) && (line.starts_with("#!") || line.starts_with("--"));) {
        header += line + "\n";
      }
      source = header + body->second + "\n";
    }
    sources.emplace_back(std::string(embedded.name), std::move(source));
  }
  auto set = redis::ScriptSet::Parse(sources);
  if (!set) throw std::runtime_error(set.error().message);
  return std::move(*set);
}

TEST_F(ScriptsTest, AReplyThatIsNotWhatTheScriptDeclaresIsRefusedByItsBinding) {
  const redis::ScriptSet set = WithBodies(
      {{"sale_reserve", "return {0, 3, 5, {1}}"}, {"activity_status", "return {1, 'open'}"}});
  redis::ScriptRunner runner(connection_, set);
  ActivityScripts scripts(runner, ns_);
  const std::string order = "o1", user = "alice";
  auto reserved = io_.Run(scripts.AsyncReserve("shape", ReserveRequest{order, user, 1, 1500},
                                               boost::asio::use_awaitable));
  ASSERT_FALSE(reserved.ok());
  EXPECT_EQ(reserved.error().code, base::ErrorCode::kProtocol);
  EXPECT_NE(reserved.error().message.find("element 4 (row) is "), std::string::npos)
      << reserved.error().message;
  EXPECT_NE(reserved.error().message.find("expected int|str"), std::string::npos)
      << reserved.error().message;

  auto status = io_.Run(scripts.AsyncStatus("shape", boost::asio::use_awaitable));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, base::ErrorCode::kProtocol);
  EXPECT_NE(status.error().message.find("expected 1 or 17 elements"), std::string::npos)
      << status.error().message;
}

}  // namespace
}  // namespace flashsale::keyspace
