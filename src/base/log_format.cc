#include "base/log_format.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <iterator>

namespace flashsale::base {

namespace {

thread_local const LogFields* current_fields = nullptr;

void AppendJsonString(std::string_view text, spdlog::memory_buf_t& out) {
  out.push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"':
        out.append(std::string_view("\\\""));
        break;
      case '\\':
        out.append(std::string_view("\\\\"));
        break;
      case '\n':
        out.append(std::string_view("\\n"));
        break;
      case '\r':
        out.append(std::string_view("\\r"));
        break;
      case '\t':
        out.append(std::string_view("\\t"));
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void AppendField(std::string_view key, std::string_view value, spdlog::memory_buf_t& out) {
  if (value.empty()) return;
  out.push_back(',');
  AppendJsonString(key, out);
  out.push_back(':');
  AppendJsonString(value, out);
}

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
    const std::time_t time = static_cast<std::time_t>(seconds.count());
    fmt::format_to(std::back_inserter(dest), "{{\"time\":\"{:%Y-%m-%dT%H:%M:%S}.{:03d}Z\"",
                   fmt::gmtime(time), millis);
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    AppendField("level", std::string_view(level.data(), level.size()), dest);
    dest.append(std::string_view(",\"message\":"));
    AppendJsonString(std::string_view(msg.payload.data(), msg.payload.size()), dest);
    if (const LogFields* fields = current_fields) {
      AppendField("method", fields->method, dest);
      AppendField("target", fields->target, dest);
      if (fields->status >= 0)
        fmt::format_to(std::back_inserter(dest), ",\"status\":{}", fields->status);
      AppendField("activity", fields->activity, dest);
      AppendField("order_id", fields->order_id, dest);
      AppendField("outcome", fields->outcome, dest);
      if (fields->latency_ms >= 0) {
        fmt::format_to(std::back_inserter(dest), ",\"latency_ms\":{:.3f}", fields->latency_ms);
      }
    }
    dest.append(std::string_view("}\n"));
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>();
  }
};

}  // namespace

ScopedLogFields::ScopedLogFields(const LogFields& fields) : previous_(current_fields) {
  current_fields = &fields;
}

ScopedLogFields::~ScopedLogFields() { current_fields = previous_; }

std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter() {
  return std::make_unique<JsonLogFormatter>();
}

void UseJsonLogs() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  sink->set_formatter(MakeJsonLogFormatter());
  auto logger = std::make_shared<spdlog::logger>("flashsale", std::move(sink));
  logger->set_level(spdlog::get_level());
  logger->flush_on(spdlog::level::trace);  // a line per record, at once: shippers tail the stream
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace flashsale::base
