#include "app/admin_commands.h"

#include <unistd.h>

#include <boost/json.hpp>
#include <fstream>
#include <iostream>

#include "app/admin_client.h"
#include "app/report_text.h"
#include "app/server_url.h"
#include "base/json_writer.h"

namespace flashsale::app {

std::string AdminTokenOf(const AdminTarget& target) {
  std::string token = target.admin_token;
  if (token.empty()) {
    std::ifstream in(target.data_dir + "/admin-token");
    std::getline(in, token);
  }
  if (token.empty()) {
    std::cerr << "no admin token: give --admin-token (or FLASHSALE_ADMIN_TOKEN), or the "
                 "--data-dir of the running serve ("
              << target.data_dir << "/admin-token does not exist)\n";
  }
  return token;
}

bool WantsText(const AdminTarget& target) {
  if (target.json) return false;
  return target.text || ::isatty(STDOUT_FILENO) == 1;
}

int AdminCall(const AdminTarget& target, std::string_view method, const std::string& path,
              const TextOf& text_of, std::string_view body) {
  const std::string token = AdminTokenOf(target);
  if (token.empty()) return 2;
  const ServerUrl url = FindServerUrl(target.url, target.data_dir, EnvFromProcess);
  auto answer = CallAdmin(url.url, method, path, token, body);
  if (!answer.ok()) {
    std::cerr << answer.error().message << " " << WhereTheUrlCameFrom(url, target.data_dir) << "\n";
    return 1;
  }
  const bool ok = answer->status >= 200 && answer->status < 300;
  if (!WantsText(target)) {
    if (!answer->body.empty()) std::cout << answer->body << "\n";
  } else if (ok) {
    std::cout << (text_of ? text_of(answer->body) : AnswerText(answer->body));
  } else {
    std::cerr << "HTTP " << answer->status << ": " << AnswerText(answer->body);
  }
  return ok ? 0 : 1;
}

int RunDeadLetters(const std::string& activity_id, const std::string& retry_id,
                   const AdminTarget& target) {
  const std::string base = "/api/v1/admin/activities/" + activity_id + "/dead-letters";
  return retry_id.empty()
             ? AdminCall(target, "GET", base, DeadLettersText)
             : AdminCall(target, "POST", base + "/" + retry_id + "/retry", DeadLettersText);
}

namespace {

// GET /api/v1/admin/webhooks/parked as a table, or a line saying there are none.
std::string ParkedText(std::string_view body) {
  boost::system::error_code ec;
  const boost::json::value value = boost::json::parse(body, ec);
  const boost::json::object* object = ec ? nullptr : value.if_object();
  const boost::json::value* parked = object ? object->if_contains("parked") : nullptr;
  if (parked == nullptr || !parked->is_array()) return AnswerText(body);
  if (parked->as_array().empty()) return "no parked deliveries (webhooks or the broker)\n";
  std::string text = "receiver\tevent\tattempts\tretry\tlast error\n";
  for (const auto& entry : parked->as_array()) {
    const auto& held = entry.as_object();
    const auto& event = held.at("event").as_object();
    text += fmt::format("{}\t{}\t{}\t{}\t{}\n", std::string_view(held.at("receiver").as_string()),
                        std::string_view(event.at("id").as_string()),
                        held.at("attempts").as_int64(), held.at("retry").as_bool() ? "asked" : "-",
                        std::string_view(held.at("last_error").as_string()));
  }
  return text;
}

}  // namespace

int RunWebhooks(const std::string& action, const std::string& receiver, const AdminTarget& target) {
  if (action == "retry") {
    base::JsonWriter body;
    body.BeginObject();
    if (!receiver.empty()) body.Key("receiver").String(receiver);
    body.EndObject();
    return AdminCall(target, "POST", "/api/v1/admin/webhooks/retry", nullptr,
                     std::move(body).Take());
  }
  return AdminCall(target, "GET", "/api/v1/admin/webhooks/parked", ParkedText);
}

int RunJobNow(const std::string& job, const std::string& activity_id, bool repair,
              const AdminTarget& target) {
  base::JsonWriter body;
  body.BeginObject().Key("repair").Bool(repair);
  if (!activity_id.empty()) body.Key("activity_id").String(activity_id);
  body.EndObject();
  return AdminCall(target, "POST", "/api/v1/admin/jobs/" + job, JobReportText,
                   std::move(body).Take());
}

}  // namespace flashsale::app
