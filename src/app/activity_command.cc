#include "app/activity_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "app/admin_commands.h"
#include "app/report_text.h"
#include "base/json_writer.h"

namespace flashsale::app {

namespace {

constexpr std::string_view kBase = "/api/v1/admin/activities";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

bool AllDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

int RunActivityCommand(const ActivityCommand& command, const AdminTarget& target) {
  const std::string& action = command.action;
  const std::string base(kBase);
  if (action == "list") {
    return AdminCall(target, "GET", base,
                     [](std::string_view body) { return ActivityTableText(body, NowMs()); });
  }
  if (command.argument.empty()) {
    std::cerr << "flashsale activity " << action << ": needs "
              << (action == "create" ? "a JSON file (or - for stdin)" : "an activity id") << "\n";
    return 2;
  }
  const std::string one = base + "/" + command.argument;
  const TextOf status = [](std::string_view body) { return ActivityText(body, NowMs()); };
  if (action == "show") return AdminCall(target, "GET", one, status);
  if (action == "open" || action == "close")
    return AdminCall(target, "POST", one + "/" + action, status);
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
    return action == "create" ? AdminCall(target, "POST", base, status, *body)
                              : AdminCall(target, "PATCH", one, status, *body);
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
    return AdminCall(target, "POST", one + "/stock", status, std::move(body).Take());
  }
  std::cerr << "flashsale activity: unknown action '" << action
            << "' (list, show, create, update, stock, open, close, delete)\n";
  return 2;
}

}  // namespace flashsale::app
