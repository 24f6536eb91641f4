#include "base/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

namespace flashsale::base {
namespace {

using namespace std::chrono_literals;

// A private temporary directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string templ =
        (std::filesystem::temp_directory_path() / "flashsale-subprocess-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// True while a process with this pid exists (a zombie counts: it has not been reaped).
bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

Subprocess SpawnOrDie(const std::vector<std::string>& argv, const std::string& log = "") {
  auto child = Subprocess::Spawn(argv, log);
  if (!child.ok()) throw std::runtime_error(child.error().ToString());
  return std::move(child).value();
}

TEST(SubprocessTest, TerminateStopsAndReapsTheChild) {
  auto child = SpawnOrDie({"sleep", "30"});
  const pid_t pid = child.pid();
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(child.Running());
  EXPECT_TRUE(ProcessExists(pid));

  const auto started = std::chrono::steady_clock::now();
  child.Terminate(5s);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s) << "SIGTERM was not enough?";
  EXPECT_FALSE(child.Running());
  EXPECT_FALSE(ProcessExists(pid)) << "the child is still there, or was not reaped";
  ASSERT_TRUE(child.exit_status().has_value());
  EXPECT_TRUE(WIFSIGNALED(*child.exit_status()));
  EXPECT_EQ(WTERMSIG(*child.exit_status()), SIGTERM);
  EXPECT_EQ(DescribeExitStatus(*child.exit_status()), "killed by signal 15 (SIGTERM)");

  child.Terminate(5s);  // idempotent: nothing left to signal
  EXPECT_EQ(child.pid(), pid);
  EXPECT_EQ(WTERMSIG(*child.exit_status()), SIGTERM);
}

// Polls `log` until it reads `text`, for up to 10 s.
bool WaitForLog(const std::string& log, const std::string& text) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (ReadFile(log) != text) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(SubprocessTest, TerminateContinuesAStoppedChild) {
  // A child with a SIGTERM handler (as redis-server has): while stopped it cannot run it, so
  // Terminate must continue it, or it would only die by SIGKILL after the grace period.
  TempDir dir;
  const std::string log = dir.File("child.log");
  auto child =
      SpawnOrDie({"sh", "-c", "trap 'kill $!; exit 7' TERM; echo ready; sleep 30 & wait"}, log);
  ASSERT_TRUE(WaitForLog(log, "ready\n"));
  child.Signal(SIGSTOP);
  child.Terminate(5s);
  ASSERT_TRUE(child.exit_status().has_value());
  EXPECT_TRUE(WIFEXITED(*child.exit_status())) << DescribeExitStatus(*child.exit_status());
  EXPECT_EQ(WEXITSTATUS(*child.exit_status()), 7);
}

TEST(SubprocessTest, TerminateKillsAChildThatIgnoresSigterm) {
  // The shell ignores SIGTERM, then execs sleep, which keeps the disposition.
  TempDir dir;
  const std::string log = dir.File("child.log");
  auto child = SpawnOrDie({"sh", "-c", "trap '' TERM; echo ready; exec sleep 30"}, log);
  ASSERT_TRUE(WaitForLog(log, "ready\n"));
  const auto started = std::chrono::steady_clock::now();
  child.Terminate(100ms);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);
  ASSERT_TRUE(child.exit_status().has_value());
  EXPECT_TRUE(WIFSIGNALED(*child.exit_status()));
  EXPECT_EQ(WTERMSIG(*child.exit_status()), SIGKILL);
}

TEST(SubprocessTest, ExitStatuses) {
  auto ok = SpawnOrDie({"true"});
  ASSERT_TRUE(ok.Wait(10s));
  EXPECT_FALSE(ok.Running());
  ASSERT_TRUE(ok.exit_status().has_value());
  EXPECT_TRUE(WIFEXITED(*ok.exit_status()));
  EXPECT_EQ(WEXITSTATUS(*ok.exit_status()), 0);

  auto fails = SpawnOrDie({"false"});
  ASSERT_TRUE(fails.Wait(10s));
  ASSERT_TRUE(fails.exit_status().has_value());
  EXPECT_TRUE(WIFEXITED(*fails.exit_status()));
  EXPECT_EQ(WEXITSTATUS(*fails.exit_status()), 1);
  EXPECT_EQ(DescribeExitStatus(*fails.exit_status()), "exited with code 1");

  auto code = SpawnOrDie({"sh", "-c", "exit 42"});
  ASSERT_TRUE(code.Wait(10s));
  EXPECT_EQ(WEXITSTATUS(*code.exit_status()), 42);
}

TEST(SubprocessTest, MissingProgramIsNotFound) {
  auto child = Subprocess::Spawn({"no-such-program-flashsale-xyz", "--flag"}, "");
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.error().code, ErrorCode::kNotFound);
  EXPECT_NE(child.error().message.find("no-such-program-flashsale-xyz"), std::string::npos)
      << child.error().message;

  auto empty = Subprocess::Spawn({}, "");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
}

TEST(SubprocessTest, ExecFailureIsReportedFromTheChild) {
  // A path is not looked up in PATH, so exec itself fails (EACCES) and the child reports it.
  TempDir dir;
  const std::string script = dir.File("not-executable");
  std::ofstream(script) << "#!/bin/sh\necho hi\n";
  auto child = Subprocess::Spawn({script}, "");
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.error().code, ErrorCode::kNotFound);
  EXPECT_NE(child.error().message.find(script), std::string::npos) << child.error().message;
  EXPECT_NE(child.error().message.find("Permission denied"), std::string::npos)
      << child.error().message;

  auto missing = Subprocess::Spawn({dir.File("missing")}, "");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find(dir.File("missing")), std::string::npos);
}

TEST(SubprocessTest, OutputIsAppendedToTheLog) {
  TempDir dir;
  const std::string log = dir.File("child.log");
  std::ofstream(log) << "before\n";
  auto child = SpawnOrDie({"sh", "-c", "echo hello; echo oops >&2; exit 3"}, log);
  ASSERT_TRUE(child.Wait(10s));
  EXPECT_EQ(WEXITSTATUS(*child.exit_status()), 3);
  EXPECT_EQ(ReadFile(log), "before\nhello\noops\n");

  auto unwritable = Subprocess::Spawn({"true"}, dir.File("no-such-dir/child.log"));
  ASSERT_FALSE(unwritable.ok());
  EXPECT_EQ(unwritable.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(unwritable.error().message.find("no-such-dir"), std::string::npos);
}

TEST(SubprocessTest, StdinIsDevNull) {
  TempDir dir;
  const std::string log = dir.File("child.log");
  // `cat` ends at once on /dev/null; on an inherited terminal or pipe it could block.
  auto child = SpawnOrDie({"sh", "-c", "cat; echo done"}, log);
  ASSERT_TRUE(child.Wait(10s));
  EXPECT_EQ(ReadFile(log), "done\n");
}

TEST(SubprocessTest, OtherDescriptorsAreNotInherited) {
  if (!std::filesystem::exists("/proc/self/fd")) GTEST_SKIP() << "no /proc/self/fd";
  TempDir dir;
  // Opened without O_CLOEXEC, as careless code elsewhere in the process might.
  const int leaky = ::open(dir.File("leaky").c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GT(leaky, 2);
  const std::string check = "test -e /proc/self/fd/" + std::to_string(leaky);

  auto closed = SpawnOrDie({"sh", "-c", check});
  ASSERT_TRUE(closed.Wait(10s));
  EXPECT_EQ(WEXITSTATUS(*closed.exit_status()), 1) << "descriptor " << leaky << " leaked";

  // Unless it is passed on on purpose.
  auto kept = Subprocess::Spawn({"sh", "-c", check}, "", {leaky});
  ASSERT_TRUE(kept.ok()) << kept.error().ToString();
  ASSERT_TRUE(kept->Wait(10s));
  EXPECT_EQ(WEXITSTATUS(*kept->exit_status()), 0) << "descriptor " << leaky << " was not kept";
  ::close(leaky);

  auto bad = Subprocess::Spawn({"true"}, "", {leaky});  // closed now
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

TEST(SubprocessTest, WaitTimesOutOnARunningChild) {
  auto child = SpawnOrDie({"sleep", "30"});
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(child.Wait(100ms));
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 2s);
  EXPECT_TRUE(child.Running());
  EXPECT_FALSE(child.exit_status().has_value());
  EXPECT_FALSE(child.Wait(0ms));
  child.Terminate(5s);
  EXPECT_TRUE(child.Wait(0ms));
}

TEST(SubprocessTest, DestructorTerminatesAndMoveTransfersOwnership) {
  pid_t pid = -1;
  {
    auto first = SpawnOrDie({"sleep", "30"});
    pid = first.pid();
    Subprocess second = std::move(first);
    EXPECT_EQ(first.pid(), -1);  // NOLINT(bugprone-use-after-move): checking the moved-from state
    EXPECT_FALSE(first.Running());
    EXPECT_EQ(second.pid(), pid);
    EXPECT_TRUE(second.Running());
  }
  EXPECT_FALSE(ProcessExists(pid));

  auto replaced = SpawnOrDie({"sleep", "30"});
  const pid_t old_pid = replaced.pid();
  replaced = SpawnOrDie({"sleep", "30"});  // terminates the child it held
  EXPECT_FALSE(ProcessExists(old_pid));
  EXPECT_TRUE(replaced.Running());
}

TEST(SubprocessTest, ParentDeathSignalReachesTheChildWhenTheSpawningThreadEnds) {
  std::optional<Result<Subprocess>> spawned;
  std::thread parent([&] { spawned = Subprocess::Spawn({"sleep", "30"}, "", {}, SIGTERM); });
  parent.join();
  ASSERT_TRUE(spawned && spawned->ok()) << spawned->error().ToString();
  Subprocess child = std::move(*spawned).value();
  ASSERT_TRUE(child.Wait(10s)) << "the child outlived the thread that spawned it";
  ASSERT_TRUE(child.exit_status().has_value());
  EXPECT_TRUE(WIFSIGNALED(*child.exit_status()));
  EXPECT_EQ(WTERMSIG(*child.exit_status()), SIGTERM);

  // Without it, the child lives on.
  std::optional<Result<Subprocess>> plain;
  std::thread other([&] { plain = Subprocess::Spawn({"sleep", "30"}, ""); });
  other.join();
  ASSERT_TRUE(plain && plain->ok());
  EXPECT_FALSE(plain->value().Wait(300ms));
}

}  // namespace
}  // namespace flashsale::base
