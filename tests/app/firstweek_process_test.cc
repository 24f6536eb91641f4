// A team's first week with the real `flashsale` binary (issue 32, points 5 to 11): the CLI finds
// the server, reports read as text on a terminal and as JSON in a pipe, the config file takes
// TOML's own types and can be checked, no line shows a password, secrets have one rule, the
// messages say what is true, and a shop front on another origin is answered (CORS). Every child
// (and the redis-server it started) is SIGKILLed by PID at the end of a test; every wait is
// bounded.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/flashsale_process.h"
#include "support/http_client.h"
#include "support/redis_server.h"

namespace flashsale {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FreePort;
using testing::HttpClient;
using testing::HttpResult;
using testing::ReadFile;
using testing::TempDir;

constexpr auto kStartupTimeout = seconds(20);
constexpr auto kExitTimeout = seconds(30);

class Flashsale : public testing::FlashsaleProcess {
 public:
  Flashsale(std::vector<std::string> args, std::string log, std::string data_dir = "")
      : FlashsaleProcess(FLASHSALE_BINARY, std::move(args), std::move(log), std::move(data_dir)) {}
};

int ExitCode(const std::optional<int>& status) {
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The text as one JSON document, or null when it is not one.
json::value JsonOf(const std::string& text) {
  boost::system::error_code error;
  json::value value = json::parse(text, error);
  if (error) return nullptr;
  return value;
}

struct Finished {
  std::optional<int> status;
  std::string output;
};

// `flashsale args...` to completion, its stdout and stderr in a file (not a terminal).
Finished RunToExit(const std::vector<std::string>& args, const TempDir& tmp,
                   const std::string& log_name) {
  Flashsale child(args, tmp / log_name);
  Finished finished;
  finished.status = child.WaitExit(kExitTimeout);
  finished.output = child.Log();
  return finished;
}

// The same with environment variables set for the child only (through env(1)).
Finished RunWithEnv(const std::vector<std::string>& env, std::vector<std::string> args,
                    const TempDir& tmp, const std::string& log_name) {
  std::vector<std::string> argv = env;
  argv.emplace_back(FLASHSALE_BINARY);
  argv.insert(argv.end(), args.begin(), args.end());
  testing::FlashsaleProcess child("/usr/bin/env", argv, tmp / log_name);
  Finished finished;
  finished.status = child.WaitExit(kExitTimeout);
  finished.output = child.Log();
  return finished;
}

// `flashsale args...` to completion on a pseudo-terminal, as a person at a shell runs it: its
// output with the terminal's "\r\n" back to "\n". SIGKILLed if it has not exited in time.
Finished RunOnTerminal(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {FLASHSALE_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> pointers;
  for (std::string& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  winsize size{};
  size.ws_row = 50;
  size.ws_col = 200;
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &size);
  if (pid == 0) {
    ::execv(pointers[0], pointers.data());
    ::_exit(127);
  }
  Finished finished;
  if (pid < 0) {
    finished.output = "forkpty failed";
    return finished;
  }
  const auto until = std::chrono::steady_clock::now() + kExitTimeout;
  char buffer[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd fd{master, POLLIN, 0};
    const int ready = ::poll(&fd, 1, 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t got = ::read(master, buffer, sizeof(buffer));
    if (got <= 0) break;  // EIO once the child and its terminal are gone
    finished.output.append(buffer, static_cast<size_t>(got));
  }
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ::close(master);
      finished.output += "\n(killed: still running)";
      return finished;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  ::close(master);
  finished.status = status;
  finished.output.erase(std::remove(finished.output.begin(), finished.output.end(), '\r'),
                        finished.output.end());
  return finished;
}

std::vector<std::string> ServeArgs(uint16_t port, const std::string& data_dir,
                                   std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"serve",      "--listen", fmt::format("127.0.0.1:{}", port),
                                   "--data-dir", data_dir,   "--threads",
                                   "2"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Polls until `path` exists (bounded); its content, or "" if it never appeared.
std::string WaitForFile(const std::string& path, milliseconds timeout = seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() >= until) return "";
    std::this_thread::sleep_for(milliseconds(20));
  }
  return ReadFile(path);
}

// A running serve on a fresh data directory, with its admin headers.
struct Service {
  TempDir tmp;
  std::string data_dir = tmp / "data";
  uint16_t port = FreePort();
  Flashsale serve;
  std::string admin_token;

  explicit Service(std::vector<std::string> more = {})
      : serve(ServeArgs(port, data_dir, std::move(more)), tmp / "serve.log", data_dir) {}

  ::testing::AssertionResult Start() {
    auto healthy = testing::WaitHealthy(serve, port, kStartupTimeout);
    if (!healthy) return healthy;
    admin_token = FirstLine(ReadFile(data_dir + "/admin-token"));
    return ::testing::AssertionSuccess();
  }
  std::map<std::string, std::string> Admin() const {
    return {{"Authorization", "Bearer " + admin_token}};
  }
  std::string Url() const { return fmt::format("http://127.0.0.1:{}", port); }
  // SIGTERM, then the exit status within the bound.
  std::optional<int> Stop() {
    serve.Signal(SIGTERM);
    return serve.WaitExit(kExitTimeout);
  }
};

// --- 5. The CLI finds the server ----------------------------------------------------------------

TEST(FirstWeekProcessTest, TheCliFindsTheServerByItsFlagItsVariableOrTheDataDirectory) {
  Service service({"--demo"});
  ASSERT_TRUE(service.Start());
  // serve says where it listens next to its admin token, once it listens.
  EXPECT_EQ(FirstLine(WaitForFile(service.data_dir + "/url")), service.Url());

  // --data-dir alone: every admin command and the load reach this serve on its port.
  const std::string& dir = service.data_dir;
  const Finished list =
      RunToExit({"activity", "list", "--json", "--data-dir", dir}, service.tmp, "list.log");
  EXPECT_EQ(ExitCode(list.status), 0) << list.output;
  EXPECT_NE(list.output.find("\"demo\""), std::string::npos) << list.output;
  const Finished job = RunToExit({"job", "reconcile", "--data-dir", dir}, service.tmp, "job.log");
  EXPECT_EQ(ExitCode(job.status), 0) << job.output;
  // dead-letters takes the activity as `activity show` does; --activity is still understood.
  const Finished dead =
      RunToExit({"dead-letters", "demo", "--data-dir", dir}, service.tmp, "dead.log");
  EXPECT_EQ(ExitCode(dead.status), 0) << dead.output;
  const Finished old_form =
      RunToExit({"dead-letters", "--activity", "demo", "--data-dir", dir}, service.tmp, "old.log");
  EXPECT_EQ(ExitCode(old_form.status), 0) << old_form.output;
  const Finished load =
      RunToExit({"load", "--data-dir", dir, "--activity", "demo", "--users", "20", "--user-ids",
                 "sequential", "--requests", "20", "--connections", "2"},
                service.tmp, "load.log");
  EXPECT_EQ(ExitCode(load.status), 0) << load.output;
  EXPECT_NE(load.output.find(service.Url()), std::string::npos) << load.output;

  // FLASHSALE_URL, from a directory where no serve runs; the flag wins over the variable.
  const std::string elsewhere = service.tmp / "elsewhere";
  std::filesystem::create_directories(elsewhere);
  const Finished by_variable = RunWithEnv(
      {"FLASHSALE_URL=" + service.Url()},
      {"activity", "list", "--json", "--data-dir", elsewhere, "--admin-token", service.admin_token},
      service.tmp, "variable.log");
  EXPECT_EQ(ExitCode(by_variable.status), 0) << by_variable.output;
  const Finished by_flag =
      RunWithEnv({"FLASHSALE_URL=http://127.0.0.1:1"},
                 {"activity", "list", "--json", "--url", service.Url(), "--data-dir", elsewhere,
                  "--admin-token", service.admin_token},
                 service.tmp, "flag.log");
  EXPECT_EQ(ExitCode(by_flag.status), 0) << by_flag.output;
  // A URL that answers nothing is named, with where it came from.
  const Finished wrong = RunWithEnv(
      {"FLASHSALE_URL=http://127.0.0.1:1"},
      {"activity", "list", "--data-dir", elsewhere, "--admin-token", service.admin_token},
      service.tmp, "wrong.log");
  EXPECT_EQ(ExitCode(wrong.status), 1) << wrong.output;
  EXPECT_NE(wrong.output.find("http://127.0.0.1:1"), std::string::npos) << wrong.output;
  EXPECT_NE(wrong.output.find("FLASHSALE_URL"), std::string::npos) << wrong.output;

  // A clean stop takes the file away: nothing points at a serve that is gone.
  EXPECT_EQ(ExitCode(service.Stop()), 0) << service.serve.Log();
  EXPECT_FALSE(std::filesystem::exists(service.data_dir + "/url"));
}

// --- 6. Output for people -----------------------------------------------------------------------

TEST(FirstWeekProcessTest, ReportsAreTextOnATerminalAndJsonInAPipeOrWithJson) {
  Service service({"--demo"});
  ASSERT_TRUE(service.Start());
  HttpClient client("127.0.0.1", service.port);
  ASSERT_EQ(client.Post("/api/v1/activities/demo/purchase", "", {{"X-User-Id", "ann"}}).status,
            200);
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--url", service.Url(), "--data-dir", service.data_dir});
    return args;
  };
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> says;  // on a terminal, in any case
    std::string json_key;           // in a pipe: a JSON object with this key
  };
  const std::vector<Case> cases = {
      {{"activity", "show", "demo"}, {"demo flash sale", "remaining", "99"}, "activity"},
      {{"activity", "list"}, {"remaining", "demo-lottery"}, "activities"},
      {{"job", "reconcile", "demo"}, {"reconcile", "demo", "drift"}, "job"},
      {{"dead-letters", "demo"}, {"no dead letters", "demo"}, "dead_letters"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{}", fmt::join(c.args, " ")));
    const Finished terminal = RunOnTerminal(cli(c.args));
    EXPECT_EQ(ExitCode(terminal.status), 0) << terminal.output;
    EXPECT_EQ(terminal.output.find('{'), std::string::npos) << "not text:\n" << terminal.output;
    for (const std::string& words : c.says) {
      EXPECT_NE(Lower(terminal.output).find(words), std::string::npos) << words << "\n"
                                                                       << terminal.output;
    }
    const Finished piped =
        RunToExit(cli(c.args), service.tmp, fmt::format("piped-{}.log", c.json_key));
    EXPECT_EQ(ExitCode(piped.status), 0) << piped.output;
    const json::value document = JsonOf(piped.output);
    ASSERT_TRUE(document.is_object()) << "not JSON:\n" << piped.output;
    EXPECT_TRUE(document.as_object().contains(c.json_key)) << piped.output;

    std::vector<std::string> with_json = c.args;
    with_json.emplace_back("--json");
    const Finished asked = RunOnTerminal(cli(with_json));
    EXPECT_EQ(ExitCode(asked.status), 0) << asked.output;
    EXPECT_TRUE(JsonOf(asked.output).is_object()) << "not JSON:\n" << asked.output;
  }
  // --text in a pipe: the table, as on a terminal.
  const Finished table = RunToExit(cli({"activity", "list", "--text"}), service.tmp, "table.log");
  EXPECT_EQ(ExitCode(table.status), 0) << table.output;
  EXPECT_NE(table.output.find("REMAINING"), std::string::npos) << table.output;
  EXPECT_EQ(table.output.find('{'), std::string::npos) << table.output;
}

// --- 7. config check and config template --------------------------------------------------------

TEST(FirstWeekProcessTest, ConfigCheckSaysOkOrListsEveryErrorAndTheTemplateComesFromTheBinary) {
  TempDir tmp;
  const std::string good = tmp / "good.toml";
  std::ofstream(good) << "threads = 2\naccess-log-sample = 0.5\ndemo = true\n";
  const Finished ok = RunToExit({"config", "check", good}, tmp, "good.log");
  EXPECT_EQ(ExitCode(ok.status), 0) << ok.output;
  EXPECT_NE(ok.output.find("OK"), std::string::npos) << ok.output;

  const std::string bad = tmp / "bad.toml";
  std::ofstream(bad) << "treads = 2\naccess-log-sample = 2\nlisten = \"nowhere\"\n";
  const Finished refused = RunToExit({"config", "check", bad}, tmp, "bad.log");
  EXPECT_EQ(ExitCode(refused.status), 1) << refused.output;
  for (const char* named :
       {"'treads'", "did you mean 'threads'", "'access-log-sample'", "'listen'", bad.c_str()}) {
    EXPECT_NE(refused.output.find(named), std::string::npos) << named << "\n" << refused.output;
  }
  EXPECT_EQ(refused.output.find("OK"), std::string::npos) << refused.output;
  const Finished missing = RunToExit({"config", "check", tmp / "none.toml"}, tmp, "none.log");
  EXPECT_EQ(ExitCode(missing.status), 1) << missing.output;
  EXPECT_NE(missing.output.find("cannot be read"), std::string::npos) << missing.output;

  // The commented template, from the binary itself: every line a comment; uncommented, it
  // passes the check.
  const Finished printed = RunToExit({"config", "template"}, tmp, "template.log");
  ASSERT_EQ(ExitCode(printed.status), 0) << printed.output;
  EXPECT_NE(printed.output.find("# listen = \"127.0.0.1:8080\""), std::string::npos)
      << printed.output;
  std::string uncommented;
  size_t settings = 0;
  std::istringstream lines(printed.output);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.empty() || line[0] == '#') << line;
    if (line.rfind("# ", 0) == 0 && line.find(" = ") != std::string::npos &&
        line.find(' ', 2) == line.find(" = ")) {
      uncommented += line.substr(2) + "\n";
      ++settings;
    }
  }
  EXPECT_GE(settings, 30u);
  const std::string all = tmp / "all.toml";
  std::ofstream(all) << uncommented;
  const Finished all_ok = RunToExit({"config", "check", all}, tmp, "all.log");
  EXPECT_EQ(ExitCode(all_ok.status), 0) << all_ok.output << "\n" << uncommented;
}

// --- 9. Secrets ---------------------------------------------------------------------------------

TEST(FirstWeekProcessTest, NoLineThatPrintsAUrlShowsItsPassword) {
  const std::string password = "redis-pass-0123456789";
  testing::RedisServer redis({.requirepass = password});
  const std::string redis_url = fmt::format("redis://:{}@127.0.0.1:{}/0", password, redis.port());
  Service service({"--demo", "--redis-url", redis_url});
  ASSERT_TRUE(service.Start());
  ASSERT_TRUE(service.serve.WaitForLog("serving on", seconds(10))) << service.serve.Log();
  EXPECT_EQ(service.serve.Log().find(password), std::string::npos) << service.serve.Log();

  // The load's verification line names the Redis and the database it checked.
  const Finished load =
      RunToExit({"load", "--url", service.Url(), "--activity", "demo", "--requests", "10",
                 "--users", "10", "--user-ids", "sequential", "--connections", "2", "--redis-url",
                 redis_url, "--db-url", "sqlite:" + service.data_dir + "/flashsale.db"},
                service.tmp, "load.log");
  EXPECT_EQ(ExitCode(load.status), 0) << load.output;
  EXPECT_NE(load.output.find("verify ("), std::string::npos) << load.output;
  EXPECT_EQ(load.output.find(password), std::string::npos) << load.output;
  EXPECT_NE(load.output.find(":***@"), std::string::npos) << load.output;

  // URLs refused at startup are named without their password too.
  const std::string secret = "hunter2-secret-pass";
  for (const std::vector<std::string>& setting : std::vector<std::vector<std::string>>{
           {"--redis-url", fmt::format("redis://:{}@127.0.0.1:notaport/0", secret)},
           {"--redis-url", fmt::format("redis://127.0.0.1:6379/zero?password={}", secret)},
           {"--redis-url", fmt::format("redis+cluster://:{}@127.0.0.1:1,/x", secret)},
           {"--db-url", fmt::format("postgres://app:{}@db.example/shop", secret)},
       }) {
    SCOPED_TRACE(setting[1]);
    std::vector<std::string> args = ServeArgs(FreePort(), service.tmp / "refused", setting);
    const Finished refused = RunToExit(args, service.tmp, "refused.log");
    EXPECT_NE(ExitCode(refused.status), 0) << refused.output;
    EXPECT_EQ(refused.output.find(secret), std::string::npos) << refused.output;
  }
}

TEST(FirstWeekProcessTest, ASecretUnder16BytesIsRefusedWhereverItIsTaken) {
  TempDir tmp;
  const std::string rule = "at least 16 bytes";
  auto expect_refused = [&](const Finished& finished, int code, const std::string& names) {
    EXPECT_EQ(ExitCode(finished.status), code) << finished.output;
    EXPECT_NE(finished.output.find(rule), std::string::npos) << finished.output;
    EXPECT_NE(finished.output.find(names), std::string::npos) << names << "\n" << finished.output;
    EXPECT_EQ(finished.output.find("serving on"), std::string::npos) << finished.output;
  };
  const std::string dir = tmp / "data";
  for (const char* flag : {"--secret", "--admin-token", "--gateway-secret"}) {
    SCOPED_TRACE(flag);
    expect_refused(RunToExit(ServeArgs(FreePort(), dir, {flag, "short"}), tmp, "serve.log"), 2,
                   flag);
  }
  expect_refused(RunWithEnv({"FLASHSALE_SECRET=short"}, ServeArgs(FreePort(), dir), tmp, "env.log"),
                 2, "FLASHSALE_SECRET");
  expect_refused(RunToExit({"token", "--user", "ann", "--secret", "short"}, tmp, "token.log"), 2,
                 "--secret");
  expect_refused(
      RunWithEnv({"FLASHSALE_SECRET=short"}, {"token", "--user", "ann"}, tmp, "token-env.log"), 2,
      "FLASHSALE_SECRET");
  expect_refused(RunToExit({"load", "--requests", "1", "--identity", "token", "--secret", "short",
                            "--url", "http://127.0.0.1:1"},
                           tmp, "load.log"),
                 2, "--secret");
  // The data directory's file: the same rule for token and for serve.
  const std::string short_dir = tmp / "short";
  std::filesystem::create_directories(short_dir);
  std::ofstream(short_dir + "/secret") << "short\n";
  expect_refused(RunToExit({"token", "--user", "ann", "--data-dir", short_dir}, tmp, "file.log"), 2,
                 short_dir + "/secret");
  expect_refused(RunToExit(ServeArgs(FreePort(), short_dir), tmp, "serve-file.log"), 1,
                 short_dir + "/secret");
  // 16 bytes is enough.
  const Finished enough =
      RunToExit({"token", "--user", "ann", "--secret", "0123456789abcdef"}, tmp, "enough.log");
  EXPECT_EQ(ExitCode(enough.status), 0) << enough.output;
}

// --- 10. What is said is true --------------------------------------------------------------------

TEST(FirstWeekProcessTest, WorkerHelpSaysThatWithoutListenThereIsNoHttp) {
  TempDir tmp;
  const Finished worker = RunToExit({"worker", "--help"}, tmp, "worker.log");
  EXPECT_EQ(ExitCode(worker.status), 0) << worker.output;
  const size_t at = worker.output.find("--listen");
  ASSERT_NE(at, std::string::npos) << worker.output;
  const std::string line = worker.output.substr(at, worker.output.find("\n  -", at) - at);
  EXPECT_EQ(line.find("127.0.0.1:8080"), std::string::npos) << line;
  EXPECT_NE(line.find("no HTTP"), std::string::npos) << line;
  const Finished serve = RunToExit({"serve", "--help"}, tmp, "serve.log");
  EXPECT_NE(serve.output.find("default: 127.0.0.1:8080"), std::string::npos) << serve.output;
}

TEST(FirstWeekProcessTest, ARestartedSoldOutDemoSaysSoAndWhatSoldCannotBeDeleted) {
  TempDir tmp;
  const std::string dir = tmp / "data";
  const std::vector<std::string> demo = {"--demo", "--demo-stock", "2"};
  {
    const uint16_t port = FreePort();
    Flashsale serve(ServeArgs(port, dir, demo), tmp / "first.log", dir);
    ASSERT_TRUE(testing::WaitHealthy(serve, port, kStartupTimeout));
    ASSERT_TRUE(serve.WaitForLog("curl", seconds(10))) << serve.Log();
    EXPECT_NE(serve.Log().find("'demo' is open with 2 units"), std::string::npos) << serve.Log();
    HttpClient client("127.0.0.1", port);
    for (const char* user : {"ann", "bob"}) {
      auto bought = client.Post("/api/v1/activities/demo/purchase", "", {{"X-User-Id", user}});
      ASSERT_NE(bought.body.find("\"reserved\""), std::string::npos) << bought.body;
    }
    serve.Signal(SIGTERM);
    ASSERT_EQ(ExitCode(serve.WaitExit(kExitTimeout)), 0) << serve.Log();
  }
  const uint16_t port = FreePort();
  Flashsale serve(ServeArgs(port, dir, demo), tmp / "second.log", dir);
  ASSERT_TRUE(testing::WaitHealthy(serve, port, kStartupTimeout));
  ASSERT_TRUE(serve.WaitForLog("curl", seconds(10))) << serve.Log();
  const std::string banner = serve.Log();
  EXPECT_EQ(banner.find("open with 2 units"), std::string::npos) << banner;
  EXPECT_NE(banner.find("'demo' is sold out"), std::string::npos) << banner;

  // Deleting it now conflicts with its state: 409, and it stays.
  HttpClient client("127.0.0.1", port);
  const std::string token = FirstLine(ReadFile(dir + "/admin-token"));
  auto refused = client.Request("DELETE", "/api/v1/admin/activities/demo", "",
                                {{"Authorization", "Bearer " + token}});
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("only an activity that sold nothing"), std::string::npos)
      << refused.body;
  EXPECT_EQ(client.Get("/api/v1/activities/demo").status, 200);
}

// --- 11. CORS -----------------------------------------------------------------------------------

TEST(FirstWeekProcessTest, CorsAnswersPreflightsOfThePublicRoutesForAllowedOriginsOnly) {
  const std::string shop = "http://shop.example";
  Service service({"--demo", "--cors-origin", shop + ",https://other.example:8443"});
  ASSERT_TRUE(service.Start());
  HttpClient client("127.0.0.1", service.port);
  auto preflight = [&](const std::string& target, const std::string& origin,
                       const std::string& method) {
    return client.Request("OPTIONS", target, "",
                          {{"Origin", origin},
                           {"Access-Control-Request-Method", method},
                           {"Access-Control-Request-Headers", "content-type,x-user-id"}});
  };
  struct Public {
    std::string target, method;
  };
  for (const Public& route : std::vector<Public>{
           {"/api/v1/activities/demo/purchase", "POST"},
           {"/api/v1/activities/demo-lottery/draw", "POST"},
           {"/api/v1/activities/demo-lottery/tickets/t1", "GET"},
           {"/api/v1/activities", "GET"},
           {"/api/v1/activities/demo", "GET"},
           {"/api/v1/config", "GET"},
           {"/api/v1/orders", "GET"},
           {"/api/v1/orders/o1/pay", "POST"},
       }) {
    SCOPED_TRACE(route.target);
    auto answer = preflight(route.target, shop, route.method);
    EXPECT_EQ(answer.status, 204) << answer.body;
    EXPECT_EQ(answer.headers["access-control-allow-origin"], shop);
    EXPECT_NE(answer.headers["access-control-allow-methods"].find(route.method), std::string::npos)
        << answer.headers["access-control-allow-methods"];
    EXPECT_NE(Lower(answer.headers["access-control-allow-headers"]).find("x-user-id"),
              std::string::npos)
        << answer.headers["access-control-allow-headers"];
    EXPECT_NE(answer.headers["vary"].find("Origin"), std::string::npos);
    EXPECT_TRUE(answer.body.empty()) << answer.body;
    // Another origin is told nothing.
    auto stranger = preflight(route.target, "http://evil.example", route.method);
    EXPECT_EQ(stranger.headers.count("access-control-allow-origin"), 0u);
  }
  // Never for the admin routes.
  for (const std::string target :
       {"/api/v1/admin/activities", "/api/v1/admin/activities/demo", "/api/v1/admin/tokens"}) {
    SCOPED_TRACE(target);
    auto answer = preflight(target, shop, "GET");
    EXPECT_EQ(answer.status, 405) << answer.body;
    EXPECT_EQ(answer.headers.count("access-control-allow-origin"), 0u);
  }
  // The actual replies: the origin allowed, only for an allowed origin and a public route.
  auto bought =
      client.Post("/api/v1/activities/demo/purchase", "", {{"X-User-Id", "ann"}, {"Origin", shop}});
  EXPECT_EQ(bought.status, 200) << bought.body;
  EXPECT_EQ(bought.headers["access-control-allow-origin"], shop);
  auto other = client.Get("/api/v1/activities", {{"Origin", "https://other.example:8443"}});
  EXPECT_EQ(other.headers["access-control-allow-origin"], "https://other.example:8443");
  auto stranger = client.Post("/api/v1/activities/demo/purchase", "",
                              {{"X-User-Id", "bob"}, {"Origin", "http://evil.example"}});
  EXPECT_EQ(stranger.status, 200) << stranger.body;
  EXPECT_EQ(stranger.headers.count("access-control-allow-origin"), 0u);
  auto no_origin = client.Get("/api/v1/activities");
  EXPECT_EQ(no_origin.headers.count("access-control-allow-origin"), 0u);
  auto admin_headers = service.Admin();
  admin_headers["Origin"] = shop;
  auto admin = client.Get("/api/v1/admin/activities", admin_headers);
  EXPECT_EQ(admin.status, 200) << admin.body;
  EXPECT_EQ(admin.headers.count("access-control-allow-origin"), 0u);

  // A malformed origin is refused at startup, naming it.
  const Finished bad =
      RunToExit(ServeArgs(FreePort(), service.tmp / "bad", {"--cors-origin", "shop.example"}),
                service.tmp, "bad.log");
  EXPECT_EQ(ExitCode(bad.status), 2) << bad.output;
  EXPECT_NE(bad.output.find("cors-origin"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("shop.example"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace flashsale
