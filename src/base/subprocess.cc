#include "base/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

namespace flashsale::base {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(5);
constexpr auto kKillWait = std::chrono::seconds(5);
constexpr auto kDestructorGrace = std::chrono::seconds(5);

std::string ErrnoText(int error) { return std::strerror(error); }

// Closes a descriptor at the end of a scope.
class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ~ScopedFd() { Reset(); }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

  int get() const { return fd_; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Moves `fd` above stderr (keeping O_CLOEXEC), so the child's dup2 onto 0, 1 and 2 can never
// overwrite it or be a no-op that leaves it close-on-exec (a parent with stdin closed gets fd 0
// from open()).
int AboveStdio(int fd) {
  if (fd < 0 || fd > STDERR_FILENO) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  const int error = errno;
  ::close(fd);
  errno = error;
  return moved;
}

bool IsExecutableFile(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

// The file execvp() would run for `name`, looked up in the parent because the child may only
// make async-signal-safe calls (execvp is not one). A name with a '/' is used as it is.
Result<std::string> FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* env_path = std::getenv("PATH");
  const std::string path = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  for (;;) {
    const size_t end = std::min(path.find(':', begin), path.size());
    const std::string_view dir = std::string_view(path).substr(begin, end - begin);
    const std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + name;
    if (IsExecutableFile(candidate)) return candidate;
    if (end == path.size()) break;
    begin = end + 1;
  }
  return MakeError(ErrorCode::kNotFound, "program '{}' not found in PATH ({})", name, path);
}

// Runs in the child between fork and exec: async-signal-safe calls only (no allocation, no
// locks). On failure it reports errno through `error_fd` and exits; the parent reads it.
[[noreturn]] void ExecChild(const char* file, char* const* argv, int null_fd, int log_fd,
                            int error_fd, const std::vector<int>& keep_fds, int death_signal,
                            pid_t parent) {
  // Signal dispositions set to SIG_IGN and the signal mask survive exec; undo both, so the
  // program reacts to SIGTERM and SIGPIPE the normal way whatever the parent does with them.
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &default_action, nullptr);
  }

  // Its own process group: a Ctrl-C in the terminal reaches the parent only, which then stops
  // its children in order (e.g. the embedded redis-server after the HTTP server has drained).
  ::setpgid(0, 0);

  // Told to stop when the parent dies. If it died before this line, the signal will never come
  // (the child has been re-parented): leave instead of running on unnoticed.
  if (death_signal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, death_signal) != 0 || ::getppid() != parent) ::_exit(1);
  }

  if (::dup2(null_fd, STDIN_FILENO) < 0 || ::dup2(log_fd, STDOUT_FILENO) < 0 ||
      ::dup2(log_fd, STDERR_FILENO) < 0) {
    const int error = errno;
    [[maybe_unused]] auto ignored = ::write(error_fd, &error, sizeof(error));
    ::_exit(127);
  }
  // Close every other descriptor the parent had open, including ones opened without O_CLOEXEC
  // by other code (a listening socket kept open by a long-lived child is a classic leak). The
  // error pipe closes itself on exec; `keep_fds` (sorted) stay open across it.
  unsigned int next = STDERR_FILENO + 1;
  for (const int fd : keep_fds) {
    const auto keep = static_cast<unsigned int>(fd);
    if (keep < next) continue;
    if (keep > next) ::close_range(next, keep - 1, 0);
    next = keep + 1;
  }
  ::close_range(next, ~0U, 0);
  for (const int fd : keep_fds) {
    if (fd != error_fd) ::fcntl(fd, F_SETFD, 0);  // clear FD_CLOEXEC
  }
  ::execve(file, argv, environ);
  const int error = errno;
  [[maybe_unused]] auto ignored = ::write(error_fd, &error, sizeof(error));
  ::_exit(127);
}

}  // namespace

Result<Subprocess> Subprocess::Spawn(const std::vector<std::string>& argv,
                                     const std::string& log_path,
                                     const std::vector<int>& inherit_fds, int parent_death_signal) {
  if (argv.empty() || argv[0].empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "spawn: no program given");
  }
  for (const int fd : inherit_fds) {
    if (fd <= STDERR_FILENO || ::fcntl(fd, F_GETFD) < 0) {
      return MakeError(ErrorCode::kInvalidArgument, "spawn {}: cannot pass descriptor {} on",
                       argv[0], fd);
    }
  }
  auto file = FindProgram(argv[0]);
  if (!file) return std::move(file).error();

  // Everything the child needs is prepared here: after fork it may not allocate.
  std::vector<char*> child_argv;
  child_argv.reserve(argv.size() + 1);
  for (const auto& arg : argv) child_argv.push_back(const_cast<char*>(arg.c_str()));
  child_argv.push_back(nullptr);

  ScopedFd null_fd(AboveStdio(::open("/dev/null", O_RDWR | O_CLOEXEC)));
  if (null_fd.get() < 0) {
    return MakeError(ErrorCode::kUnavailable, "spawn {}: open /dev/null: {}", argv[0],
                     ErrnoText(errno));
  }
  ScopedFd log_fd;
  if (log_path.empty()) {
    log_fd.Reset(AboveStdio(::fcntl(null_fd.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1)));
  } else {
    log_fd.Reset(
        AboveStdio(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)));
  }
  if (log_fd.get() < 0) {
    return MakeError(ErrorCode::kUnavailable, "spawn {}: open log file '{}': {}", argv[0], log_path,
                     ErrnoText(errno));
  }
  // The exec-failure pipe: close-on-exec, so a successful exec closes the child's end and the
  // parent reads end-of-file; a failed exec writes its errno first.
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return MakeError(ErrorCode::kUnavailable, "spawn {}: pipe: {}", argv[0], ErrnoText(errno));
  }
  ScopedFd read_end(pipe_fds[0]);
  ScopedFd write_end(AboveStdio(pipe_fds[1]));
  if (write_end.get() < 0) {
    return MakeError(ErrorCode::kUnavailable, "spawn {}: pipe: {}", argv[0], ErrnoText(errno));
  }
  std::vector<int> keep_fds = inherit_fds;
  keep_fds.push_back(write_end.get());
  std::sort(keep_fds.begin(), keep_fds.end());

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return MakeError(ErrorCode::kUnavailable, "spawn {}: fork: {}", argv[0], ErrnoText(errno));
  }
  if (pid == 0) {
    ExecChild(file->c_str(), child_argv.data(), null_fd.get(), log_fd.get(), write_end.get(),
              keep_fds, parent_death_signal, parent);
  }
  Subprocess child(pid);
  write_end.Reset();  // or the read below would never see end-of-file

  int exec_error = 0;
  ssize_t got = 0;
  do {
    got = ::read(read_end.get(), &exec_error, sizeof(exec_error));
  } while (got < 0 && errno == EINTR);
  if (got == 0) return child;  // exec succeeded
  const int read_error = errno;

  // The child exits right after reporting; reap it (the destructor kills it if it lingers).
  child.Wait(kKillWait);
  if (got != static_cast<ssize_t>(sizeof(exec_error))) {
    return MakeError(ErrorCode::kUnavailable, "spawn {}: reading the exec status failed: {}",
                     argv[0], got < 0 ? ErrnoText(read_error) : std::string("short read"));
  }
  const std::string where = *file == argv[0] ? "" : fmt::format(" ({})", *file);
  switch (exec_error) {
    case ENOENT:
    case EACCES:
    case EPERM:
    case ENOEXEC:
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case ENAMETOOLONG:
      return MakeError(ErrorCode::kNotFound, "cannot execute '{}'{}: {}", argv[0], where,
                       ErrnoText(exec_error));
    default:
      return MakeError(ErrorCode::kUnavailable, "spawn {}{}: {}", argv[0], where,
                       ErrnoText(exec_error));
  }
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      reaped_(std::exchange(other.reaped_, false)),
      exit_status_(std::exchange(other.exit_status_, std::nullopt)) {}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    Terminate(kDestructorGrace);
    pid_ = std::exchange(other.pid_, -1);
    reaped_ = std::exchange(other.reaped_, false);
    exit_status_ = std::exchange(other.exit_status_, std::nullopt);
  }
  return *this;
}

Subprocess::~Subprocess() { Terminate(kDestructorGrace); }

bool Subprocess::Poll() {
  if (pid_ <= 0 || reaped_) return true;
  int status = 0;
  pid_t done;
  do {
    done = ::waitpid(pid_, &status, WNOHANG);
  } while (done < 0 && errno == EINTR);
  if (done == 0) return false;
  reaped_ = true;
  // done < 0 (ECHILD): reaped by someone else, e.g. with SIGCHLD ignored; the status is lost.
  if (done == pid_) exit_status_ = status;
  return true;
}

bool Subprocess::Running() { return !Poll(); }

void Subprocess::Signal(int signal) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, signal);
}

bool Subprocess::Wait(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (Poll()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return false;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(kPollInterval, until - now));
  }
}

void Subprocess::Terminate(std::chrono::milliseconds grace) {
  if (Poll()) return;
  Signal(SIGTERM);
  Signal(SIGCONT);  // a stopped child only acts on the pending SIGTERM once continued
  if (Wait(grace)) return;
  Signal(SIGKILL);
  Wait(kKillWait);  // only a child stuck in the kernel (state D) outlives this
}

std::string DescribeExitStatus(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    std::string_view name;
    switch (sig) {
      case SIGTERM:
        name = " (SIGTERM)";
        break;
      case SIGKILL:
        name = " (SIGKILL)";
        break;
      case SIGINT:
        name = " (SIGINT)";
        break;
      case SIGABRT:
        name = " (SIGABRT)";
        break;
      case SIGSEGV:
        name = " (SIGSEGV)";
        break;
      case SIGBUS:
        name = " (SIGBUS)";
        break;
      case SIGPIPE:
        name = " (SIGPIPE)";
        break;
      default:
        break;
    }
    return fmt::format("killed by signal {}{}", sig, name);
  }
  return fmt::format("wait status {:#x}", status);
}

}  // namespace flashsale::base
