#pragma once
// The real `flashsale` binary as a child process for tests: a temporary directory, a free loopback
// port, the child (its output in a log file; SIGKILLed at the end of the scope with any
// redis-server it left on its data directory), and a bounded wait for it to become healthy.

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/subprocess.h"

namespace flashsale::testing {

// A temporary directory (/tmp/<prefix>-XXXXXX), removed with everything in it at the end of the
// scope.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "fs-proc");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path);

// A loopback port that was free a moment ago (bound to port 0, then closed).
uint16_t FreePort();

// The pids of live redis-server processes whose command line names `data_dir` (the embedded
// server's title is "redis-server unixsocket:<data_dir>/redis.sock").
std::vector<pid_t> RedisServersFor(const std::string& data_dir);

// One `flashsale` process (`binary` with `args`), its stdout and stderr in `log`. At the end of
// the scope it is SIGKILLed if still running, and so is any redis-server it left on `data_dir`
// (a test that failed half-way must not leave processes behind).
class FlashsaleProcess {
 public:
  FlashsaleProcess(const std::string& binary, std::vector<std::string> args, std::string log,
                   std::string data_dir = "");
  ~FlashsaleProcess();
  FlashsaleProcess(const FlashsaleProcess&) = delete;
  FlashsaleProcess& operator=(const FlashsaleProcess&) = delete;

  pid_t pid() const { return process_->pid(); }
  bool Running() { return process_->Running(); }
  void Signal(int signal) { process_->Signal(signal); }
  // The exit status once it has exited within `timeout`; empty if it has not.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);
  std::string Log() const { return ReadFile(log_); }
  // Polls until the log contains `text` (bounded); true if it does.
  bool WaitForLog(std::string_view text, std::chrono::milliseconds timeout);

 private:
  std::string log_;
  std::string data_dir_;
  std::optional<base::Subprocess> process_;
};

// Polls /healthz until it answers 200, the child exits, or `timeout` passes.
::testing::AssertionResult WaitHealthy(FlashsaleProcess& child, uint16_t port,
                                       std::chrono::milliseconds timeout);

}  // namespace flashsale::testing
