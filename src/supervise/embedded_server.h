#pragma once
// The private redis-server that `flashsale serve` starts when no Redis URL is configured: one
// child process per data directory, reachable only through a unix socket in that directory, its
// data made durable by an append-only file (fsync every second, and on shutdown).
//
// Layout of the data directory:
//   <data_dir>/flashsale.lock  flock()ed by the flashsale process that runs the server (only by
//                          it: redis-server does not inherit this one)
//   <data_dir>/redis.lock  flock()ed while a server runs on this directory
//   <data_dir>/redis.sock  the socket (mode 700: only our user may connect)
//   <data_dir>/redis.log   redis-server's log, and its stdout and stderr
//   <data_dir>/redis/      redis-server's working directory: the AOF (appendonlydir/)
//
// Two processes must never run Redis on one directory: both would write the same AOF. redis.lock
// guards that, and redis-server inherits it, so it stays held for as long as either flashsale or
// its redis-server lives. flashsale.lock tells the two apart: a second flashsale on a directory
// whose first one lives finds flashsale.lock held and is refused; a flashsale that finds only
// redis.lock held has found a redis-server left behind by a flashsale that died (no flashsale
// behind it), asks it to SHUTDOWN over its socket (it writes and fsyncs its AOF), waits for the
// lock (bounded), and starts.
//
// redis-server is told to stop (SIGTERM) when the thread that started it ends, e.g. when
// flashsale is killed (PR_SET_PDEATHSIG), so it rarely outlives flashsale; Start from a thread
// that lives as long as the server (the main thread).
//
// Supervision (options.supervise): a thread of the server watches redis-server; when it exits or
// is killed, the thread reaps it, logs its exit status, and starts it again on the same
// directory (it reloads its AOF) after a backoff that doubles from restart_backoff_initial up to
// restart_backoff_max, logging each attempt, until it is back or Stop is called. Meanwhile the
// clients' connections fail fast and reconnect by themselves once it is back.
//
// The AOF's rewrites (with options.supervise): Redis's automatic rewrite is off
// (auto-aof-rewrite-percentage 0) and the supervisor asks for one (BGREWRITEAOF) by the rule of
// supervise/aof_rewrite.h, looking at INFO persistence every aof_check_every: when Redis would
// rewrite, but only at a moment the AOF is not growing fast (not in the middle of a burst),
// unless the rewrite is overdue. Without supervision Redis rewrites by its own defaults.
//
// Starting (the first start and every restart of the supervisor): redis-server answers -LOADING
// until it has replayed its AOF, which takes as long as the AOF is large (the rewrite rule lets it
// grow to about five times its size after a rewrite: supervise/aof_rewrite.h). The start waits for
// as long as it loads, logging its progress from INFO persistence every few seconds ("loading its
// AOF: 42% (120.0 of 287.0 MB), about 3 s left"). start_timeout bounds only the silences: a
// server that has answered neither PONG nor LOADING for that long, or whose loading has not
// advanced a byte for that long, is given up on (SIGTERM, then an error; the supervisor tries
// again after its backoff).
//
// Start and Stop block (Start as long as the AOF loads, see above; Stop up to stop_timeout); call
// them from one thread. pid(), restarts() and the accessors may be read from any thread.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/subprocess.h"
#include "supervise/aof_rewrite.h"

namespace flashsale::supervise {

struct EmbeddedServerOptions {
  std::string data_dir;  // created if missing; relative paths are made absolute
  std::string binary = "redis-server";
  // Until it answers PING, and the longest a loading AOF may go without progress (see above).
  std::chrono::milliseconds start_timeout{10000};
  std::chrono::milliseconds stop_timeout{10000};  // after SIGTERM, before SIGKILL
  // Redis's appendfsync: "everysec" (a crash may lose about the last second of acknowledged
  // writes) or "always" (fsync before each reply: nothing acknowledged is lost; slower).
  std::string appendfsync = "everysec";
  bool supervise = false;  // restart redis-server when it exits (see above)
  std::chrono::milliseconds restart_backoff_initial{100};
  std::chrono::milliseconds restart_backoff_max{5000};
  std::chrono::milliseconds watch_interval{50};  // how often the supervisor checks the child
  AofRewritePolicy aof_rewrite;                  // with supervise (see above)
  std::chrono::milliseconds aof_check_every{1000};
};

class EmbeddedServer {
 public:
  // Starts redis-server on the data directory and returns once it answers PING. Errors:
  //   kInvalidArgument  no data_dir, or the socket path would be too long for a unix socket;
  //   kNotFound         the binary is not installed (the message says what to do);
  //   kUnavailable      the lock is held (another flashsale uses the directory), the directory
  //                     cannot be created, or redis-server exited, did not answer in time, or
  //                     stopped making progress loading its AOF (the message ends with the last
  //                     lines of redis.log).
  static base::Result<std::unique_ptr<EmbeddedServer>> Start(const EmbeddedServerOptions& options);

  ~EmbeddedServer();  // Stop()
  EmbeddedServer(const EmbeddedServer&) = delete;
  EmbeddedServer& operator=(const EmbeddedServer&) = delete;

  // unix://<absolute data_dir>/redis.sock, percent-encoded for redis::ParseUrl.
  std::string url() const;
  const std::string& data_dir() const { return options_.data_dir; }  // absolute
  const std::string& socket_path() const { return socket_path_; }
  // redis-server's pid (the current one, after a restart); -1 once stopped.
  pid_t pid() const { return pid_.load(); }
  // How many times the supervisor has brought redis-server back after it exited.
  uint64_t restarts() const { return restarts_.load(); }
  // False from the moment the supervisor sees redis-server gone until it answers PING again.
  bool up() const { return up_.load(); }
  // How many AOF rewrites the supervisor has asked for (see above).
  uint64_t aof_rewrites_requested() const { return aof_rewrites_requested_.load(); }

  // SIGTERM (Redis writes and fsyncs its AOF on the way out), up to stop_timeout for it to exit,
  // then SIGKILL; then releases the locks. Stops the supervisor first. Idempotent.
  void Stop();

 private:
  EmbeddedServer(EmbeddedServerOptions options, std::string socket_path, int owner_lock_fd,
                 int lock_fd, base::Subprocess process);
  void Supervise();
  // One look at the AOF (see above); asks for a rewrite when the rule says so.
  void CheckAofRewrite();
  // Sleeps up to `duration`; false if Stop was called meanwhile.
  bool SleepUnlessStopped(std::chrono::milliseconds duration);

  EmbeddedServerOptions options_;  // data_dir absolute
  std::string socket_path_;
  int owner_lock_fd_;                        // flashsale.lock; -1 once stopped
  int lock_fd_;                              // redis.lock; -1 once stopped
  std::optional<base::Subprocess> process_;  // touched by the supervisor while it runs
  std::atomic<pid_t> pid_{-1};
  std::atomic<uint64_t> restarts_{0};
  std::atomic<bool> up_{true};
  std::atomic<uint64_t> aof_rewrites_requested_{0};
  // The supervisor's last look at the AOF (touched by it alone).
  std::optional<uint64_t> aof_seen_size_;
  std::chrono::steady_clock::time_point aof_seen_at_{};
  std::chrono::steady_clock::time_point aof_requested_at_{};
  bool aof_waiting_logged_ = false;

  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread supervisor_;
};

}  // namespace flashsale::supervise
