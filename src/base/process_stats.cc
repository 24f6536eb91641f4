#include "base/process_stats.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace flashsale::base {

namespace {

// The system's boot time in seconds since the epoch (the "btime" line of /proc/stat).
Result<int64_t> BootTime() {
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("btime ", 0) == 0) return std::stoll(line.substr(6));
  }
  return MakeError(ErrorCode::kUnavailable, "/proc/stat has no btime line");
}

}  // namespace

Result<ProcessStats> ReadProcessStats() {
  std::ifstream in("/proc/self/stat");
  std::string content;
  if (!std::getline(in, content)) {
    return MakeError(ErrorCode::kUnavailable, "cannot read /proc/self/stat");
  }
  // The command name (field 2) is in parentheses and may hold spaces: fields start after ") ".
  const size_t close = content.rfind(')');
  if (close == std::string::npos || close + 2 > content.size()) {
    return MakeError(ErrorCode::kUnavailable, "cannot parse /proc/self/stat");
  }
  std::istringstream fields(content.substr(close + 2));
  std::vector<std::string> after;  // after[0] is field 3 (state)
  for (std::string field; fields >> field;) after.push_back(field);
  if (after.size() < 22) return MakeError(ErrorCode::kUnavailable, "short /proc/self/stat");
  // proc(5): utime 14, stime 15, starttime 22 (clock ticks), vsize 23 (bytes), rss 24 (pages).
  const auto field = [&after](int number) { return std::stoll(after[number - 3]); };
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  auto boot = BootTime();
  if (!boot) return std::move(boot).error();

  ProcessStats stats;
  stats.cpu_seconds = static_cast<double>(field(14) + field(15)) / ticks;
  stats.start_time_seconds = static_cast<double>(*boot) + static_cast<double>(field(22)) / ticks;
  stats.virtual_bytes = field(23);
  stats.resident_bytes = field(24) * page;
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++stats.open_fds;
  }
  if (error) return MakeError(ErrorCode::kUnavailable, "/proc/self/fd: {}", error.message());
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) stats.max_fds = static_cast<int64_t>(limit.rlim_cur);
  return stats;
}

void AppendProcessMetrics(const ProcessStats& stats, std::string& out) {
  out += fmt::format(
      "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
      "# TYPE process_cpu_seconds_total counter\n"
      "process_cpu_seconds_total {}\n"
      "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
      "# TYPE process_resident_memory_bytes gauge\n"
      "process_resident_memory_bytes {}\n"
      "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
      "# TYPE process_virtual_memory_bytes gauge\n"
      "process_virtual_memory_bytes {}\n"
      "# HELP process_open_fds Number of open file descriptors.\n"
      "# TYPE process_open_fds gauge\n"
      "process_open_fds {}\n"
      "# HELP process_max_fds Maximum number of open file descriptors.\n"
      "# TYPE process_max_fds gauge\n"
      "process_max_fds {}\n"
      "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
      "# TYPE process_start_time_seconds gauge\n"
      "process_start_time_seconds {:.2f}\n",
      stats.cpu_seconds, stats.resident_bytes, stats.virtual_bytes, stats.open_fds, stats.max_fds,
      stats.start_time_seconds);
}

void NameThisThread(std::string_view name) {
  char buffer[16] = {};  // the kernel's limit, with the terminating zero
  name.copy(buffer, sizeof(buffer) - 1);
  ::pthread_setname_np(::pthread_self(), buffer);
}

}  // namespace flashsale::base
