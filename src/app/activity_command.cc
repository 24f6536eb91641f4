#include "app/activity_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "app/admin_commands.h"
#include "base/json_writer.h"

namespace flashsale::app {

namespace {

namespace json = boost::json;

constexpr std::string_view kBase = "/api/v1/admin/activities";

// The JSON body in `file` (- for stdin); nullopt after saying why not.
std::optional<std::string> ReadBody(const std::string& file, std::string_view action) {
  std::stringstream body;
  if (file == "-") {
    body << std::cin.rdbuf();
  } else {
    std::ifstream in(file);
    if (!in) {
      std::cerr << "flashsale activity " << action << ": cannot read " << file << "\n";
      return std::nullopt;
    }
    body << in.rdbuf();
  }
  return body.str();
}

int64_t IntOr(const json::value* value, int64_t fallback) {
  return value != nullptr && value->is_int64() ? value->as_int64() : fallback;
}

std::string TimeText(int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  if (::gmtime_r(&seconds, &utc) == nullptr) return std::to_string(ms);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M", &utc);
  return text;
}

// The admin list as a table: one line per activity.
std::string TableText(std::string_view body) {
  boost::system::error_code error;
  const json::value list = json::parse(body, error);
  if (error || !list.is_object() || !list.as_object().contains("activities")) {
    return std::string(body) + "\n";
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::vector<std::vector<std::string>> rows = {{"ID", "KIND", "STATE", "REMAINING", "RESERVED",
                                                 "TOTAL", "LIMIT", "START (UTC)", "END (UTC)",
                                                 "TITLE"}};
  for (const json::value& entry : list.at("activities").as_array()) {
    const json::object& a = entry.at("activity").as_object();
    const json::value& redis = entry.at("redis");
    const json::object* r = redis.is_object() ? &redis.as_object() : nullptr;
    const int64_t start = IntOr(a.if_contains("start_ms"), 0);
    const int64_t end = IntOr(a.if_contains("end_ms"), 0);
    std::string state = a.at("open").as_bool() ? "open" : "closed";
    if (now >= end) {
      state = "ended";
    } else if (now < start) {
      state += ", upcoming";
    }
    const bool loaded = r != nullptr && r->contains("remaining");
    // Units reserved now: every reservation minus the units that came back (expired, cancelled).
    const std::string remaining =
        loaded ? std::to_string(IntOr(r->if_contains("remaining"), 0)) : "-";
    const std::string reserved = loaded ? std::to_string(IntOr(r->if_contains("reserved"), 0) -
                                                         IntOr(r->if_contains("released"), 0))
                                        : "-";
    rows.push_back({std::string(a.at("id").as_string()), std::string(a.at("kind").as_string()),
                    state, remaining, reserved,
                    std::to_string(IntOr(a.if_contains("total_units"), 0)),
                    std::to_string(IntOr(a.if_contains("per_user_limit"), 0)), TimeText(start),
                    TimeText(end), std::string(a.at("title").as_string())});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
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

bool AllDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

int RunActivityCommand(const ActivityCommand& command, const AdminTarget& target) {
  const std::string& action = command.action;
  const std::string base(kBase);
  if (action == "list") return AdminCall(target, "GET", base, command.json ? nullptr : TableText);
  if (command.argument.empty()) {
    std::cerr << "flashsale activity " << action << ": needs "
              << (action == "create" ? "a JSON file (or - for stdin)" : "an activity id") << "\n";
    return 2;
  }
  const std::string one = base + "/" + command.argument;
  if (action == "show") return AdminCall(target, "GET", one);
  if (action == "open" || action == "close") return AdminCall(target, "POST", one + "/" + action);
  if (action == "delete") return AdminCall(target, "DELETE", one);
  if (action == "create" || action == "update") {
    const std::string& file = action == "create"     ? command.argument
                              : command.rest.empty() ? std::string()
                                                     : command.rest[0];
    if (file.empty()) {
      std::cerr << "flashsale activity update: needs ID and a JSON file (or - for stdin) of the "
                   "fields to change\n";
      return 2;
    }
    auto body = ReadBody(file, action);
    if (!body) return 2;
    return action == "create" ? AdminCall(target, "POST", base, nullptr, *body)
                              : AdminCall(target, "PATCH", one, nullptr, *body);
  }
  if (action == "stock") {
    base::JsonWriter body;
    body.BeginObject();
    if (!command.items.empty() && command.rest.empty()) {
      body.Key("items").Strings(command.items);
    } else if (command.items.empty() && command.rest.size() == 1 && AllDigits(command.rest[0])) {
      int64_t units = 0;
      std::from_chars(command.rest[0].data(), command.rest[0].data() + command.rest[0].size(),
                      units);
      body.Key("units").Int(units);
    } else {
      std::cerr << "flashsale activity stock: needs ID and a number of units (counted stock), or "
                   "ID --items A,B,... (itemised stock)\n";
      return 2;
    }
    body.EndObject();
    return AdminCall(target, "POST", one + "/stock", nullptr, std::move(body).Take());
  }
  std::cerr << "flashsale activity: unknown action '" << action
            << "' (list, show, create, update, stock, open, close, delete)\n";
  return 2;
}

}  // namespace flashsale::app
