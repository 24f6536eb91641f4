#pragma once
// Logs for shippers: `--log-format json` writes every log record to stderr as one JSON object per
// line, {"time": "2026-01-02T03:04:05.678Z", "level": "info", "message": "...", ...}, with the
// fields of the request it is about when the code that logs names them (ScopedLogFields): the
// access log names method, target, status, activity, order id, outcome and latency.

#include <spdlog/formatter.h>

#include <cstdint>
#include <memory>
#include <string_view>

namespace flashsale::base {

// What a log record is about; empty views and negative numbers are left out.
struct LogFields {
  std::string_view method;
  std::string_view target;
  int status = -1;
  std::string_view activity;
  std::string_view order_id;
  std::string_view outcome;
  double latency_ms = -1;
};

// While alive, records logged on this thread carry `fields` (the views must outlive it).
class ScopedLogFields {
 public:
  explicit ScopedLogFields(const LogFields& fields);
  ~ScopedLogFields();
  ScopedLogFields(const ScopedLogFields&) = delete;
  ScopedLogFields& operator=(const ScopedLogFields&) = delete;

 private:
  const LogFields* previous_;
};

// The JSON-lines formatter (one object and a newline per record).
std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter();

// Replaces the default logger by one writing JSON lines to stderr (keeps the level).
void UseJsonLogs();

}  // namespace flashsale::base
