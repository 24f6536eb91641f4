#include "supervise/embedded_server.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/process_stats.h"
#include "redis/connection.h"

namespace flashsale::supervise {
namespace {

using base::ErrorCode;
using base::MakeError;
using redis::InfoField;
namespace fs = std::filesystem;

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;  // 107 on Linux
constexpr auto kPingInterval = std::chrono::milliseconds(10);
// While redis-server loads its AOF at a start, its progress is logged once it has loaded for
// kLoadingLogAfter (a short load says nothing), then every kLoadingLogEvery.
constexpr auto kLoadingLogAfter = std::chrono::seconds(1);
constexpr auto kLoadingLogEvery = std::chrono::seconds(5);
// After asking for an AOF rewrite, the next request waits at least this long.
constexpr auto kAofRetryAfter = std::chrono::seconds(10);
constexpr size_t kLogTailBytes = 4096;
constexpr int kLogTailLines = 15;

// Closes a descriptor at the end of a scope unless released.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

uintmax_t FileSize(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

// The last lines redis-server wrote to its log since the log had `from` bytes, for error
// messages: why it exited (bad option, AOF damaged, socket in use) is there.
std::string LogTail(const std::string& path, uintmax_t from) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fmt::format("({} cannot be read)", path);
  const uintmax_t size = FileSize(path);
  const uintmax_t begin = std::max(from, size > kLogTailBytes ? size - kLogTailBytes : 0);
  in.seekg(static_cast<std::streamoff>(std::min(begin, size)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) return fmt::format("(nothing new in {})", path);
  size_t start = text.size();
  for (int lines = 0; lines < kLogTailLines && start > 0; ++lines) {
    const size_t newline = text.rfind('\n', start - 1);
    start = newline == std::string::npos ? 0 : newline;
  }
  if (start > 0) ++start;  // skip the newline itself
  return fmt::format("the end of {}:\n{}", path, std::string_view(text).substr(start));
}

// Blocks SIGPIPE in this thread for a scope, and discards one raised meanwhile: hiredis writes
// with write(), and a server that closes the socket as we write (it is shutting down) would
// otherwise kill the whole process with SIGPIPE.
class ScopedNoSigpipe {
 public:
  ScopedNoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedNoSigpipe() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec now{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &now) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedNoSigpipe(const ScopedNoSigpipe&) = delete;
  ScopedNoSigpipe& operator=(const ScopedNoSigpipe&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

// The loading fields of INFO persistence while Redis loads its dataset (loading:1).
struct LoadingProgress {
  uint64_t loaded_bytes = 0;
  uint64_t total_bytes = 0;
  double percent = 0;
  int64_t eta_seconds = -1;  // -1: not known yet
};

// What one look at a starting redis-server found.
struct StartProbe {
  enum class State {
    kNoAnswer,  // not listening yet, no reply in time, or a reply that is neither of the below
    kReady,     // PONG: the socket is bound and the dataset loaded
    kLoading,   // -LOADING: alive, still loading its AOF (progress from INFO, when it answered)
  };
  State state = State::kNoAnswer;
  std::optional<LoadingProgress> progress;
};

std::optional<LoadingProgress> ParseLoadingProgress(std::string_view info) {
  if (InfoField(info, "loading") != "1") return std::nullopt;
  LoadingProgress progress;
  bool any = false;
  auto read = [&](std::string_view name, auto& out) {
    const std::string text = InfoField(info, name);
    if (text.empty()) return;
    std::remove_reference_t<decltype(out)> value{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return;
    out = value;
    any = true;
  };
  read("loading_loaded_bytes", progress.loaded_bytes);
  read("loading_total_bytes", progress.total_bytes);
  read("loading_loaded_perc", progress.percent);
  read("loading_eta_seconds", progress.eta_seconds);
  if (!any) return std::nullopt;
  return progress;
}

// One look at the socket (bounded by 500 ms a step): PING, and while it answers -LOADING, INFO
// persistence for how far the loading has come (INFO is served while loading; PING is not).
StartProbe ProbeStart(const std::string& socket_path) {
  const ScopedNoSigpipe no_sigpipe;
  const timeval timeout{0, 500 * 1000};
  StartProbe probe;
  redisContext* context = redisConnectUnixWithTimeout(socket_path.c_str(), timeout);
  if (context == nullptr) return probe;
  if (context->err == 0 && redisSetTimeout(context, timeout) == REDIS_OK) {
    auto* reply = static_cast<redisReply*>(redisCommand(context, "PING"));
    if (reply != nullptr) {
      const std::string_view text(reply->str != nullptr ? reply->str : "",
                                  reply->str != nullptr ? reply->len : 0);
      if (reply->type == REDIS_REPLY_STATUS && text == "PONG") {
        probe.state = StartProbe::State::kReady;
      } else if (reply->type == REDIS_REPLY_ERROR && text.starts_with("LOADING")) {
        probe.state = StartProbe::State::kLoading;
      }
      freeReplyObject(reply);
    }
    if (probe.state == StartProbe::State::kLoading) {
      auto* info = static_cast<redisReply*>(redisCommand(context, "INFO persistence"));
      if (info != nullptr && info->type == REDIS_REPLY_STRING) {
        probe.progress = ParseLoadingProgress(std::string_view(info->str, info->len));
      }
      if (info != nullptr) freeReplyObject(info);
    }
  }
  redisFree(context);
  return probe;
}

std::string DescribeLoading(const std::optional<LoadingProgress>& progress) {
  if (!progress) return "progress not reported";
  const bool megabytes = progress->total_bytes >= 1000000;
  const double unit = megabytes ? 1e6 : 1e3;
  std::string text =
      fmt::format("{:.0f}% ({:.1f} of {:.1f} {})", progress->percent, progress->loaded_bytes / unit,
                  progress->total_bytes / unit, megabytes ? "MB" : "KB");
  if (progress->eta_seconds >= 0) text += fmt::format(", about {} s left", progress->eta_seconds);
  return text;
}

// One command on a short-lived connection to the socket (bounded by 500 ms): the reply's text
// (a status or bulk string), nothing on any failure.
std::optional<std::string> QueryText(const std::string& socket_path, const char* command) {
  const ScopedNoSigpipe no_sigpipe;
  const timeval timeout{0, 500 * 1000};
  redisContext* context = redisConnectUnixWithTimeout(socket_path.c_str(), timeout);
  if (context == nullptr) return std::nullopt;
  std::optional<std::string> text;
  if (context->err == 0 && redisSetTimeout(context, timeout) == REDIS_OK) {
    auto* reply = static_cast<redisReply*>(redisCommand(context, command));
    if (reply != nullptr &&
        (reply->type == REDIS_REPLY_STATUS || reply->type == REDIS_REPLY_STRING)) {
      text.emplace(reply->str, reply->len);
    }
    if (reply != nullptr) freeReplyObject(reply);
  }
  redisFree(context);
  return text;
}

// Percent-encodes everything in a path but unreserved characters and '/', so that a directory
// with a space, '?', '#' or '%' in its name survives ParseUrl (which decodes the path).
std::string EncodePath(std::string_view path) {
  std::string out;
  for (const char c : path) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", byte);
    }
  }
  return out;
}

// Opens a lock file; the descriptor is closed on exec (a child gets it only when passed on).
base::Result<int> OpenLockFile(const std::string& lock_path) {
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return MakeError(ErrorCode::kUnavailable, "cannot open the lock file {}: {}", lock_path,
                     std::strerror(errno));
  }
  return fd;
}

// flock(LOCK_EX | LOCK_NB): true when taken, false when someone else holds it.
base::Result<bool> TryLock(int fd, const std::string& lock_path) {
  int result;
  do {
    result = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (result != 0 && errno == EINTR);
  if (result == 0) return true;
  if (errno == EWOULDBLOCK) return false;
  return MakeError(ErrorCode::kUnavailable, "cannot lock {}: {}", lock_path, std::strerror(errno));
}

base::Error InUse(const std::string& data_dir, const std::string& lock_path) {
  return MakeError(ErrorCode::kUnavailable,
                   "another flashsale seems to be using the data directory {} (its lock {} is "
                   "held): stop it, or use another data directory",
                   data_dir, lock_path);
}

// The pid a redis-server reports in INFO server (process_id), or -1; then SHUTDOWN, which makes
// it write and fsync its AOF and exit (no reply comes when it works).
pid_t ShutdownOverSocket(const std::string& socket_path) {
  const ScopedNoSigpipe no_sigpipe;
  const timeval timeout{1, 0};
  redisContext* context = redisConnectUnixWithTimeout(socket_path.c_str(), timeout);
  if (context == nullptr) return -1;
  pid_t pid = -1;
  if (context->err == 0 && redisSetTimeout(context, timeout) == REDIS_OK) {
    auto* info = static_cast<redisReply*>(redisCommand(context, "INFO server"));
    if (info != nullptr && info->type == REDIS_REPLY_STRING) {
      const std::string_view text(info->str, info->len);
      const size_t at = text.find("process_id:");
      if (at != std::string_view::npos) pid = std::atoi(text.data() + at + 11);
    }
    if (info != nullptr) freeReplyObject(info);
    auto* reply = static_cast<redisReply*>(redisCommand(context, "SHUTDOWN"));
    if (reply != nullptr) {
      if (reply->type == REDIS_REPLY_ERROR) {
        spdlog::warn("embedded redis: the left-over redis-server refused SHUTDOWN: {}",
                     std::string_view(reply->str, reply->len));
      }
      freeReplyObject(reply);
    }
  }
  redisFree(context);
  return pid;
}

// Polls the lock until it is taken or `timeout` passes.
base::Result<bool> LockWithin(int fd, const std::string& lock_path,
                              std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto taken = TryLock(fd, lock_path);
    if (!taken || *taken) return taken;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(kPingInterval);
  }
}

// redis.lock is held while flashsale.lock was free: a redis-server left running by a flashsale
// that died. Asks it to shut down (it flushes its AOF), then SIGTERM to the pid it reported if
// it is still there, each with a bounded wait for the lock.
base::Status ShutDownLeftOver(int lock_fd, const std::string& lock_path,
                              const std::string& socket_path, const std::string& data_dir,
                              std::chrono::milliseconds timeout) {
  spdlog::warn(
      "embedded redis: a redis-server left by an earlier flashsale still runs on {} (no flashsale "
      "behind it); shutting it down",
      data_dir);
  const pid_t pid = ShutdownOverSocket(socket_path);
  auto taken = LockWithin(lock_fd, lock_path, timeout);
  if (!taken) return std::move(taken).error();
  if (!*taken && pid > 0) {
    spdlog::warn("embedded redis: the left-over redis-server (pid {}) is still there; SIGTERM",
                 pid);
    ::kill(pid, SIGTERM);
    taken = LockWithin(lock_fd, lock_path, timeout);
    if (!taken) return std::move(taken).error();
  }
  if (!*taken) {
    return MakeError(ErrorCode::kUnavailable,
                     "the data directory {} is locked by a redis-server left by an earlier "
                     "flashsale ({}), and it did not shut down within {} ms: stop it by hand",
                     data_dir,
                     pid > 0 ? fmt::format("pid {}", pid) : "it does not answer on " + socket_path,
                     timeout.count());
  }
  spdlog::info("embedded redis: the left-over redis-server{} has shut down",
               pid > 0 ? fmt::format(" (pid {})", pid) : "");
  return {};
}

// Spawns redis-server on the prepared directory and waits until it answers PING (its AOF
// loaded). `stopped` (may be null) ends the wait early.
base::Result<base::Subprocess> SpawnServer(const EmbeddedServerOptions& options,
                                           const std::string& socket_path, int lock_fd,
                                           const std::function<bool()>& stopped) {
  const fs::path dir(options.data_dir);
  const std::string redis_dir = (dir / "redis").string();
  const std::string log_path = (dir / "redis.log").string();
  const uintmax_t log_start = FileSize(log_path);
  std::vector<std::string> argv = {options.binary,
                                   "--port",
                                   "0",
                                   "--unixsocket",
                                   socket_path,
                                   "--unixsocketperm",
                                   "700",
                                   "--dir",
                                   redis_dir,
                                   "--appendonly",
                                   "yes",
                                   "--appendfsync",
                                   options.appendfsync,
                                   "--save",
                                   "",
                                   "--daemonize",
                                   "no",
                                   "--logfile",
                                   log_path};
  if (options.supervise) {
    // The supervisor decides when the AOF is rewritten (see the header).
    argv.insert(argv.end(), {"--auto-aof-rewrite-percentage", "0"});
  }
  // redis-server inherits the lock (see the header): it is released only when both are gone.
  auto spawned = base::Subprocess::Spawn(argv, log_path, {lock_fd}, SIGTERM);
  if (!spawned) {
    if (spawned.error().code == ErrorCode::kNotFound) {
      return MakeError(ErrorCode::kNotFound,
                       "{} not found in PATH: install it (scripts/install-deps.sh) or give a Redis "
                       "URL with --redis-url ({})",
                       options.binary, spawned.error().message);
    }
    return MakeError(ErrorCode::kUnavailable, "cannot start {}: {}", options.binary,
                     spawned.error().message);
  }
  base::Subprocess process = std::move(spawned).value();

  // Ready when it answers PING: the socket is bound and the AOF loaded. While it answers
  // -LOADING it is alive and replaying its AOF, which may take longer than start_timeout (see
  // the header): the wait goes on as long as the loading makes progress, start_timeout being
  // the longest it may go without answering at all or without loading a byte more.
  using SteadyClock = std::chrono::steady_clock;
  const auto began = SteadyClock::now();
  auto until = began + options.start_timeout;
  bool loading = false;
  bool logged = false;
  std::optional<LoadingProgress> last_progress;
  auto next_log = began + kLoadingLogAfter;
  for (;;) {
    if (!process.Running()) {
      const auto status = process.exit_status();
      return MakeError(ErrorCode::kUnavailable, "{} exited during startup ({}); {}", options.binary,
                       status ? base::DescribeExitStatus(*status) : "status unknown",
                       LogTail(log_path, log_start));
    }
    const StartProbe probe = ProbeStart(socket_path);
    const auto now = SteadyClock::now();
    const auto elapsed_ms = [&] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(now - began).count();
    };
    if (probe.state == StartProbe::State::kReady) {
      if (logged) {
        spdlog::info("embedded redis: redis-server (pid {}) loaded its AOF in {} ms", process.pid(),
                     elapsed_ms());
      }
      break;
    }
    if (probe.state == StartProbe::State::kLoading) {
      if (!loading) {
        loading = true;
        until = now + options.start_timeout;  // it answers: alive
      }
      if (probe.progress &&
          (!last_progress || probe.progress->loaded_bytes != last_progress->loaded_bytes)) {
        until = now + options.start_timeout;  // progress
        last_progress = probe.progress;
      }
      if (now >= next_log) {
        next_log = now + kLoadingLogEvery;
        logged = true;
        spdlog::info("embedded redis: redis-server (pid {}) loading its AOF: {}, {} ms so far",
                     process.pid(), DescribeLoading(probe.progress), elapsed_ms());
      }
    }
    if (now >= until || (stopped && stopped())) {
      process.Terminate(options.stop_timeout);
      if (loading) {
        return MakeError(ErrorCode::kUnavailable,
                         "{} on {} answered LOADING but its loading made no progress for {} ms "
                         "(last seen: {}); {}",
                         options.binary, socket_path, options.start_timeout.count(),
                         DescribeLoading(last_progress), LogTail(log_path, log_start));
      }
      return MakeError(ErrorCode::kUnavailable, "{} did not answer PING on {} within {} ms; {}",
                       options.binary, socket_path, options.start_timeout.count(),
                       LogTail(log_path, log_start));
    }
    std::this_thread::sleep_for(kPingInterval);
  }
  return process;
}

}  // namespace

base::Result<std::unique_ptr<EmbeddedServer>> EmbeddedServer::Start(
    const EmbeddedServerOptions& options) {
  if (options.data_dir.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "embedded redis: no data directory given");
  }
  if (options.appendfsync != "everysec" && options.appendfsync != "always" &&
      options.appendfsync != "no") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "embedded redis: appendfsync '{}' is not one of "
                     "everysec, always, no",
                     options.appendfsync);
  }
  // Absolute, so url() works from any working directory.
  std::error_code ec;
  fs::path dir = fs::absolute(options.data_dir, ec).lexically_normal();
  if (ec) {
    return MakeError(ErrorCode::kInvalidArgument, "data directory '{}': {}", options.data_dir,
                     ec.message());
  }
  if (!dir.has_filename() && dir != dir.root_path()) dir = dir.parent_path();  // "/a/b/"
  const std::string data_dir = dir.string();
  const std::string socket_path = (dir / "redis.sock").string();
  if (socket_path.size() > kMaxSocketPath) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "data directory {} is too long for the embedded Redis: its socket {} would "
                     "be {} bytes, and a unix socket path may have at most {}; use a shorter data "
                     "directory",
                     data_dir, socket_path, socket_path.size(), kMaxSocketPath);
  }
  const std::string redis_dir = (dir / "redis").string();
  fs::create_directories(redis_dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kUnavailable, "cannot create the data directory {}: {}", redis_dir,
                     ec.message());
  }
  // flashsale.lock first: held, another flashsale runs here.
  const std::string owner_lock_path = (dir / "flashsale.lock").string();
  auto owner_fd = OpenLockFile(owner_lock_path);
  if (!owner_fd) return std::move(owner_fd).error();
  ScopedFd owner_lock(*owner_fd);
  auto owner_taken = TryLock(owner_lock.get(), owner_lock_path);
  if (!owner_taken) return std::move(owner_taken).error();
  if (!*owner_taken) return InUse(data_dir, owner_lock_path);

  // Then redis.lock: held now, a redis-server outlived its flashsale.
  const std::string lock_path = (dir / "redis.lock").string();
  auto lock = OpenLockFile(lock_path);
  if (!lock) return std::move(lock).error();
  ScopedFd lock_fd(*lock);
  auto taken = TryLock(lock_fd.get(), lock_path);
  if (!taken) return std::move(taken).error();
  if (!*taken) {
    if (auto shut =
            ShutDownLeftOver(lock_fd.get(), lock_path, socket_path, data_dir, options.stop_timeout);
        !shut) {
      return std::move(shut).error();
    }
  }

  EmbeddedServerOptions resolved = options;
  resolved.data_dir = data_dir;
  auto process = SpawnServer(resolved, socket_path, lock_fd.get(), nullptr);
  if (!process) return std::move(process).error();
  std::unique_ptr<EmbeddedServer> server(new EmbeddedServer(std::move(resolved), socket_path,
                                                            owner_lock.release(), lock_fd.release(),
                                                            std::move(process).value()));
  if (server->options_.supervise)
    server->supervisor_ = std::thread([s = server.get()] {
      base::NameThisThread("fs-redis-watch");
      s->Supervise();
    });
  return server;
}

EmbeddedServer::EmbeddedServer(EmbeddedServerOptions options, std::string socket_path,
                               int owner_lock_fd, int lock_fd, base::Subprocess process)
    : options_(std::move(options)),
      socket_path_(std::move(socket_path)),
      owner_lock_fd_(owner_lock_fd),
      lock_fd_(lock_fd),
      process_(std::move(process)) {
  pid_ = process_->pid();
}

EmbeddedServer::~EmbeddedServer() { Stop(); }

std::string EmbeddedServer::url() const { return "unix://" + EncodePath(socket_path_); }

bool EmbeddedServer::SleepUnlessStopped(std::chrono::milliseconds duration) {
  std::unique_lock lock(mutex_);
  return !stop_cv_.wait_for(lock, duration, [this] { return stopping_; });
}

void EmbeddedServer::Supervise() {
  int attempt = 0;
  auto up_since = std::chrono::steady_clock::now();
  auto stopped = [this] {
    std::lock_guard lock(mutex_);
    return stopping_;
  };
  auto next_aof_check = std::chrono::steady_clock::now() + options_.aof_check_every;
  while (SleepUnlessStopped(options_.watch_interval)) {
    if (process_->Running()) {
      if (const auto now = std::chrono::steady_clock::now(); now >= next_aof_check) {
        next_aof_check = now + options_.aof_check_every;
        CheckAofRewrite();
      }
      // Up for a while: the next failure starts the backoff from the beginning again.
      if (attempt > 0 &&
          std::chrono::steady_clock::now() - up_since >= options_.restart_backoff_max * 2) {
        attempt = 0;
      }
      continue;
    }
    const auto lost_at = std::chrono::steady_clock::now();
    if (up_.exchange(false)) {
      const auto status = process_->exit_status();
      spdlog::error("embedded redis: redis-server (pid {}) {}; restarting it on {}",
                    process_->pid(),
                    status ? base::DescribeExitStatus(*status) : "exited (status unknown)",
                    options_.data_dir);
    }
    for (;;) {
      const int shift = std::min(attempt, 16);
      const auto backoff = std::min<std::chrono::milliseconds>(
          options_.restart_backoff_max, options_.restart_backoff_initial * (int64_t{1} << shift));
      ++attempt;
      spdlog::warn("embedded redis: restart attempt {} in {} ms", attempt, backoff.count());
      if (!SleepUnlessStopped(backoff)) return;
      auto process = SpawnServer(options_, socket_path_, lock_fd_, stopped);
      if (process) {
        process_ = std::move(process).value();
        pid_ = process_->pid();
        restarts_.fetch_add(1);
        up_ = true;
        aof_seen_size_.reset();  // its AOF as it reloaded it: a new baseline
        up_since = std::chrono::steady_clock::now();
        spdlog::warn(
            "embedded redis: redis-server back up (pid {}) after {} ms, attempt {}",
            process_->pid(),
            std::chrono::duration_cast<std::chrono::milliseconds>(up_since - lost_at).count(),
            attempt);
        break;
      }
      if (stopped()) return;
      spdlog::error("embedded redis: restart attempt {} failed: {}", attempt,
                    process.error().message);
    }
  }
}

void EmbeddedServer::CheckAofRewrite() {
  const auto info = QueryText(socket_path_, "INFO persistence");
  const auto state = info ? ParseAofState(*info) : std::nullopt;
  if (!state) return;  // not answering (busy, loading, restarting): look again next time
  const auto now = std::chrono::steady_clock::now();
  const std::optional<uint64_t> seen = aof_seen_size_;
  const auto seen_at = aof_seen_at_;
  aof_seen_size_ = state->current_size;
  aof_seen_at_ = now;
  if (!seen) return;  // the first look: the growth is known from the next one on
  const uint64_t grown = state->current_size > *seen ? state->current_size - *seen : 0;
  const double seconds = std::chrono::duration<double>(now - seen_at).count();
  const AofRewrite decision = DecideAofRewrite(options_.aof_rewrite, *state, grown, seconds);
  if (decision == AofRewrite::kWaiting) {
    if (!aof_waiting_logged_) {
      spdlog::info(
          "embedded redis: AOF rewrite due ({} bytes, {} after the last rewrite), "
          "deferred while the AOF grows {:.0f} bytes/s",
          state->current_size, state->base_size, grown / std::max(seconds, 1e-3));
      aof_waiting_logged_ = true;
    }
    return;
  }
  if (decision != AofRewrite::kQuiet && decision != AofRewrite::kOverdue) return;
  // One request at a time: a rewrite Redis refused or that failed is asked for again, not at
  // every look.
  if (aof_rewrites_requested_.load() > 0 && now - aof_requested_at_ < kAofRetryAfter) return;
  const auto answer = QueryText(socket_path_, "BGREWRITEAOF");
  aof_requested_at_ = now;
  aof_waiting_logged_ = false;
  aof_rewrites_requested_.fetch_add(1);
  spdlog::info(
      "embedded redis: AOF rewrite asked for ({}; {} bytes, {} after the last rewrite): {}",
      ToString(decision), state->current_size, state->base_size,
      answer ? *answer : std::string("no answer"));
}

void EmbeddedServer::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (supervisor_.joinable()) supervisor_.join();
  if (process_) {
    process_->Terminate(options_.stop_timeout);
    process_.reset();
  }
  pid_ = -1;
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
  if (owner_lock_fd_ >= 0) {
    ::close(owner_lock_fd_);
    owner_lock_fd_ = -1;
  }
}

}  // namespace flashsale::supervise
