// The private redis-server of `flashsale serve`: it starts on a fresh directory and serves the
// async client on its socket, keeps data across a restart (AOF), refuses a second server on the
// same directory, says clearly what is wrong when it cannot start, and leaves nothing running.

#include "supervise/embedded_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"
#include "support/redis_helpers.h"

namespace flashsale::supervise {
namespace {

using base::ErrorCode;
using redis::Connection;
using redis::Reply;
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
  auto endpoint = redis::ParseUrl(server->url());
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

  // The writes stop: the next look or the one after asks for the rewrite, which runs. (Redis
  // starts it inside BGREWRITEAOF, before the supervisor has counted its request: wait for both.)
  ASSERT_TRUE(Eventually(
      [&] {
        return PersistenceField(socket, "aof_rewrites") >= 1 &&
               server->aof_rewrites_requested() >= 1;
      },
      20s))
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
  // Counted once BGREWRITEAOF has answered, which can be after Redis started the rewrite.
  ASSERT_TRUE(Eventually([&] { return server->aof_rewrites_requested() >= 1; }, 10s));
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

// Loading an AOF slower than the start timeout. Redis's key-load-delay (a setting for tests:
// microseconds slept per key loaded from an RDB, here the AOF's base file) makes a small dataset
// load slowly, and loading-process-events-interval-bytes at its minimum makes Redis answer
// (-LOADING, INFO) every KiB while it loads.
constexpr int kSlowKeys = 4000;
constexpr int kKeyLoadDelayMicros = 1000;  // 4000 keys: at least 4 s of loading

std::string SlowLoadingServer(const TempDir& dir) {
  return FakeServer(dir, fmt::format("exec redis-server \"$@\" --key-load-delay {} "
                                     "--loading-process-events-interval-bytes 1024",
                                     kKeyLoadDelayMicros));
}

// kSlowKeys keys of 100 bytes, then an AOF rewrite, finished: the keys are in the AOF's base file
// (an RDB), where key-load-delay applies (it does not to the commands of the incremental file).
void FillAndRewriteAof(const std::string& socket) {
  redisContext* context = redisConnectUnix(socket.c_str());
  ASSERT_TRUE(context != nullptr && context->err == 0);
  const std::string value(100, 'v');
  for (int i = 0; i < kSlowKeys; ++i) {
    const std::string key = fmt::format("slow:{}", i);
    redisAppendCommand(context, "SET %b %b", key.data(), key.size(), value.data(), value.size());
  }
  for (int i = 0; i < kSlowKeys; ++i) {
    void* reply = nullptr;
    ASSERT_EQ(redisGetReply(context, &reply), REDIS_OK);
    freeReplyObject(reply);
  }
  auto* rewrite = static_cast<redisReply*>(redisCommand(context, "BGREWRITEAOF"));
  ASSERT_NE(rewrite, nullptr);
  freeReplyObject(rewrite);
  redisFree(context);
  ASSERT_TRUE(Eventually(
      [&] {
        return PersistenceField(socket, "aof_rewrites") >= 1 &&
               PersistenceField(socket, "aof_rewrite_in_progress") == 0 &&
               PersistenceField(socket, "aof_rewrite_scheduled") == 0;
      },
      30s));
}

int64_t DbSize(const std::string& socket) {
  redisContext* context = redisConnectUnix(socket.c_str());
  int64_t size = -1;
  if (context != nullptr && context->err == 0) {
    auto* reply = static_cast<redisReply*>(redisCommand(context, "DBSIZE"));
    if (reply != nullptr && reply->type == REDIS_REPLY_INTEGER) size = reply->integer;
    if (reply != nullptr) freeReplyObject(reply);
  }
  if (context != nullptr) redisFree(context);
  return size;
}

// The seconds Redis says its last load of the AOF's base file took ("DB loaded from base file
// appendonly.aof.1.base.rdb: 4.512 seconds"), -1 if redis.log does not say.
double LastBaseLoadSeconds(const std::string& log_path) {
  std::ifstream in(log_path);
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string marker = "DB loaded from base file ";
  const size_t at = log.rfind(marker);
  if (at == std::string::npos) return -1;
  const size_t colon = log.find(": ", at + marker.size());
  if (colon == std::string::npos) return -1;
  return std::atof(log.c_str() + colon + 2);
}

// The sale's Redis coming back with an AOF that takes longer to load than start_timeout: it is
// alive (it answers LOADING, and its loading progresses), so the start waits for it instead of
// killing it (before: "did not answer PING within 1000 ms", and the same again at every try).
TEST(EmbeddedServerTest, AStartWaitsWhileRedisLoadsAnAofLongerThanTheStartTimeout) {
  TempDir tmp;
  EmbeddedServerOptions options{.data_dir = tmp.Path("data")};
  {
    auto server = StartOrDie(options);
    FillAndRewriteAof(server->socket_path());
    server->Stop();
  }
  options.binary = SlowLoadingServer(tmp);
  options.start_timeout = 1s;
  auto server = EmbeddedServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.error().ToString();
  // The premise: the load did take longer than start_timeout (slept per key, a lower bound).
  ASSERT_GT(LastBaseLoadSeconds(tmp.Path("data/redis.log")), 1.0);
  EXPECT_EQ(DbSize((*server)->socket_path()), kSlowKeys);
}

// The same for the supervisor's restart after redis-server is killed: one restart that waits for
// the load, not a kill and a new attempt every start_timeout for ever.
TEST(EmbeddedServerTest, ASupervisedRestartWaitsWhileRedisLoadsAnAofLongerThanTheStartTimeout) {
  TempDir tmp;
  EmbeddedServerOptions options{.data_dir = tmp.Path("data")};
  options.binary = SlowLoadingServer(tmp);
  options.start_timeout = 1s;
  options.supervise = true;
  options.restart_backoff_initial = 50ms;
  options.restart_backoff_max = 200ms;
  auto server = StartOrDie(options);  // an empty directory: nothing to load
  FillAndRewriteAof(server->socket_path());
  const pid_t first = server->pid();
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { return server->restarts() >= 1 && server->up(); }, 60s))
      << "not back; restarts=" << server->restarts();
  EXPECT_EQ(server->restarts(), 1u);
  ASSERT_GT(LastBaseLoadSeconds(tmp.Path("data/redis.log")), 1.0);
  EXPECT_EQ(DbSize(server->socket_path()), kSlowKeys);
}

// Stands in for a redis-server whose loading is stuck: on `socket` it answers every PING with
// -LOADING and every INFO with the same loading progress, for as long as it lives.
class StuckLoadingServer {
 public:
  explicit StuckLoadingServer(const std::string& socket) {
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", socket.c_str());
    if (listener_ < 0 ||
        ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listener_, 16) != 0) {
      throw std::runtime_error("cannot listen on " + socket);
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~StuckLoadingServer() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  StuckLoadingServer(const StuckLoadingServer&) = delete;
  StuckLoadingServer& operator=(const StuckLoadingServer&) = delete;

 private:
  static size_t Count(std::string_view text, std::string_view word) {
    size_t count = 0;
    for (size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
      ++count;
    }
    return count;
  }

  void Run() {
    std::vector<int> clients;
    const std::string info =
        "# Persistence\r\nloading:1\r\nloading_total_bytes:1000000\r\n"
        "loading_loaded_bytes:250000\r\nloading_loaded_perc:25.00\r\nloading_eta_seconds:3\r\n";
    const std::string info_reply = fmt::format("${}\r\n{}\r\n", info.size(), info);
    const std::string loading_reply = "-LOADING Redis is loading the dataset in memory\r\n";
    char buffer[4096];
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (int fd : clients) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if ((fds[0].revents & POLLIN) != 0) {
        const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client >= 0) clients.push_back(client);
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        const ssize_t got = ::recv(fds[i].fd, buffer, sizeof(buffer), 0);
        if (got <= 0) {
          ::close(fds[i].fd);
          std::erase(clients, fds[i].fd);
          continue;
        }
        const std::string_view text(buffer, static_cast<size_t>(got));
        std::string out;
        for (size_t n = Count(text, "PING"); n > 0; --n) out += loading_reply;
        for (size_t n = Count(text, "INFO"); n > 0; --n) out += info_reply;
        if (::send(fds[i].fd, out.data(), out.size(), MSG_NOSIGNAL) < 0) continue;
      }
    }
    for (int fd : clients) ::close(fd);
  }

  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Waiting on a loading server is still bounded: one that answers LOADING but whose loading stops
// advancing is given up on after start_timeout without progress.
TEST(EmbeddedServerTest, ALoadingThatMakesNoProgressIsGivenUpOn) {
  TempDir tmp;
  const std::string data_dir = tmp.Path("data");
  fs::create_directories(data_dir);
  StuckLoadingServer stuck(data_dir + "/redis.sock");
  EmbeddedServerOptions options{.data_dir = data_dir};
  options.binary = FakeServer(tmp, "echo 'loading, slowly'\nexec sleep 30");
  options.start_timeout = 300ms;
  options.stop_timeout = 2s;
  auto server = EmbeddedServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().code, ErrorCode::kUnavailable);
  const std::string& message = server.error().message;
  EXPECT_TRUE(Contains(message, "answered LOADING but its loading made no progress for 300 ms"))
      << message;
  EXPECT_TRUE(Contains(message, "25% (0.2 of 1.0 MB), about 3 s left")) << message;
  EXPECT_TRUE(Contains(message, "loading, slowly")) << message;
}

}  // namespace
}  // namespace flashsale::supervise
