#include "support/flashsale_process.h"

#include <dirent.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/http_client.h"

namespace flashsale::testing {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

TempDir::TempDir(std::string_view prefix) {
  std::string templ = (fs::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("no free port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

std::vector<pid_t> RedisServersFor(const std::string& data_dir) {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  const std::string needle = data_dir + "/redis.sock";
  while (const dirent* entry = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    std::string cmdline = ReadFile(fmt::format("/proc/{}/cmdline", pid));
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find("redis-server") != std::string::npos &&
        cmdline.find(needle) != std::string::npos) {
      pids.push_back(pid);
    }
  }
  ::closedir(proc);
  return pids;
}

FlashsaleProcess::FlashsaleProcess(const std::string& binary, std::vector<std::string> args,
                                   std::string log, std::string data_dir)
    : log_(std::move(log)), data_dir_(std::move(data_dir)) {
  args.insert(args.begin(), binary);
  auto spawned = base::Subprocess::Spawn(args, log_);
  if (!spawned) throw std::runtime_error("spawn flashsale: " + spawned.error().message);
  process_.emplace(std::move(spawned).value());
}

FlashsaleProcess::~FlashsaleProcess() {
  if (process_ && process_->Running()) {
    process_->Signal(SIGKILL);
    process_->Wait(seconds(10));
  }
  if (!data_dir_.empty()) {
    for (const pid_t pid : RedisServersFor(data_dir_)) ::kill(pid, SIGKILL);
  }
}

std::optional<int> FlashsaleProcess::WaitExit(milliseconds timeout) {
  if (!process_->Wait(timeout)) return std::nullopt;
  return process_->exit_status();
}

bool FlashsaleProcess::WaitForLog(std::string_view text, milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (Log().find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

::testing::AssertionResult WaitHealthy(FlashsaleProcess& child, uint16_t port,
                                       milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  HttpClient client("127.0.0.1", port);
  while (std::chrono::steady_clock::now() < until) {
    if (!child.Running()) {
      return ::testing::AssertionFailure() << "flashsale exited during startup:\n" << child.Log();
    }
    if (client.Request("GET", "/healthz", {}, {}, seconds(2)).status == 200) {
      return ::testing::AssertionSuccess();
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  return ::testing::AssertionFailure()
         << "no 200 from /healthz within " << timeout.count() << " ms:\n"
         << child.Log();
}

}  // namespace flashsale::testing
