#include "redis/embedded_server.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <sys/file.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace flashsale::redis {
namespace {

using base::ErrorCode;
using base::MakeError;
namespace fs = std::filesystem;

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;  // 107 on Linux
constexpr auto kPingInterval = std::chrono::milliseconds(10);
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

// True when a redis-server answers PING with PONG on the socket (not while it loads its AOF:
// it answers -LOADING then).
bool AnswersPing(const std::string& socket_path) {
  const timeval timeout{0, 500 * 1000};
  redisContext* context = redisConnectUnixWithTimeout(socket_path.c_str(), timeout);
  if (context == nullptr) return false;
  bool ok = false;
  if (context->err == 0 && redisSetTimeout(context, timeout) == REDIS_OK) {
    auto* reply = static_cast<redisReply*>(redisCommand(context, "PING"));
    ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS &&
         std::string_view(reply->str, reply->len) == "PONG";
    if (reply != nullptr) freeReplyObject(reply);
  }
  redisFree(context);
  return ok;
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

// Takes the data directory's lock without waiting; the descriptor holds it until closed.
base::Result<int> Lock(const std::string& lock_path, const std::string& data_dir) {
  ScopedFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    return MakeError(ErrorCode::kUnavailable, "cannot open the lock file {}: {}", lock_path,
                     std::strerror(errno));
  }
  int result;
  do {
    result = ::flock(fd.get(), LOCK_EX | LOCK_NB);
  } while (result != 0 && errno == EINTR);
  if (result != 0 && errno == EWOULDBLOCK) {
    return MakeError(ErrorCode::kUnavailable,
                     "another flashsale seems to be using the data directory {} (its lock {} is "
                     "held, by that flashsale or by a redis-server it left running): stop it, "
                     "or use another data directory",
                     data_dir, lock_path);
  }
  if (result != 0) {
    return MakeError(ErrorCode::kUnavailable, "cannot lock {}: {}", lock_path,
                     std::strerror(errno));
  }
  return fd.release();
}

}  // namespace

base::Result<std::unique_ptr<EmbeddedServer>> EmbeddedServer::Start(
    const EmbeddedServerOptions& options) {
  if (options.data_dir.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "embedded redis: no data directory given");
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
  auto lock = Lock((dir / "redis.lock").string(), data_dir);
  if (!lock) return std::move(lock).error();
  ScopedFd lock_fd(*lock);

  const std::string log_path = (dir / "redis.log").string();
  const uintmax_t log_start = FileSize(log_path);
  const std::vector<std::string> argv = {
      options.binary, "--port", "0",       "--unixsocket", socket_path, "--unixsocketperm",
      "700",          "--dir",  redis_dir, "--appendonly", "yes",       "--appendfsync",
      "everysec",     "--save", "",        "--daemonize",  "no",        "--logfile",
      log_path};
  // redis-server inherits the lock (see the header): it is released only when both are gone.
  auto spawned = base::Subprocess::Spawn(argv, log_path, {lock_fd.get()});
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

  // Ready when it answers PING: the socket is bound and the AOF loaded.
  const auto until = std::chrono::steady_clock::now() + options.start_timeout;
  for (;;) {
    if (!process.Running()) {
      const auto status = process.exit_status();
      return MakeError(ErrorCode::kUnavailable, "{} exited during startup ({}); {}", options.binary,
                       status ? base::DescribeExitStatus(*status) : "status unknown",
                       LogTail(log_path, log_start));
    }
    if (AnswersPing(socket_path)) break;
    if (std::chrono::steady_clock::now() >= until) {
      process.Terminate(options.stop_timeout);
      return MakeError(ErrorCode::kUnavailable, "{} did not answer PING on {} within {} ms; {}",
                       options.binary, socket_path, options.start_timeout.count(),
                       LogTail(log_path, log_start));
    }
    std::this_thread::sleep_for(kPingInterval);
  }
  return std::unique_ptr<EmbeddedServer>(new EmbeddedServer(
      data_dir, socket_path, lock_fd.release(), std::move(process), options.stop_timeout));
}

EmbeddedServer::EmbeddedServer(std::string data_dir, std::string socket_path, int lock_fd,
                               base::Subprocess process, std::chrono::milliseconds stop_timeout)
    : data_dir_(std::move(data_dir)),
      socket_path_(std::move(socket_path)),
      lock_fd_(lock_fd),
      process_(std::move(process)),
      stop_timeout_(stop_timeout) {}

EmbeddedServer::~EmbeddedServer() { Stop(); }

std::string EmbeddedServer::url() const { return "unix://" + EncodePath(socket_path_); }

void EmbeddedServer::Stop() {
  if (process_) {
    process_->Terminate(stop_timeout_);
    process_.reset();
  }
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
}

}  // namespace flashsale::redis
