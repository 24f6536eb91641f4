// The private redis-server of `flashsale serve`: it starts on a fresh directory and serves the
// async client on its socket, keeps data across a restart (AOF), refuses a second server on the
// same directory, says clearly what is wrong when it cannot start, and leaves nothing running.

#include "redis/embedded_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "base/subprocess.h"
#include "support/redis_helpers.h"

namespace flashsale::redis {
namespace {

using base::ErrorCode;
using testing::Connect;
using testing::Exec;
using testing::IoThread;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

bool Contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// A private temporary directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "flashsale-embedded-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string Path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::unique_ptr<EmbeddedServer> StartOrDie(const EmbeddedServerOptions& options) {
  auto server = EmbeddedServer::Start(options);
  if (!server.ok()) throw std::runtime_error(server.error().ToString());
  return std::move(server).value();
}

bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// An executable shell script standing in for redis-server.
std::string FakeServer(const TempDir& dir, const std::string& body) {
  const std::string path = dir.Path("fake-redis-server");
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(EmbeddedServerTest, StartsOnAFreshDirectoryAndServesTheAsyncClient) {
  TempDir tmp;
  // Not there yet, nested, and with a space: the URL must still lead to the socket.
  const std::string data_dir = tmp.Path("flashsale data/nested");
  auto server = StartOrDie({.data_dir = data_dir});
  EXPECT_GT(server->pid(), 0);
  EXPECT_TRUE(fs::is_directory(data_dir + "/redis"));
  EXPECT_TRUE(fs::exists(data_dir + "/redis.lock"));
  EXPECT_TRUE(fs::is_socket(data_dir + "/redis.sock"));
  EXPECT_EQ(server->socket_path(), data_dir + "/redis.sock");
  EXPECT_EQ(server->url(), "unix://" + tmp.Path("flashsale%20data/nested/redis.sock"));
  auto endpoint = ParseUrl(server->url());
  ASSERT_TRUE(endpoint.ok()) << endpoint.error().ToString();
  EXPECT_EQ(endpoint->path, server->socket_path());

  IoThread io;
  auto connection = Connect(io, server->url());
  auto set = Exec(io, *connection, {"SET", "greeting", "hello"}, 5s);
  ASSERT_TRUE(set.ok()) << set.error().ToString();
  auto get = Exec(io, *connection, {"GET", "greeting"});
  ASSERT_TRUE(get.ok()) << get.error().ToString();
  EXPECT_EQ(get->str(), "hello");
  // The settings it was started with: no TCP, an AOF.
  auto port = Exec(io, *connection, {"CONFIG", "GET", "port"});
  ASSERT_TRUE(port.ok());
  ASSERT_EQ(port->size(), 2u);
  EXPECT_EQ((*port)[1].str(), "0");
  auto aof = Exec(io, *connection, {"CONFIG", "GET", "appendonly"});
  ASSERT_TRUE(aof.ok());
  ASSERT_EQ(aof->size(), 2u);
  EXPECT_EQ((*aof)[1].str(), "yes");
  testing::Stop(io, connection);
}

TEST(EmbeddedServerTest, RelativeDataDirectoryIsMadeAbsolute) {
  TempDir tmp;
  const fs::path absolute = tmp.Path("data");
  const fs::path relative = fs::relative(absolute.parent_path(), fs::current_path()) / "data";
  ASSERT_TRUE(relative.is_relative()) << relative;
  auto server = StartOrDie({.data_dir = relative.string()});
  EXPECT_TRUE(fs::path(server->data_dir()).is_absolute()) << server->data_dir();
  EXPECT_TRUE(fs::equivalent(server->data_dir(), absolute)) << server->data_dir();
  EXPECT_TRUE(Contains(server->url(), "unix:///")) << server->url();

  IoThread io;
  auto connection = Connect(io, server->url());
  auto ping = Exec(io, *connection, {"PING"}, 5s);
  ASSERT_TRUE(ping.ok()) << ping.error().ToString();
  testing::Stop(io, connection);
}

TEST(EmbeddedServerTest, DataSurvivesStopAndStart) {
  TempDir tmp;
  const EmbeddedServerOptions options{.data_dir = tmp.Path("data")};
  IoThread io;
  {
    auto server = StartOrDie(options);
    auto connection = Connect(io, server->url());
    for (int i = 0; i < 100; ++i) {
      auto incr = Exec(io, *connection, {"INCR", "counter"}, 5s);
      ASSERT_TRUE(incr.ok()) << incr.error().ToString();
    }
    ASSERT_TRUE(Exec(io, *connection, {"HSET", "order:1", "user", "u1", "qty", "2"}).ok());
    testing::Stop(io, connection);
    server->Stop();  // SIGTERM: Redis fsyncs its AOF on the way out
  }
  EXPECT_TRUE(fs::exists(tmp.Path("data/redis/appendonlydir")));

  auto server = StartOrDie(options);
  auto connection = Connect(io, server->url());
  auto counter = Exec(io, *connection, {"GET", "counter"}, 5s);
  ASSERT_TRUE(counter.ok()) << counter.error().ToString();
  EXPECT_EQ(counter->str(), "100");
  auto user = Exec(io, *connection, {"HGET", "order:1", "user"});
  ASSERT_TRUE(user.ok());
  EXPECT_EQ(user->str(), "u1");
  testing::Stop(io, connection);
}

TEST(EmbeddedServerTest, SecondServerOnTheSameDirectoryIsRefused) {
  TempDir tmp;
  const EmbeddedServerOptions options{.data_dir = tmp.Path("data")};
  auto first = StartOrDie(options);

  auto second = EmbeddedServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(
      Contains(second.error().message, "another flashsale seems to be using the data directory"))
      << second.error().message;
  EXPECT_TRUE(Contains(second.error().message, first->data_dir())) << second.error().message;

  // The refused start did not disturb the running server.
  IoThread io;
  auto connection = Connect(io, first->url());
  ASSERT_TRUE(Exec(io, *connection, {"PING"}, 5s).ok());
  testing::Stop(io, connection);

  // redis-server holds the lock too, so a redis-server outliving a killed flashsale still keeps
  // the directory locked.
  if (fs::exists("/proc/self/fd")) {
    bool holds_lock = false;
    for (const auto& entry : fs::directory_iterator(fmt::format("/proc/{}/fd", first->pid()))) {
      std::error_code ec;
      if (fs::read_symlink(entry.path(), ec) == fs::path(first->data_dir()) / "redis.lock") {
        holds_lock = true;
      }
    }
    EXPECT_TRUE(holds_lock) << "redis-server did not inherit the lock";
  }

  // Once the first has stopped, the directory is free again.
  first->Stop();
  auto third = EmbeddedServer::Start(options);
  ASSERT_TRUE(third.ok()) << third.error().ToString();
}

TEST(EmbeddedServerTest, MissingBinaryIsNotFoundWithAHint) {
  TempDir tmp;
  EmbeddedServerOptions options{.data_dir = tmp.Path("data")};
  options.binary = "no-such-redis-server-xyz";
  auto server = EmbeddedServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().code, ErrorCode::kNotFound);
  const std::string& message = server.error().message;
  EXPECT_TRUE(Contains(message, "no-such-redis-server-xyz not found in PATH")) << message;
  EXPECT_TRUE(Contains(message, "scripts/install-deps.sh")) << message;
  EXPECT_TRUE(Contains(message, "--redis-url")) << message;

  // The failed start released the lock.
  options.binary = "redis-server";
  auto real = EmbeddedServer::Start(options);
  ASSERT_TRUE(real.ok()) << real.error().ToString();
}

TEST(EmbeddedServerTest, EarlyExitReportsTheEndOfTheLog) {
  TempDir tmp;
  EmbeddedServerOptions options{.data_dir = tmp.Path("data")};
  options.binary = FakeServer(tmp, "echo 'FATAL: cannot open the AOF' >&2\nexit 1");
  auto server = EmbeddedServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().code, ErrorCode::kUnavailable);
  const std::string& message = server.error().message;
  EXPECT_TRUE(Contains(message, "exited during startup (exited with code 1)")) << message;
  EXPECT_TRUE(Contains(message, "FATAL: cannot open the AOF")) << message;
}

TEST(EmbeddedServerTest, ServerThatNeverAnswersTimesOut) {
  TempDir tmp;
  EmbeddedServerOptions options{.data_dir = tmp.Path("data")};
  options.binary = FakeServer(tmp, "echo 'loading a very large AOF'\nexec sleep 30");
  options.start_timeout = 300ms;
  options.stop_timeout = 2s;
  const auto started = std::chrono::steady_clock::now();
  auto server = EmbeddedServer::Start(options);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().code, ErrorCode::kUnavailable);
  const std::string& message = server.error().message;
  EXPECT_TRUE(Contains(message, "did not answer PING")) << message;
  EXPECT_TRUE(Contains(message, "within 300 ms")) << message;
  EXPECT_TRUE(Contains(message, "loading a very large AOF")) << message;
}

TEST(EmbeddedServerTest, StopLeavesNoProcess) {
  TempDir tmp;
  auto server = StartOrDie({.data_dir = tmp.Path("data")});
  const pid_t pid = server->pid();
  ASSERT_TRUE(ProcessExists(pid));
  server->Stop();
  EXPECT_FALSE(ProcessExists(pid)) << "redis-server " << pid << " is still there";
  EXPECT_EQ(server->pid(), -1);
  server->Stop();  // idempotent

  pid_t destroyed_pid = -1;
  {
    auto other = StartOrDie({.data_dir = tmp.Path("other")});
    destroyed_pid = other->pid();
  }
  EXPECT_FALSE(ProcessExists(destroyed_pid)) << "the destructor did not stop redis-server";
}

// Polls `done` every 20 ms until it holds or `timeout` passes.
template <typename Predicate>
bool Eventually(Predicate done, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

TEST(EmbeddedServerTest, SupervisedServerKilledIsRestartedOnItsAofAndClientsReconnect) {
  TempDir tmp;
  EmbeddedServerOptions options{.data_dir = tmp.Path("data")};
  options.appendfsync = "always";  // so nothing acknowledged before the kill may be missing
  options.supervise = true;
  options.restart_backoff_initial = 50ms;
  auto server = StartOrDie(options);
  const pid_t first = server->pid();
  EXPECT_EQ(server->restarts(), 0u);
  EXPECT_TRUE(server->up());

  IoThread io;
  auto connection = Connect(io, server->url());
  ASSERT_TRUE(Exec(io, *connection, {"SET", "before", "kill"}, 5s).ok());
  auto fsync = Exec(io, *connection, {"CONFIG", "GET", "appendfsync"});
  ASSERT_TRUE(fsync.ok());
  ASSERT_EQ(fsync->size(), 2u);
  EXPECT_EQ((*fsync)[1].str(), "always");

  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { return server->restarts() == 1 && server->up(); }, 30s))
      << "not restarted; restarts=" << server->restarts();
  EXPECT_NE(server->pid(), first);
  EXPECT_TRUE(ProcessExists(server->pid()));
  // The killed one was reaped (a zombie would still answer kill(0)).
  EXPECT_FALSE(ProcessExists(first)) << "the killed redis-server was not reaped";

  // The same connection reconnects by itself and finds the data of before the kill.
  std::optional<base::Result<Reply>> got;
  ASSERT_TRUE(Eventually(
      [&] {
        got = Exec(io, *connection, {"GET", "before"}, 1s);
        return got->ok();
      },
      30s))
      << got->error().ToString();
  EXPECT_EQ((*got)->str(), "kill");
  testing::Stop(io, connection);

  // The restarted server loaded the AOF the killed one left.
  std::ifstream log_file(tmp.Path("data/redis.log"));
  const std::string log((std::istreambuf_iterator<char>(log_file)),
                        std::istreambuf_iterator<char>());
  EXPECT_TRUE(Contains(log, "DB loaded from incr file")) << log;

  const pid_t second = server->pid();
  server->Stop();
  EXPECT_FALSE(ProcessExists(second));
  EXPECT_EQ(server->pid(), -1);
}

// INFO persistence's field `name` (-1 if it cannot be read).
int64_t PersistenceField(const std::string& socket, const std::string& name) {
  redisContext* context = redisConnectUnix(socket.c_str());
  int64_t value = -1;
  if (context != nullptr && context->err == 0) {
    auto* reply = static_cast<redisReply*>(redisCommand(context, "INFO persistence"));
    if (reply != nullptr && reply->type == REDIS_REPLY_STRING) {
      const std::string info(reply->str, reply->len);
      const auto at = info.find("\n" + name + ":");
      if (at != std::string::npos) value = std::stoll(info.substr(at + name.size() + 2));
    }
    if (reply != nullptr) freeReplyObject(reply);
  }
  if (context != nullptr) redisFree(context);
  return value;
}

// Writes 64 KiB (16 SETs of 4 KiB, pipelined) every 50 ms, about 1.25 MiB/s, while `go` says so.
class SteadyWriter {
 public:
  explicit SteadyWriter(const std::string& socket) : context_(redisConnectUnix(socket.c_str())) {
    if (context_ == nullptr || context_->err != 0) throw std::runtime_error("connect failed");
  }
  ~SteadyWriter() { redisFree(context_); }
  SteadyWriter(const SteadyWriter&) = delete;
  SteadyWriter& operator=(const SteadyWriter&) = delete;

  // One 50 ms step: 64 KiB written and acknowledged, then the rest of the step slept.
  void Step() {
    const auto start = std::chrono::steady_clock::now();
    const std::string value(4096, static_cast<char>('a' + step_ % 26));
    for (int i = 0; i < 16; ++i) {
      const std::string key = "k" + std::to_string(step_ * 16 + i);
      redisAppendCommand(context_, "SET %b %b", key.data(), key.size(), value.data(), value.size());
    }
    for (int i = 0; i < 16; ++i) {
      void* reply = nullptr;
      if (redisGetReply(context_, &reply) != REDIS_OK) throw std::runtime_error("SET failed");
      freeReplyObject(reply);
    }
    ++step_;
    std::this_thread::sleep_until(start + 50ms);
  }

 private:
  redisContext* context_;
  int64_t step_ = 0;
};

// A supervised server whose AOF rewrite is due past 1 MiB at 100 % growth, quiet below 64 KiB/s
// and overdue at `overdue_percent`, looked at every 300 ms.
EmbeddedServerOptions AofRewriteOptions(const TempDir& tmp, int64_t overdue_percent) {
  EmbeddedServerOptions options{.data_dir = tmp.Path("data")};
  options.supervise = true;
  options.aof_rewrite = {.min_size = 1 << 20,
                         .growth_percent = 100,
                         .overdue_percent = overdue_percent,
                         .quiet_bytes_per_second = 64 << 10};
  options.aof_check_every = 300ms;
  return options;
}

// The supervisor rewrites the AOF as Redis would, but not while it grows fast: a due rewrite
// waits for the writes to stop (Redis's own automatic rewrite is off).
TEST(EmbeddedServerTest, ADueAofRewriteWaitsForAQuietMoment) {
  TempDir tmp;
  auto server = StartOrDie(AofRewriteOptions(tmp, 5000));  // overdue: not reached here
  const std::string socket = server->socket_path();
  ASSERT_EQ(PersistenceField(socket, "aof_rewrites"), 0);

  SteadyWriter writer(socket);
  // Past the minimum size (due: the fresh server's AOF has grown far more than 100 %), then
  // about 1.5 s more of writes: the supervisor looked about five times and asked for nothing.
  for (int i = 0; i < 400 && PersistenceField(socket, "aof_current_size") < (2 << 20); ++i) {
    writer.Step();
  }
  ASSERT_GE(PersistenceField(socket, "aof_current_size"), 2 << 20);
  for (int i = 0; i < 30; ++i) writer.Step();
  EXPECT_EQ(server->aof_rewrites_requested(), 0u);
  EXPECT_EQ(PersistenceField(socket, "aof_rewrites"), 0);

  // The writes stop: the next look or the one after asks for the rewrite, which runs.
  ASSERT_TRUE(Eventually([&] { return PersistenceField(socket, "aof_rewrites") >= 1; }, 20s))
      << "requested " << server->aof_rewrites_requested();
  EXPECT_EQ(server->aof_rewrites_requested(), 1u);
  EXPECT_EQ(PersistenceField(socket, "aof_rewrites"), 1);
}

// An overdue rewrite (grown overdue_percent over the larger of the last rewrite's size and the
// minimum) runs while the writes go on.
TEST(EmbeddedServerTest, AnOverdueAofRewriteRunsWhileWritesGoOn) {
  TempDir tmp;
  auto server = StartOrDie(AofRewriteOptions(tmp, 100));  // overdue at 2 MiB
  const std::string socket = server->socket_path();

  SteadyWriter writer(socket);
  int64_t size_at_rewrite = -1;
  for (int i = 0; i < 400 && size_at_rewrite < 0; ++i) {  // bounded: 20 s, about 25 MiB
    writer.Step();
    if (PersistenceField(socket, "aof_rewrites") >= 1 ||
        PersistenceField(socket, "aof_rewrite_in_progress") == 1) {
      size_at_rewrite = PersistenceField(socket, "aof_current_size");
    }
  }
  ASSERT_GE(size_at_rewrite, 0) << "no rewrite while writing";
  EXPECT_EQ(server->aof_rewrites_requested(), 1u);
}

TEST(EmbeddedServerTest, UnsupervisedServerKilledStaysDown) {
  TempDir tmp;
  auto server = StartOrDie({.data_dir = tmp.Path("data")});
  const pid_t first = server->pid();
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(server->restarts(), 0u);
  EXPECT_EQ(server->pid(), first);
}

TEST(EmbeddedServerTest, LeftOverServerWithNoFlashsaleBehindItIsShutDownCleanlyAndTheNewOneStarts) {
  TempDir tmp;
  const std::string data_dir = tmp.Path("data");
  // A redis-server as a flashsale killed before this change would have left it: on the
  // directory's socket, holding redis.lock, nobody holding flashsale.lock.
  fs::create_directories(data_dir + "/redis");
  const std::string socket = data_dir + "/redis.sock";
  const int lock_fd =
      ::open((data_dir + "/redis.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(lock_fd, 0);
  ASSERT_EQ(::flock(lock_fd, LOCK_EX | LOCK_NB), 0);
  auto spawned = base::Subprocess::Spawn(
      {"redis-server", "--port", "0", "--unixsocket", socket, "--unixsocketperm", "700", "--dir",
       data_dir + "/redis", "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
       "--logfile", data_dir + "/redis.log"},
      "", {lock_fd});
  ASSERT_TRUE(spawned.ok()) << spawned.error().ToString();
  base::Subprocess left_over = std::move(spawned).value();
  ::close(lock_fd);  // only the left-over redis-server holds it now
  {
    IoThread io;
    std::shared_ptr<Connection> connection;
    ASSERT_TRUE(Eventually(
        [&] {
          connection = Connect(io, "unix://" + socket);
          const bool ok = Exec(io, *connection, {"SET", "left", "over"}, 1s).ok();
          if (!ok) testing::Stop(io, connection);
          return ok;
        },
        30s));
    testing::Stop(io, connection);
  }

  auto server = EmbeddedServer::Start({.data_dir = data_dir});
  ASSERT_TRUE(server.ok()) << server.error().ToString();
  // The left-over one exited by itself, cleanly (SHUTDOWN: exit code 0), before ours started.
  ASSERT_TRUE(left_over.Wait(10s));
  ASSERT_TRUE(left_over.exit_status().has_value());
  EXPECT_TRUE(WIFEXITED(*left_over.exit_status()))
      << base::DescribeExitStatus(*left_over.exit_status());
  EXPECT_EQ(WEXITSTATUS(*left_over.exit_status()), 0);
  EXPECT_NE((*server)->pid(), left_over.pid());

  // Its data (written under appendfsync everysec, flushed by SHUTDOWN) is in the new server.
  IoThread io;
  auto connection = Connect(io, (*server)->url());
  auto left = Exec(io, *connection, {"GET", "left"}, 5s);
  ASSERT_TRUE(left.ok()) << left.error().ToString();
  EXPECT_EQ(left->str(), "over");
  testing::Stop(io, connection);

  // And a second flashsale next to this one is still refused.
  auto second = EmbeddedServer::Start({.data_dir = data_dir});
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(Contains(second.error().message, "another flashsale seems to be using"))
      << second.error().message;
}

TEST(EmbeddedServerTest, RedisServerIsToldToStopWhenTheThreadThatStartedItEnds) {
  TempDir tmp;
  std::unique_ptr<EmbeddedServer> server;
  std::thread starter([&] { server = StartOrDie({.data_dir = tmp.Path("data")}); });
  starter.join();  // stands in for a flashsale that died: PR_SET_PDEATHSIG fires
  ASSERT_TRUE(server);
  const pid_t pid = server->pid();
  EXPECT_TRUE(
      Eventually([&] { return !server->up() || ::waitpid(pid, nullptr, WNOHANG) == pid; }, 30s))
      << "redis-server " << pid << " outlived the thread that started it";
  server->Stop();
}

TEST(EmbeddedServerTest, BadAppendfsyncIsRefused) {
  TempDir tmp;
  EmbeddedServerOptions options{.data_dir = tmp.Path("data")};
  options.appendfsync = "sometimes";
  auto server = EmbeddedServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().code, ErrorCode::kInvalidArgument);
}

TEST(EmbeddedServerTest, TooLongSocketPathIsRefused) {
  TempDir tmp;
  const std::string data_dir = tmp.Path(std::string(120, 'd'));
  auto server = EmbeddedServer::Start({.data_dir = data_dir});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(Contains(server.error().message, "too long")) << server.error().message;
  EXPECT_FALSE(fs::exists(data_dir)) << "refused, yet created the directory";

  auto empty = EmbeddedServer::Start({});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashsale::redis
