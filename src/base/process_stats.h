#pragma once
// This process's resource use, read from /proc/self (Linux), for the process_* metrics every
// Prometheus exporter has.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashsale::base {

struct ProcessStats {
  double cpu_seconds = 0;         // user + system time
  int64_t resident_bytes = 0;     // resident set size
  int64_t virtual_bytes = 0;      // virtual memory size
  int64_t open_fds = 0;           // entries of /proc/self/fd
  int64_t max_fds = 0;            // the soft RLIMIT_NOFILE
  double start_time_seconds = 0;  // since the Unix epoch
};

// kUnavailable naming the file when /proc cannot be read or parsed.
Result<ProcessStats> ReadProcessStats();

// The stats as the standard process_* families in Prometheus text.
void AppendProcessMetrics(const ProcessStats& stats, std::string& out);

// Names the calling thread (what `top -H`, `ps -L` and perf show; Linux keeps the first 15
// bytes), so an operator can tell the I/O threads from the order pipeline's and the database's.
void NameThisThread(std::string_view name);

}  // namespace flashsale::base
