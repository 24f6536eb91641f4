#include "app/report_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <ctime>
#include <vector>

namespace flashsale::app {

namespace {

namespace json = boost::json;

using Rows = std::vector<std::vector<std::string>>;

// The body as a JSON object, or nullptr when it is not one.
const json::object* ObjectOf(const json::value& value) {
  return value.is_object() ? &value.as_object() : nullptr;
}

json::value Parse(std::string_view body) {
  boost::system::error_code error;
  json::value value = json::parse(body, error);
  if (error) return nullptr;
  return value;
}

const json::object* Child(const json::object* object, std::string_view key) {
  if (object == nullptr) return nullptr;
  const json::value* value = object->if_contains(key);
  return value == nullptr ? nullptr : ObjectOf(*value);
}

int64_t Int(const json::object* object, std::string_view key, int64_t fallback = 0) {
  if (object == nullptr) return fallback;
  const json::value* value = object->if_contains(key);
  if (value == nullptr) return fallback;
  if (value->is_int64()) return value->as_int64();
  if (value->is_uint64()) return static_cast<int64_t>(value->as_uint64());
  return fallback;
}

bool Has(const json::object* object, std::string_view key) {
  return object != nullptr && object->contains(key);
}

// A string field as it is, any other value as its JSON text; "" when missing.
std::string Text(const json::object* object, std::string_view key) {
  if (object == nullptr) return "";
  const json::value* value = object->if_contains(key);
  if (value == nullptr || value->is_null()) return "";
  if (value->is_string()) return std::string(value->as_string());
  return json::serialize(*value);
}

bool Bool(const json::object* object, std::string_view key) {
  if (object == nullptr) return false;
  const json::value* value = object->if_contains(key);
  return value != nullptr && value->is_bool() && value->as_bool();
}

std::string Plural(int64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// Rows as columns two spaces apart, the last column unpadded.
std::string Columns(const Rows& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += i + 1 == row.size() ? row[i] : fmt::format("{:<{}}  ", row[i], widths[i]);
    }
    out += line + "\n";
  }
  return out;
}

std::string State(const json::object& activity, int64_t now_ms) {
  std::string state = Bool(&activity, "open") ? "open" : "closed";
  if (now_ms >= Int(&activity, "end_ms")) return "ended";
  if (now_ms < Int(&activity, "start_ms")) state += ", upcoming";
  return state;
}

std::string Rate(const json::object* rate) {
  if (rate == nullptr) return "";
  const json::value* per_second = rate->if_contains("per_second");
  const double r =
      per_second != nullptr && per_second->is_number() ? per_second->to_number<double>() : 0;
  return fmt::format("{:g}/s, burst {}", r, Int(rate, "burst"));
}

std::string DurationText(int64_t ms) {
  if (ms % 3'600'000 == 0) return fmt::format("{} h", ms / 3'600'000);
  if (ms % 60'000 == 0) return fmt::format("{} min", ms / 60'000);
  if (ms % 1000 == 0) return fmt::format("{} s", ms / 1000);
  return fmt::format("{} ms", ms);
}

// A reconciliation report in one line: the invariant's terms, the drift and what was repaired.
std::string ReconcileLine(const json::object& r) {
  std::string line = fmt::format(
      "drift {}: initial {} = remaining {} + not in db {} + live in db {} + cancelled not "
      "returned {}",
      Int(&r, "drift"), Int(&r, "initial"), Int(&r, "remaining"), Int(&r, "not_in_db"),
      Int(&r, "db_live"), Int(&r, "cancelled_not_returned"));
  std::vector<std::string> repaired;
  if (Int(&r, "returned") > 0) repaired.push_back(fmt::format("{} returned", Int(&r, "returned")));
  if (Int(&r, "reappended") > 0) {
    repaired.push_back(fmt::format("{} appended again", Int(&r, "reappended")));
  }
  if (Bool(&r, "rebuilt")) repaired.emplace_back("rebuilt from the record");
  if (Int(&r, "reapplied_orders") > 0) {
    repaired.push_back(
        fmt::format("{} applied again", Plural(Int(&r, "reapplied_orders"), "order", "orders")));
  }
  if (!repaired.empty()) line += fmt::format("; repaired: {}", fmt::join(repaired, ", "));
  if (Int(&r, "oversold_units") > 0) {
    line +=
        fmt::format("; OVERSOLD {} (flagged {})",
                    Plural(Int(&r, "oversold_units"), "unit", "units"), Int(&r, "flagged_orders"));
  }
  if (Int(&r, "acknowledged_lost") > 0) {
    line += fmt::format("; {} acknowledged and lost", Int(&r, "acknowledged_lost"));
  }
  if (!Bool(&r, "loaded")) line += "; not loaded in Redis";
  const json::value* notes = r.if_contains("notes");
  if (notes != nullptr && notes->is_array()) {
    for (const json::value& note : notes->as_array()) {
      if (note.is_string()) line += fmt::format("; {}", std::string(note.as_string()));
    }
  }
  return line;
}

}  // namespace

std::string UtcMinute(int64_t ms) {
  const auto seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  if (ms < 0 || ::gmtime_r(&seconds, &utc) == nullptr) return std::to_string(ms);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M", &utc);
  return text;
}

std::string ActivityTableText(std::string_view body, int64_t now_ms) {
  const json::value list = Parse(body);
  const json::value* entries =
      ObjectOf(list) ? list.as_object().if_contains("activities") : nullptr;
  if (entries == nullptr || !entries->is_array()) return std::string(body) + "\n";
  Rows rows = {{"ID", "KIND", "STATE", "REMAINING", "RESERVED", "TOTAL", "LIMIT", "START (UTC)",
                "END (UTC)", "TITLE"}};
  for (const json::value& entry : entries->as_array()) {
    const json::object* a = Child(ObjectOf(entry), "activity");
    if (a == nullptr) return std::string(body) + "\n";
    const json::object* r = Child(ObjectOf(entry), "redis");
    const bool loaded = Has(r, "remaining");
    // Units reserved now: every reservation minus the units that came back (expired, cancelled).
    rows.push_back({Text(a, "id"), Text(a, "kind"), State(*a, now_ms),
                    loaded ? std::to_string(Int(r, "remaining")) : "-",
                    loaded ? std::to_string(Int(r, "reserved") - Int(r, "released")) : "-",
                    std::to_string(Int(a, "total_units")), std::to_string(Int(a, "per_user_limit")),
                    UtcMinute(Int(a, "start_ms")), UtcMinute(Int(a, "end_ms")), Text(a, "title")});
  }
  return Columns(rows);
}

std::string ActivityText(std::string_view body, int64_t now_ms) {
  const json::value parsed = Parse(body);
  const json::object* status = ObjectOf(parsed);
  const json::object* a = Child(status, "activity");
  if (a == nullptr) return AnswerText(body);
  // "label  value" lines, the values aligned at one column whatever the labels present.
  std::string out;
  auto add = [&out](std::string_view label, std::string_view value) {
    out += fmt::format("{:<14}{}\n", label, value);
  };
  add("activity", fmt::format("{}: {}", Text(a, "id"), Text(a, "title")));
  const std::string kind = Text(a, "kind");
  add("kind", kind);
  add("state", State(*a, now_ms));
  add("window",
      fmt::format("{} to {} UTC", UtcMinute(Int(a, "start_ms")), UtcMinute(Int(a, "end_ms"))));
  add("limit", fmt::format("{} per user",
                           Plural(Int(a, "per_user_limit"), kind == "lottery" ? "draw" : "unit",
                                  kind == "lottery" ? "draws" : "units")));
  if (Int(a, "payment_window_ms") > 0) {
    add("payment",
        fmt::format("within {} of reserving", DurationText(Int(a, "payment_window_ms"))));
  }
  if (const std::string rate = Rate(Child(a, "user_rate")); !rate.empty()) add("user rate", rate);
  if (const std::string rate = Rate(Child(a, "address_rate")); !rate.empty()) {
    add("address rate", rate);
  }
  if (const json::value* prizes = a->if_contains("prizes"); prizes && prizes->is_array()) {
    for (const json::value& prize : prizes->as_array()) {
      const json::object* p = ObjectOf(prize);
      add("prize", fmt::format("{} \"{}\": weight {}, stock {}", Text(p, "id"), Text(p, "name"),
                               Int(p, "weight"), Int(p, "stock")));
    }
    add("no prize", fmt::format("weight {}", Int(a, "no_prize_weight")));
    add("admission",
        Text(a, "admission") == "direct"
            ? std::string("direct")
            : fmt::format("{} (up to {} waiting)", Text(a, "admission"), Int(a, "queue_capacity")));
  }
  const json::object* redis = Child(status, "redis");
  if (Has(redis, "remaining")) {
    add("remaining",
        fmt::format("{} of {} ({} reserved now)", Int(redis, "remaining"), Int(a, "total_units"),
                    Int(redis, "reserved") - Int(redis, "released")));
    add("buyers", fmt::format("{}, {}", Int(redis, "buyers"),
                              Plural(Int(redis, "orders"), "order", "orders")));
  } else {
    const std::string why = Text(status, "redis_error");
    add("remaining", why.empty() ? "- (not loaded in Redis)" : "- (Redis: " + why + ")");
  }
  if (const json::object* persisted = Child(status, "persisted")) {
    add("persisted",
        fmt::format("{}, {} ({} cancelled)", Plural(Int(persisted, "orders"), "order", "orders"),
                    Plural(Int(persisted, "units"), "unit", "units"),
                    Int(persisted, "cancelled_units")));
  }
  if (const json::object* pipeline = Child(status, "pipeline")) {
    add("pipeline", fmt::format("stream {}, lag {}, pending {}, dead letters {}",
                                Int(pipeline, "stream_length"), Int(pipeline, "lag"),
                                Int(pipeline, "pending"), Int(pipeline, "dead_letters")));
  }
  if (const json::object* reconciliation = Child(status, "reconciliation")) {
    add("reconciled", ReconcileLine(*reconciliation));
  }
  if (Bool(status, "frozen")) {
    add("FROZEN", "purchases and draws wait for the repair after a Redis restart or failover");
  }
  if (Int(status, "oversold_units") > 0) {
    add("OVERSOLD", Plural(Int(status, "oversold_units"), "unit", "units"));
  }
  return out;
}

std::string JobReportText(std::string_view body) {
  const json::value parsed = Parse(body);
  const json::object* report = ObjectOf(parsed);
  const json::value* activities = report ? report->if_contains("activities") : nullptr;
  if (!Has(report, "job") || activities == nullptr || !activities->is_array()) {
    return AnswerText(body);
  }
  const std::string job = Text(report, "job");
  std::string out = fmt::format(
      "{} (fence {}): {}\n", job, Int(report, "fence"),
      Plural(static_cast<int64_t>(activities->as_array().size()), "activity", "activities"));
  Rows rows;
  for (const json::value& entry : activities->as_array()) {
    const json::object* e = ObjectOf(entry);
    std::string what;
    if (Has(e, "drift")) {
      what = ReconcileLine(*e);
    } else if (Has(e, "action")) {
      what = Text(e, "action");
      if (Has(e, "units")) what += fmt::format(" {}", Plural(Int(e, "units"), "unit", "units"));
      if (Has(e, "why")) what += ": " + Text(e, "why");
    } else if (Has(e, "cancelled")) {
      what = Int(e, "payment_window_ms") == 0
                 ? std::string("no payment window")
                 : fmt::format("{} cancelled, {} returned, {} not returned yet",
                               Plural(Int(e, "cancelled"), "order", "orders"),
                               Plural(Int(e, "units_returned"), "unit", "units"),
                               Int(e, "not_returned_yet"));
    } else if (Has(e, "error")) {
      what = "failed: " + Text(e, "error");
    } else {
      what = entry.is_object() ? json::serialize(entry) : "";
    }
    rows.push_back({"  " + Text(e, "activity_id"), what});
  }
  return out + Columns(rows);
}

std::string DeadLettersText(std::string_view body) {
  const json::value parsed = Parse(body);
  const json::object* answer = ObjectOf(parsed);
  if (Has(answer, "dead_id") && Has(answer, "stream_id")) {
    return fmt::format("put dead letter {} back on the order stream as {}\n",
                       Text(answer, "dead_id"), Text(answer, "stream_id"));
  }
  const json::value* letters = answer ? answer->if_contains("dead_letters") : nullptr;
  if (letters == nullptr || !letters->is_array()) return AnswerText(body);
  const std::string activity = Text(answer, "activity_id");
  if (letters->as_array().empty()) return fmt::format("{}: no dead letters\n", activity);
  std::string out = fmt::format(
      "{}: {} (flashsale dead-letters {} --retry ID puts one back)\n", activity,
      Plural(static_cast<int64_t>(letters->as_array().size()), "dead letter", "dead letters"),
      activity);
  Rows rows = {{"ID", "ORDER", "USER", "DELIVERIES", "DEAD AT (UTC)", "ERROR"}};
  for (const json::value& letter : letters->as_array()) {
    const json::object* l = ObjectOf(letter);
    std::string order = Text(l, "order_id");
    std::string user = Text(l, "user_id");
    // A packed intent (`o`): "order_id|user_id|...".
    if (const std::string packed = Text(l, "o"); !packed.empty()) {
      const size_t bar = packed.find('|');
      order = packed.substr(0, bar);
      if (bar != std::string::npos) {
        user = packed.substr(bar + 1, packed.find('|', bar + 1) - bar - 1);
      }
    }
    const std::string dead_ms = Text(l, "dead_ms");
    int64_t ms = 0;
    const char* end = dead_ms.data() + dead_ms.size();
    const auto [ptr, ec] = std::from_chars(dead_ms.data(), end, ms);
    const bool numeric = !dead_ms.empty() && ec == std::errc() && ptr == end;
    rows.push_back({Text(l, "id"), order, user, Text(l, "deliveries"),
                    numeric ? UtcMinute(ms) : dead_ms, Text(l, "error")});
  }
  return out + Columns(rows);
}

std::string AnswerText(std::string_view body) {
  const json::value parsed = Parse(body);
  const json::object* answer = ObjectOf(parsed);
  if (answer == nullptr) return std::string(body) + "\n";
  if (Text(answer, "status") == "deleted") return "deleted " + Text(answer, "activity_id") + "\n";
  if (Has(answer, "error")) {
    return fmt::format("{}: {}\n", Text(answer, "status"), Text(answer, "error"));
  }
  return std::string(body) + "\n";
}

}  // namespace flashsale::app
