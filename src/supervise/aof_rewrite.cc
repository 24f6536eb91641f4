#include "supervise/aof_rewrite.h"

#include <algorithm>
#include <charconv>

namespace flashsale::supervise {

namespace {

// The value of `name:` on its own line of an INFO reply.
std::optional<uint64_t> Field(std::string_view info, std::string_view name) {
  size_t at = 0;
  while (at < info.size()) {
    size_t end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > name.size() && line.starts_with(name) && line[name.size()] == ':') {
      const std::string_view value = line.substr(name.size() + 1);
      uint64_t out = 0;
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
      if (ec != std::errc() || ptr != value.data() + value.size()) return std::nullopt;
      return out;
    }
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::optional<AofState> ParseAofState(std::string_view info) {
  const auto enabled = Field(info, "aof_enabled");
  if (!enabled) return std::nullopt;
  AofState state;
  state.enabled = *enabled == 1;
  if (!state.enabled) return state;  // the size fields are there only with an AOF
  const auto in_progress = Field(info, "aof_rewrite_in_progress");
  const auto scheduled = Field(info, "aof_rewrite_scheduled");
  const auto current = Field(info, "aof_current_size");
  const auto base = Field(info, "aof_base_size");
  if (!in_progress || !scheduled || !current || !base) return std::nullopt;
  state.rewriting = *in_progress == 1 || *scheduled == 1;
  state.current_size = *current;
  state.base_size = *base;
  return state;
}

AofRewrite DecideAofRewrite(const AofRewritePolicy& policy, const AofState& state, uint64_t grown,
                            double seconds) {
  if (!state.enabled || state.rewriting || state.current_size <= policy.min_size) {
    return AofRewrite::kNotDue;
  }
  // Redis's growth: the current size against the size after the last rewrite, in percent.
  const uint64_t base = state.base_size > 0 ? state.base_size : 1;
  const double growth = (static_cast<double>(state.current_size) * 100.0 / base) - 100.0;
  if (growth < static_cast<double>(policy.growth_percent)) return AofRewrite::kNotDue;
  const double floor = static_cast<double>(std::max(state.base_size, policy.min_size));
  if (static_cast<double>(state.current_size) >=
      floor * (100.0 + static_cast<double>(policy.overdue_percent)) / 100.0) {
    return AofRewrite::kOverdue;
  }
  const double rate = seconds > 0 ? static_cast<double>(grown) / seconds : 0.0;
  return rate < static_cast<double>(policy.quiet_bytes_per_second) ? AofRewrite::kQuiet
                                                                   : AofRewrite::kWaiting;
}

std::string_view ToString(AofRewrite decision) {
  switch (decision) {
    case AofRewrite::kNotDue:
      return "not due";
    case AofRewrite::kWaiting:
      return "due, waiting for a quiet moment";
    case AofRewrite::kQuiet:
      return "due, quiet";
    case AofRewrite::kOverdue:
      return "overdue";
  }
  return "?";
}

}  // namespace flashsale::supervise
