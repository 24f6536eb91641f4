// The real `flashsale` binary as a child process: started on a free loopback port in a fresh data
// directory (with its own embedded redis-server), driven over HTTP, signalled, restarted on the
// same directory, and given bad settings. Every wait is bounded; every child (and the
// redis-server a child started) is SIGKILLed by PID at the end of a test, even a failed one.

#include <dirent.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json/parse.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"
#include "support/flashsale_process.h"
#include "support/http_client.h"
#include "support/wait.h"

namespace flashsale {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FreePort;
using testing::HttpClient;
using testing::HttpResult;
using testing::ReadFile;
using testing::RedisServersFor;
using testing::TempDir;

constexpr auto kStartupTimeout = seconds(20);
constexpr auto kExitTimeout = seconds(30);

// --- Helpers -----------------------------------------------------------------------------------

// The parent pid of `pid` (from /proc/<pid>/stat), or -1.
pid_t ParentOf(pid_t pid) {
  const std::string stat = ReadFile(fmt::format("/proc/{}/stat", pid));
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(stat.substr(paren + 1));
  std::string state;
  pid_t parent = -1;
  rest >> state >> parent;
  return parent;
}

// True if something accepts connections on the unix socket `path`.
bool UnixSocketAccepts(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  const bool accepted =
      ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return accepted;
}

std::string DescribeStatus(const std::optional<int>& status) {
  return status ? base::DescribeExitStatus(*status) : std::string("still running or unknown");
}

// The exit code if the process exited normally, else -1.
int ExitCode(const std::optional<int>& status) {
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

json::value Json(const HttpResult& result) {
  boost::system::error_code error;
  json::value value = json::parse(result.body, error);
  if (error) return json::value(result.body);
  return value;
}

int64_t Code(const HttpResult& result) {
  const json::value value = Json(result);
  if (!value.is_object() || !value.as_object().contains("code")) return -1000;
  return value.at("code").as_int64();
}

// --- The child ---------------------------------------------------------------------------------

// The flashsale binary under test (see support/flashsale_process.h).
class Flashsale : public testing::FlashsaleProcess {
 public:
  Flashsale(std::vector<std::string> args, std::string log, std::string data_dir = "")
      : FlashsaleProcess(FLASHSALE_BINARY, std::move(args), std::move(log), std::move(data_dir)) {}
};

::testing::AssertionResult WaitHealthy(Flashsale& child, uint16_t port) {
  return testing::WaitHealthy(child, port, kStartupTimeout);
}

// Runs `flashsale args...` to completion (bounded): its exit status and its output.
struct Finished {
  std::optional<int> status;
  std::string output;
};
Finished RunToExit(const std::vector<std::string>& args, const TempDir& tmp,
                   const std::string& log_name) {
  Flashsale child(args, tmp / log_name);
  Finished finished;
  finished.status = child.WaitExit(kExitTimeout);
  finished.output = child.Log();
  return finished;
}

// SIGTERM, then the exit status within the bound.
::testing::AssertionResult StopsCleanly(Flashsale& child) {
  child.Signal(SIGTERM);
  const std::optional<int> status = child.WaitExit(kExitTimeout);
  if (!status) {
    return ::testing::AssertionFailure() << "still running 30 s after SIGTERM:\n" << child.Log();
  }
  if (ExitCode(status) != 0) {
    return ::testing::AssertionFailure()
           << "after SIGTERM flashsale " << DescribeStatus(status) << ":\n"
           << child.Log();
  }
  return ::testing::AssertionSuccess();
}

HttpResult Buy(HttpClient& client, const std::string& user) {
  return client.Post("/api/v1/activities/demo/purchase", "", {{"X-User-Id", user}});
}

std::vector<std::string> ServeArgs(uint16_t port, const std::string& data_dir,
                                   std::vector<std::string> more) {
  std::vector<std::string> args = {"serve", "--listen", fmt::format("127.0.0.1:{}", port),
                                   "--data-dir", data_dir};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// --- a) and b) ---------------------------------------------------------------------------------

TEST(ServeProcessTest, DemoSellsItsStockStopsCleanlyAndKeepsItsStateAcrossARestart) {
  TempDir tmp;
  const std::string data_dir = tmp / "data";
  const std::vector<std::string> demo = {"--demo", "--demo-stock", "3", "--threads", "2"};
  std::string first_order;
  {
    const uint16_t port = FreePort();
    Flashsale serve(ServeArgs(port, data_dir, demo), tmp / "serve1.log", data_dir);
    ASSERT_TRUE(WaitHealthy(serve, port));
    // The banner is printed just after the listeners open: wait for it (bounded).
    const std::string url = fmt::format("http://127.0.0.1:{}", port);
    EXPECT_TRUE(serve.WaitForLog("curl", seconds(10))) << serve.Log();
    EXPECT_NE(serve.Log().find(url), std::string::npos) << serve.Log();

    // Its own redis-server, a child of this flashsale, on the data directory.
    const std::vector<pid_t> redis = RedisServersFor(data_dir);
    ASSERT_EQ(redis.size(), 1u) << "no embedded redis-server on " << data_dir;
    EXPECT_EQ(ParentOf(redis[0]), serve.pid());
    EXPECT_TRUE(UnixSocketAccepts(data_dir + "/redis.sock"));

    HttpClient client("127.0.0.1", port);
    EXPECT_EQ(client.Get("/healthz").status, 200);
    auto ready = client.Get("/readyz");
    EXPECT_EQ(ready.status, 200) << ready.body;
    for (const std::string user : {"alice", "bob", "carol"}) {
      auto bought = Buy(client, user);
      ASSERT_EQ(bought.status, 200) << bought.body;
      ASSERT_EQ(Code(bought), 1) << bought.body;
      if (user == "alice") first_order = std::string(Json(bought).at("order_id").as_string());
    }
    auto late = Buy(client, "dave");
    EXPECT_EQ(late.status, 200) << late.body;
    EXPECT_EQ(Code(late), -1) << late.body;
    EXPECT_EQ(Json(late).at("status").as_string(), "sold_out") << late.body;

    ASSERT_TRUE(StopsCleanly(serve));
    // The embedded redis-server went with it.
    EXPECT_TRUE(RedisServersFor(data_dir).empty()) << "redis-server outlived flashsale";
    EXPECT_FALSE(UnixSocketAccepts(data_dir + "/redis.sock"));
    EXPECT_NE(serve.Log().find("stopped"), std::string::npos) << serve.Log();
  }

  // b) The same data directory again: the sale's state survived (AOF + SQLite).
  const uint16_t port = FreePort();
  Flashsale serve(ServeArgs(port, data_dir, demo), tmp / "serve2.log", data_dir);
  ASSERT_TRUE(WaitHealthy(serve, port));
  HttpClient client("127.0.0.1", port);
  auto newcomer = Buy(client, "erin");
  EXPECT_EQ(newcomer.status, 200) << newcomer.body;
  EXPECT_EQ(Code(newcomer), -1) << "the stock came back after a restart: " << newcomer.body;
  auto orders = client.Get("/api/v1/orders", {{"X-User-Id", "alice"}});
  ASSERT_EQ(orders.status, 200) << orders.body;
  const json::value listed = Json(orders);
  ASSERT_TRUE(listed.is_object()) << orders.body;
  const auto& list = listed.at("orders").as_array();
  ASSERT_EQ(list.size(), 1u) << orders.body;
  EXPECT_EQ(list[0].at("order_id").as_string(), first_order);
  EXPECT_EQ(list[0].at("activity_id").as_string(), "demo");
  ASSERT_TRUE(StopsCleanly(serve));
  EXPECT_TRUE(RedisServersFor(data_dir).empty());
}

// Issue 37, point 6: a restart of `serve` mid-queue loses no place. The waiting room lives in the
// embedded Redis (its AOF): after a SIGTERM and a start on the same directory every buyer has the
// place they had, and joining again changes nothing.
TEST(ServeProcessTest, ARestartMidQueueLosesNoPlaceInTheWaitingRoom) {
  TempDir tmp;
  const std::string data_dir = tmp / "data";
  const std::vector<std::string> demo = {"--demo", "--threads", "2"};
  constexpr int kBuyers = 20;
  const auto user = [](int i) {
    return std::map<std::string, std::string>{{"X-User-Id", fmt::format("q{}", i)}};
  };
  std::map<int, int64_t> places;
  {
    const uint16_t port = FreePort();
    Flashsale serve(ServeArgs(port, data_dir, demo), tmp / "serve1.log", data_dir);
    ASSERT_TRUE(WaitHealthy(serve, port));
    HttpClient client("127.0.0.1", port);
    std::string token = ReadFile(data_dir + "/admin-token");
    token = token.substr(0, token.find('\n'));
    const std::map<std::string, std::string> admin = {{"Authorization", "Bearer " + token}};
    const int64_t now = Json(client.Get("/api/v1/activities")).at("server_time_ms").as_int64();
    // One place a second: the last buyer is still waiting long after the restart.
    auto created = client.Post("/api/v1/admin/activities",
                               fmt::format(R"({{"id":"room","stock":100,"start_ms":{},
                       "waiting_room":{{"opens_before_ms":60000,"admit_per_s":1}}}})",
                                           now + 2000),
                               admin);
    ASSERT_EQ(created.status, 201) << created.body;
    for (int i = 0; i < kBuyers; ++i) {
      auto joined = client.Post("/api/v1/activities/room/join", "", user(i));
      ASSERT_EQ(joined.status, 200) << joined.body;
      EXPECT_EQ(Json(joined).at("status").as_string(), "drawing") << joined.body;
    }
    // After the start the places are drawn; read each one (the first wait is answered when the
    // start has come and its place is drawn; the others need no wait then).
    for (int i = 0; i < kBuyers; ++i) {
      auto view = client.Get(
          fmt::format("/api/v1/activities/room/wait?wait_ms={}", i == 0 ? 10000 : 0), user(i));
      ASSERT_EQ(view.status, 200) << view.body;
      const json::value place = Json(view).at("place");
      ASSERT_TRUE(place.is_int64()) << view.body;
      places[i] = place.as_int64();
    }
    ASSERT_TRUE(StopsCleanly(serve));
  }
  std::set<int64_t> distinct;
  for (const auto& [i, place] : places) distinct.insert(place);
  ASSERT_EQ(distinct.size(), size_t{kBuyers});
  EXPECT_EQ(*distinct.begin(), 1);
  EXPECT_EQ(*distinct.rbegin(), kBuyers);

  const uint16_t port = FreePort();
  Flashsale serve(ServeArgs(port, data_dir, demo), tmp / "serve2.log", data_dir);
  ASSERT_TRUE(WaitHealthy(serve, port));
  HttpClient client("127.0.0.1", port);
  for (int i = 0; i < kBuyers; ++i) {
    auto view = client.Get("/api/v1/activities/room/wait", user(i));
    ASSERT_EQ(view.status, 200) << view.body;
    EXPECT_EQ(Json(view).at("place").as_int64(), places[i]) << view.body;
    auto again = client.Post("/api/v1/activities/room/join", "", user(i));
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_FALSE(Json(again).at("joined").as_bool()) << again.body;
    EXPECT_EQ(Json(again).at("place").as_int64(), places[i]) << again.body;
  }
  ASSERT_TRUE(StopsCleanly(serve));
}

// --- c) ----------------------------------------------------------------------------------------

TEST(ServeProcessTest, SigtermFinishesRequestsInFlight) {
  TempDir tmp;
  const std::string data_dir = tmp / "data";
  const uint16_t port = FreePort();
  Flashsale serve(
      ServeArgs(port, data_dir, {"--demo", "--demo-stock", "1000000", "--threads", "2"}),
      tmp / "serve.log", data_dir);
  ASSERT_TRUE(WaitHealthy(serve, port));

  constexpr int kClients = 3;
  std::atomic<int> ok = 0;
  std::atomic<bool> stop = false;
  std::vector<std::vector<std::string>> bad(kClients);  // answers other than a reservation
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      HttpClient client("127.0.0.1", port);  // one keep-alive connection (reopened if closed)
      const auto until = std::chrono::steady_clock::now() + seconds(60);
      for (int i = 0; !stop && std::chrono::steady_clock::now() < until; ++i) {
        auto reply = Buy(client, fmt::format("c{}-{}", c, i));
        if (reply.status == 0) break;  // closed and refused: the server is gone
        if (reply.status == 200 && Code(reply) == 1) {
          ++ok;
        } else {
          bad[c].push_back(fmt::format("{} {}", reply.status, reply.body));
        }
      }
    });
  }
  const auto until = std::chrono::steady_clock::now() + seconds(20);
  while (ok < 50 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  const int before = ok;
  serve.Signal(SIGTERM);
  const std::optional<int> status = serve.WaitExit(kExitTimeout);
  stop = true;
  for (auto& t : clients) t.join();

  EXPECT_GE(before, 50) << "the load never got going:\n" << serve.Log();
  EXPECT_EQ(ExitCode(status), 0) << DescribeStatus(status) << "\n" << serve.Log();
  for (int c = 0; c < kClients; ++c) {
    EXPECT_TRUE(bad[c].empty()) << "client " << c << " got " << bad[c].size()
                                << " bad answers, the first: " << bad[c][0];
  }
  EXPECT_TRUE(RedisServersFor(data_dir).empty());
}

// --- d) ----------------------------------------------------------------------------------------

// Issue 35, point 1: README.md's webhook receiver (Python, between its markers), written into
// `tmp` to listen on `hook_port` and read its key from <tmp>/webhook-key; its log is
// <tmp>/receiver.log, one line "<event id> <activity> <state>" per event it verified.
void WriteReadmeReceiver(const TempDir& tmp, uint16_t hook_port) {
  const std::string readme = ReadFile(std::string(FLASHSALE_SOURCE_DIR) + "/README.md");
  const std::string_view open_mark = "<!-- webhook-receiver -->\n```python\n";
  const size_t begin = readme.find(open_mark);
  const size_t end = readme.find("```\n<!-- /webhook-receiver -->");
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos && end > begin);
  std::string script = readme.substr(begin + open_mark.size(), end - begin - open_mark.size());
  const auto replace = [&](std::string_view from, const std::string& to) {
    const size_t at = script.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    script.replace(at, from.size(), to);
  };
  ASSERT_NO_FATAL_FAILURE(replace("9000", std::to_string(hook_port)));
  ASSERT_NO_FATAL_FAILURE(
      replace("open(\"webhook-key\")", "open(\"" + (tmp / "webhook-key") + "\")"));
  std::ofstream(tmp / "receiver.py") << script;
}

// The key from `flashsale webhooks key` into <tmp>/webhook-key, and the receiver started and
// listening.
std::optional<base::Subprocess> StartReadmeReceiver(const TempDir& tmp, const std::string& data_dir,
                                                    uint16_t hook_port) {
  const Finished key = RunToExit({"webhooks", "key", "--data-dir", data_dir}, tmp, "key.log");
  EXPECT_EQ(ExitCode(key.status), 0) << key.output;
  EXPECT_EQ(key.output.size(), 65u) << key.output;  // 64 hex digits and a newline
  std::ofstream(tmp / "webhook-key") << key.output;
  auto receiver = base::Subprocess::Spawn({"python3", tmp / "receiver.py"}, tmp / "receiver.log");
  EXPECT_TRUE(receiver.ok()) << receiver.error().ToString();
  if (!receiver.ok()) return std::nullopt;
  HttpClient hook("127.0.0.1", hook_port);
  EXPECT_TRUE(testing::Eventually([&] { return hook.Get("/").status != 0; }, seconds(20)))
      << ReadFile(tmp / "receiver.log");
  return std::move(*receiver);
}

// The events the receiver verified, in the order they came.
std::vector<std::string> ReceivedEvents(const TempDir& tmp) {
  std::vector<std::string> events;
  std::istringstream lines(ReadFile(tmp / "receiver.log"));
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" demo reserved") != std::string::npos)
      events.push_back(line.substr(0, line.find(' ')));
  }
  return events;
}

// Issue 35, point 1: serve --webhook-url POSTs every order event to a receiver, signed; the
// receiver is the README's own Python snippet (the key from `flashsale webhooks key`), which
// accepts only a signature that verifies.
TEST(ServeProcessTest, WebhooksReachTheReadmesReceiverSignedWithTheKeyItPrints) {
  const TempDir tmp;
  const std::string data_dir = tmp / "data";
  const uint16_t port = FreePort();
  const uint16_t hook_port = FreePort();
  ASSERT_NO_FATAL_FAILURE(WriteReadmeReceiver(tmp, hook_port));
  Flashsale serve(ServeArgs(port, data_dir,
                            {"--demo", "--demo-stock", "3", "--webhook-url",
                             fmt::format("http://127.0.0.1:{}/hook", hook_port)}),
                  tmp / "serve.log", data_dir);
  ASSERT_TRUE(WaitHealthy(serve, port));
  auto receiver = StartReadmeReceiver(tmp, data_dir, hook_port);
  ASSERT_TRUE(receiver);

  HttpClient client("127.0.0.1", port);
  std::vector<std::string> orders;
  for (const char* user : {"ann", "ben", "cid"}) {
    const HttpResult bought = Buy(client, user);
    ASSERT_EQ(Code(bought), 1) << bought.body;
    orders.push_back(std::string(Json(bought).at("order_id").as_string()) + "/reserved");
  }
  // Each reservation arrives once the pipeline wrote it, its signature checked by the receiver.
  EXPECT_TRUE(testing::Eventually([&] { return ReceivedEvents(tmp) == orders; }, seconds(60)))
      << ReadFile(tmp / "receiver.log") << serve.Log();
  // The check can fail: a request signed with another key is refused.
  HttpClient hook("127.0.0.1", hook_port);
  const HttpResult forged =
      hook.Request("POST", "/hook", R"({"id":"x/paid"})",
                   {{"X-Flashsale-Timestamp", std::to_string(std::time(nullptr))},
                    {"X-Flashsale-Signature", "v1=" + std::string(64, '0')}});
  EXPECT_EQ(forged.status, 401);
  receiver->Terminate(seconds(5));
  EXPECT_TRUE(StopsCleanly(serve));
}

// The relay killed after a receiver answered 2xx, before it saved its cursor (failpoint
// kill-after-webhook): after the restart that event comes again, with the same id, and then the
// rest; none is lost, none out of order.
TEST(ServeProcessTest, ARelayKilledAfterADeliveryDeliversItAgainAfterTheRestart) {
  const TempDir tmp;
  const std::string data_dir = tmp / "data";
  const uint16_t port = FreePort();
  const uint16_t hook_port = FreePort();
  ASSERT_NO_FATAL_FAILURE(WriteReadmeReceiver(tmp, hook_port));
  const std::vector<std::string> args =
      ServeArgs(port, data_dir,
                {"--demo", "--demo-stock", "3", "--webhook-url",
                 fmt::format("http://127.0.0.1:{}/hook", hook_port)});
  std::optional<base::Subprocess> receiver;
  std::vector<std::string> orders;
  {
    std::vector<std::string> doomed = {"FLASHSALE_FAILPOINTS=kill-after-webhook:2",
                                       FLASHSALE_BINARY};
    doomed.insert(doomed.end(), args.begin(), args.end());
    testing::FlashsaleProcess serve("env", doomed, tmp / "serve1.log", data_dir);
    ASSERT_TRUE(testing::WaitHealthy(serve, port, kStartupTimeout));
    receiver = StartReadmeReceiver(tmp, data_dir, hook_port);
    ASSERT_TRUE(receiver);
    HttpClient client("127.0.0.1", port);
    for (const char* user : {"ann", "ben", "cid"}) {
      const HttpResult bought = Buy(client, user);
      ASSERT_EQ(Code(bought), 1) << bought.body;
      orders.push_back(std::string(Json(bought).at("order_id").as_string()) + "/reserved");
    }
    const std::optional<int> status = serve.WaitExit(seconds(60));
    ASSERT_TRUE(status && WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL)
        << DescribeStatus(status) << "\n"
        << serve.Log();
  }
  const std::vector<std::string> before = ReceivedEvents(tmp);
  ASSERT_EQ(before.size(), 2u) << ReadFile(tmp / "receiver.log");
  Flashsale serve(args, tmp / "serve2.log", data_dir);
  ASSERT_TRUE(WaitHealthy(serve, port));
  // The second event again (its 2xx was not saved), then the third: in order, each id the same.
  const std::vector<std::string> expected = {orders[0], orders[1], orders[1], orders[2]};
  EXPECT_TRUE(testing::Eventually([&] { return ReceivedEvents(tmp) == expected; }, seconds(60)))
      << ReadFile(tmp / "receiver.log") << serve.Log();
  receiver->Terminate(seconds(5));
  EXPECT_TRUE(StopsCleanly(serve));
}

TEST(ServeProcessTest, BadSettingsExitWithAMessageNamingThem) {
  TempDir tmp;
  const std::string data_dir = tmp / "data";
  struct Case {
    std::vector<std::string> args;
    int code;
    std::vector<std::string> mentions;
  };
  const std::string listen = fmt::format("127.0.0.1:{}", FreePort());
  const std::vector<Case> cases = {
      {{"serve", "--threads", "abc", "--data-dir", data_dir}, 2, {"threads", "abc"}},
      {{"serve", "--threads", "300", "--data-dir", data_dir}, 2, {"threads", "300"}},
      {{"serve", "--listen", "nope", "--data-dir", data_dir}, 2, {"listen", "nope"}},
      {{"serve", "--listen", "127.0.0.1:99999", "--data-dir", data_dir}, 2, {"listen", "99999"}},
      {{"serve", "--identity", "magic", "--data-dir", data_dir}, 2, {"identity", "magic"}},
      {{"serve", "--no-such-flag", "--data-dir", data_dir}, 2, {"--no-such-flag"}},
      {{"serve", "--listen", listen, "--data-dir", data_dir, "--redis-server",
        "/nonexistent/redis-server"},
       1,
       {"/nonexistent/redis-server", "--redis-url"}},
  };
  int run = 0;
  for (const Case& c : cases) {
    std::string command;
    for (const auto& arg : c.args) command += " " + arg;
    SCOPED_TRACE("flashsale" + command);
    const Finished finished = RunToExit(c.args, tmp, fmt::format("bad{}.log", run++));
    ASSERT_TRUE(finished.status.has_value()) << "did not exit within 30 s";
    EXPECT_EQ(ExitCode(finished.status), c.code) << DescribeStatus(finished.status) << "; output:\n"
                                                 << finished.output;
    for (const auto& mention : c.mentions) {
      EXPECT_NE(finished.output.find(mention), std::string::npos)
          << "the message does not mention '" << mention << "':\n"
          << finished.output;
    }
    EXPECT_EQ(finished.output.find("serving on"), std::string::npos) << finished.output;
  }
  EXPECT_TRUE(RedisServersFor(data_dir).empty());
}

// --- e) ----------------------------------------------------------------------------------------

TEST(ServeProcessTest, TokenFromTheCommandLineIsAcceptedInTokenMode) {
  TempDir tmp;
  const std::string data_dir = tmp / "data";
  // Before any serve run there is no secret to sign with.
  const Finished early =
      RunToExit({"token", "--user", "alice", "--data-dir", data_dir}, tmp, "token0.log");
  EXPECT_EQ(ExitCode(early.status), 2) << DescribeStatus(early.status) << "\n" << early.output;
  EXPECT_NE(early.output.find("secret"), std::string::npos) << early.output;

  {  // A first run generates the secret.
    const uint16_t port = FreePort();
    Flashsale serve(ServeArgs(port, data_dir, {"--threads", "1"}), tmp / "serve1.log", data_dir);
    ASSERT_TRUE(WaitHealthy(serve, port));
    ASSERT_TRUE(StopsCleanly(serve));
  }
  const Finished issued =
      RunToExit({"token", "--user", "alice", "--data-dir", data_dir}, tmp, "token1.log");
  ASSERT_EQ(ExitCode(issued.status), 0) << DescribeStatus(issued.status) << "\n" << issued.output;
  std::string token = issued.output;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  token = token.substr(token.rfind('\n') + 1);  // the last line (npos + 1 == 0)
  ASSERT_EQ(std::count(token.begin(), token.end(), '.'), 2) << "not a token: " << issued.output;
  // A token signed with another secret, for contrast.
  const Finished forged = RunToExit({"token", "--user", "alice", "--secret",
                                     "not-the-secret-of-this-server", "--data-dir", data_dir},
                                    tmp, "token2.log");
  ASSERT_EQ(ExitCode(forged.status), 0) << forged.output;
  std::string forged_token = forged.output.substr(0, forged.output.find('\n'));

  const uint16_t port = FreePort();
  Flashsale serve(ServeArgs(port, data_dir, {"--identity", "token", "--threads", "1"}),
                  tmp / "serve2.log", data_dir);
  ASSERT_TRUE(WaitHealthy(serve, port));
  HttpClient client("127.0.0.1", port);
  auto mine = client.Get("/api/v1/orders", {{"Authorization", "Bearer " + token}});
  EXPECT_EQ(mine.status, 200) << mine.body;
  EXPECT_EQ(Json(mine).at("user_id").as_string(), "alice") << mine.body;
  auto none = client.Get("/api/v1/orders");
  EXPECT_EQ(none.status, 401) << none.body;
  EXPECT_EQ(Json(none).at("status").as_string(), "unauthorized") << none.body;
  EXPECT_EQ(client.Get("/api/v1/orders", {{"X-User-Id", "alice"}}).status, 401);
  EXPECT_EQ(client.Get("/api/v1/orders", {{"Authorization", "Bearer " + forged_token}}).status,
            401);
  ASSERT_TRUE(StopsCleanly(serve));
}

// --- f) ----------------------------------------------------------------------------------------

TEST(ServeProcessTest, ServeHelpListsTheSettingsAndTheirVariables) {
  TempDir tmp;
  const Finished help = RunToExit({"serve", "--help"}, tmp, "help.log");
  EXPECT_EQ(ExitCode(help.status), 0) << DescribeStatus(help.status) << "\n" << help.output;
  for (const char* text :
       {"--listen", "FLASHSALE_LISTEN", "--data-dir", "FLASHSALE_DATA_DIR", "--redis-url",
        "FLASHSALE_REDIS_URL", "--threads", "FLASHSALE_THREADS"}) {
    EXPECT_NE(help.output.find(text), std::string::npos) << text << " missing:\n" << help.output;
  }
}

// --- g) ----------------------------------------------------------------------------------------

TEST(ServeProcessTest, LotteriesFromTheDemoAndTheCliDrawAndQueuedTicketsAreAnswered) {
  TempDir tmp;
  const std::string data_dir = tmp / "data";
  const uint16_t port = FreePort();
  Flashsale serve(ServeArgs(port, data_dir, {"--demo", "--threads", "2"}), tmp / "serve.log",
                  data_dir);
  ASSERT_TRUE(WaitHealthy(serve, port));
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  HttpClient client("127.0.0.1", port);

  // The demo's lottery: one draw per user, three prizes, a "no prize" weight.
  auto info = client.Get("/api/v1/activities/demo-lottery");
  ASSERT_EQ(info.status, 200) << info.body;
  EXPECT_EQ(Json(info).at("activity").at("kind").as_string(), "lottery");
  EXPECT_EQ(Json(info).at("activity").at("prizes").as_array().size(), 3u);
  auto drawn = client.Post("/api/v1/activities/demo-lottery/draw", "", {{"X-User-Id", "alice"}});
  ASSERT_EQ(drawn.status, 200) << drawn.body;
  const int64_t code = Code(drawn);
  EXPECT_TRUE(code == 1 || code == 2) << drawn.body;
  auto again = client.Post("/api/v1/activities/demo-lottery/draw", "", {{"X-User-Id", "alice"}});
  EXPECT_EQ(Code(again), 0) << again.body;

  // A queued lottery created with the CLI, its tickets answered by serve's own queue consumer.
  const std::string definition = tmp / "lottery.json";
  {
    std::ofstream out(definition);
    out << R"({"id":"cli-draw","title":"From the CLI","kind":"lottery","admission":"fifo",
               "prizes":[{"id":"pen","name":"A pen","weight":1,"stock":2}]})";
  }
  const std::vector<std::string> admin = {"--url", url, "--data-dir", data_dir};
  auto cli = [&](std::vector<std::string> args, const std::string& log) {
    args.insert(args.end(), admin.begin(), admin.end());
    return RunToExit(args, tmp, log);
  };
  const Finished created = cli({"activity", "create", definition}, "create.log");
  ASSERT_EQ(ExitCode(created.status), 0) << created.output;
  EXPECT_NE(created.output.find("\"admission\":\"fifo\""), std::string::npos) << created.output;
  const Finished shown = cli({"activity", "show", "cli-draw"}, "show.log");
  ASSERT_EQ(ExitCode(shown.status), 0) << shown.output;
  EXPECT_NE(shown.output.find("\"remaining\":2"), std::string::npos) << shown.output;
  const Finished missing = cli({"activity", "show", "nope"}, "missing.log");
  EXPECT_EQ(ExitCode(missing.status), 1) << missing.output;
  const Finished wrong = cli({"activity", "explode", "x"}, "wrong.log");
  EXPECT_EQ(ExitCode(wrong.status), 2) << wrong.output;

  std::map<std::string, int64_t> outcomes;
  for (const std::string user : {"u1", "u2", "u3", "u4"}) {
    auto queued = client.Post("/api/v1/activities/cli-draw/draw", "", {{"X-User-Id", user}});
    if (queued.status == 200) {  // a ticket said all gone: this instance now knows it locally
      ++outcomes[std::string(Json(queued).at("status").as_string())];
      continue;
    }
    ASSERT_EQ(queued.status, 202) << queued.body;
    const std::string ticket_url(Json(queued).at("ticket_url").as_string());
    HttpResult answer;
    for (int poll = 0; poll < 40; ++poll) {  // long polls of up to 500 ms: 20 s at most
      answer = client.Get(ticket_url + "?wait_ms=500", {{"X-User-Id", user}});
      if (answer.status != 202) break;
    }
    ASSERT_EQ(answer.status, 200) << answer.body;
    ++outcomes[std::string(Json(answer).at("status").as_string())];
  }
  EXPECT_EQ(outcomes["won"], 2);  // no "no prize" weight: the two pens, then all gone
  EXPECT_EQ(outcomes["sold_out"], 2);
  ASSERT_TRUE(StopsCleanly(serve));
}

// --- h) ----------------------------------------------------------------------------------------

TEST(ServeProcessTest, UnpaidOrdersExpireTheirUnitsComeBackAndALatePaymentIsRefused) {
  TempDir tmp;
  const std::string data_dir = tmp / "data";
  const uint16_t port = FreePort();
  // The expire job only on demand here, so the test decides when it runs.
  Flashsale serve(ServeArgs(port, data_dir,
                            {"--threads", "1", "--identity", "gateway", "--expire-every-ms", "0"}),
                  tmp / "serve.log", data_dir);
  ASSERT_TRUE(WaitHealthy(serve, port));
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  const std::string admin_token = ReadFile(data_dir + "/admin-token");
  const std::map<std::string, std::string> admin = {
      {"Authorization", "Bearer " + admin_token.substr(0, admin_token.find('\n'))}};
  HttpClient client("127.0.0.1", port);
  auto created = client.Post("/api/v1/admin/activities",
                             R"({"id":"pay","stock":3,"payment_window_ms":300})", admin);
  ASSERT_EQ(created.status, 201) << created.body;

  std::map<std::string, std::string> order_of;
  for (const std::string user : {"ann", "ben", "cid"}) {
    auto bought = client.Post("/api/v1/activities/pay/purchase", "", {{"X-User-Id", user}});
    ASSERT_EQ(Code(bought), 1) << bought.body;
    order_of[user] = std::string(Json(bought).at("order_id").as_string());
  }
  // Paid once recorded (the order pipeline persists within moments).
  HttpResult paid;
  for (int i = 0; i < 100; ++i) {
    paid = client.Post("/api/v1/orders/" + order_of["ann"] + "/pay", "", {{"X-User-Id", "ann"}});
    if (paid.status != 404) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(paid.status, 200) << paid.body;
  EXPECT_EQ(Json(paid).at("status").as_string(), "paid");
  // Someone else's order is not theirs to pay.
  EXPECT_EQ(
      client.Post("/api/v1/orders/" + order_of["ben"] + "/pay", "", {{"X-User-Id", "eve"}}).status,
      404);

  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past the payment window
  auto status = [&] { return Json(client.Get("/api/v1/admin/activities/pay", admin)); };
  // Every order recorded (bounded wait).
  for (int i = 0; i < 200 && status().at("persisted").at("orders").as_int64() != 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(status().at("persisted").at("orders").as_int64(), 3);
  const Finished expired =
      RunToExit({"job", "expire", "--activity", "pay", "--url", url, "--data-dir", data_dir}, tmp,
                "expire.log");
  ASSERT_EQ(ExitCode(expired.status), 0) << expired.output;
  EXPECT_NE(expired.output.find("\"cancelled\":2"), std::string::npos) << expired.output;
  EXPECT_NE(expired.output.find("\"units_returned\":2"), std::string::npos) << expired.output;
  const json::value after = status();
  EXPECT_EQ(after.at("redis").at("remaining").as_int64(), 2) << "the two unpaid units are back";
  EXPECT_EQ(after.at("persisted").at("units").as_int64(), 1);
  EXPECT_EQ(after.at("persisted").at("cancelled_units").as_int64(), 2);
  // Once: a second run finds nothing to cancel.
  const Finished again =
      RunToExit({"job", "expire", "--activity", "pay", "--url", url, "--data-dir", data_dir}, tmp,
                "expire2.log");
  EXPECT_NE(again.output.find("\"cancelled\":0"), std::string::npos) << again.output;

  // Ben pays too late: refused, flagged for a refund, never an extra unit.
  auto late = client.Post("/api/v1/orders/" + order_of["ben"] + "/pay", "", {{"X-User-Id", "ben"}});
  EXPECT_EQ(late.status, 409) << late.body;
  EXPECT_EQ(Json(late).at("status").as_string(), "refund_due");
  EXPECT_EQ(status().at("redis").at("remaining").as_int64(), 2);
  // Ann's confirmation again is harmless; Ben may buy again (his slot was freed).
  auto repeat =
      client.Post("/api/v1/orders/" + order_of["ann"] + "/pay", "", {{"X-User-Id", "ann"}});
  EXPECT_EQ(repeat.status, 200);
  EXPECT_TRUE(Json(repeat).at("replayed").as_bool());
  EXPECT_EQ(Code(client.Post("/api/v1/activities/pay/purchase", "", {{"X-User-Id", "ben"}})), 1);
  ASSERT_TRUE(StopsCleanly(serve));
}

}  // namespace
}  // namespace flashsale
