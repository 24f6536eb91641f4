#pragma once
// A child process: spawned from an argv, its output appended to a log file, signalled, waited for
// with a timeout and reaped. Used to run the private redis-server of `flashsale serve` and the
// redis-server processes of the tests.
//
// Contracts:
// - The handle owns the child until it is reaped, and a reaped child is never signalled again:
//   until waitpid() has collected it, its pid cannot be reused by another process, so Signal()
//   and Terminate() can never hit a stranger.
// - Every wait is bounded by a timeout. Waiting polls waitpid(WNOHANG) every 5 ms; nothing here
//   installs a SIGCHLD handler, which would steal the exit status of children of other code.
// - The child starts with stdin on /dev/null, stdout and stderr appended to the log file, every
//   other descriptor closed (unless listed in `inherit_fds`), no blocked signals and no ignored
//   ones (a parent that ignores SIGPIPE or blocks SIGTERM must not pass that on).
// - The child runs in a process group of its own: a Ctrl-C in a terminal reaches only the
//   parent, which stops its children in order.
// - Not thread-safe: one thread at a time per handle. Spawn may be called from any thread; the
//   child runs only async-signal-safe calls between fork and exec.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace flashsale::base {

class Subprocess {
 public:
  // Starts argv[0] (looked up in PATH unless it contains a '/') with the arguments argv[1..].
  // stdout and stderr are appended to `log_path` (created if missing; /dev/null if empty).
  // `inherit_fds` are descriptors the child keeps, at the same numbers (e.g. a lock that must be
  // held as long as the child lives); all others above stderr are closed in the child. The child
  // runs in a process group of its own, so terminal signals (Ctrl-C) reach only the parent.
  // Errors: kInvalidArgument for an empty argv; kNotFound (naming the program) when it is not in
  // PATH or cannot be executed; kUnavailable when the log cannot be opened or fork fails.
  // A nonzero `parent_death_signal` is delivered to the child when the thread that called Spawn
  // ends (Linux PR_SET_PDEATHSIG: the parent was killed, even by SIGKILL), so the child never
  // outlives its parent unnoticed; call Spawn from a thread that lives as long as the child
  // should. A child whose parent died before that was set up exits at once (code 1).
  static Result<Subprocess> Spawn(const std::vector<std::string>& argv, const std::string& log_path,
                                  const std::vector<int>& inherit_fds = {},
                                  int parent_death_signal = 0);

  Subprocess(Subprocess&& other) noexcept;
  // Terminates (5 s grace) the child this handle owned before taking over `other`'s.
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  // Terminate(5 s) if the child is still running.
  ~Subprocess();

  // The child's pid; it stays the same after the child is reaped (for logs: by then the number
  // may belong to another process). -1 in a moved-from handle.
  pid_t pid() const { return pid_; }

  // True while the child has not exited. Reaps it (recording its status) if it has.
  bool Running();

  // Sends `signal` to the child; does nothing once it has been reaped.
  void Signal(int signal);

  // Waits up to `timeout` for the child to exit and reaps it; true if it has exited (now or
  // before). A zero timeout checks once.
  bool Wait(std::chrono::milliseconds timeout);

  // SIGTERM (and SIGCONT, in case it is stopped), up to `grace` for it to exit, then SIGKILL and
  // up to 5 s more to reap it. Does nothing if it has exited already, so it may be called twice.
  void Terminate(std::chrono::milliseconds grace);

  // The status waitpid() reported (decode with WIFEXITED, WEXITSTATUS, WIFSIGNALED, WTERMSIG);
  // empty while the child runs, and also if someone else reaped it (SIGCHLD set to SIG_IGN).
  std::optional<int> exit_status() const { return exit_status_; }

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  // waitpid(WNOHANG) once; true if the child has been reaped (now or before).
  bool Poll();

  pid_t pid_ = -1;
  bool reaped_ = false;
  std::optional<int> exit_status_;
};

// "exited with code 1", "killed by signal 9 (SIGKILL)": a waitpid() status for messages.
std::string DescribeExitStatus(int status);

}  // namespace flashsale::base
