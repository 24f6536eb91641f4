#pragma once
// The private redis-server that `flashsale serve` starts when no Redis URL is configured: one
// child process per data directory, reachable only through a unix socket in that directory, its
// data made durable by an append-only file (fsync every second, and on shutdown).
//
// Layout of the data directory:
//   <data_dir>/redis.lock  flock()ed while a server runs on this directory
//   <data_dir>/redis.sock  the socket (mode 700: only our user may connect)
//   <data_dir>/redis.log   redis-server's log, and its stdout and stderr
//   <data_dir>/redis/      redis-server's working directory: the AOF (appendonlydir/)
//
// Two processes must never run Redis on one directory: both would write the same AOF. The lock
// guards that, and redis-server inherits it, so it stays held for as long as either flashsale or
// its redis-server lives: a redis-server left running by a flashsale that was killed still
// holds it, and a new flashsale refuses to start next to it instead of corrupting its files.
//
// Not thread-safe; Start and Stop block (up to start_timeout and stop_timeout).

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "base/subprocess.h"

namespace flashsale::redis {

struct EmbeddedServerOptions {
  std::string data_dir;  // created if missing; relative paths are made absolute
  std::string binary = "redis-server";
  std::chrono::milliseconds start_timeout{10000};  // until it answers PING (AOF loaded)
  std::chrono::milliseconds stop_timeout{10000};   // after SIGTERM, before SIGKILL
};

class EmbeddedServer {
 public:
  // Starts redis-server on the data directory and returns once it answers PING. Errors:
  //   kInvalidArgument  no data_dir, or the socket path would be too long for a unix socket;
  //   kNotFound         the binary is not installed (the message says what to do);
  //   kUnavailable      the lock is held (another flashsale uses the directory), the directory
  //                     cannot be created, or redis-server exited or did not answer in time (the
  //                     message ends with the last lines of redis.log).
  static base::Result<std::unique_ptr<EmbeddedServer>> Start(const EmbeddedServerOptions& options);

  ~EmbeddedServer();  // Stop()
  EmbeddedServer(const EmbeddedServer&) = delete;
  EmbeddedServer& operator=(const EmbeddedServer&) = delete;

  // unix://<absolute data_dir>/redis.sock, percent-encoded for redis::ParseUrl.
  std::string url() const;
  const std::string& data_dir() const { return data_dir_; }  // absolute
  const std::string& socket_path() const { return socket_path_; }
  // redis-server's pid; -1 once stopped.
  pid_t pid() const { return process_ ? process_->pid() : -1; }

  // SIGTERM (Redis writes and fsyncs its AOF on the way out), up to stop_timeout for it to exit,
  // then SIGKILL; then releases the lock. Idempotent.
  void Stop();

 private:
  EmbeddedServer(std::string data_dir, std::string socket_path, int lock_fd,
                 base::Subprocess process, std::chrono::milliseconds stop_timeout);

  std::string data_dir_;
  std::string socket_path_;
  int lock_fd_;  // -1 once stopped
  std::optional<base::Subprocess> process_;
  std::chrono::milliseconds stop_timeout_;
};

}  // namespace flashsale::redis
