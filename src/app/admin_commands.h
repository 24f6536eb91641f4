#pragma once
// What the admin subcommands (`flashsale activity`, `job`, `dead-letters`) share: where the
// running serve is (app/server_url.h), its admin token, one call to its admin API and how the
// answer is printed: readable text on a terminal (app/report_text.h), the API's JSON in a pipe
// or with --json, as kubectl and redis-cli do (--text: text in a pipe too).

#include <functional>
#include <string>
#include <string_view>

namespace flashsale::app {

struct AdminTarget {
  std::string url;                            // --url; empty: found as app/server_url.h says
  std::string admin_token;                    // empty: the one in <data_dir>/admin-token
  std::string data_dir = "./flashsale-data";  // where `flashsale serve` keeps both
  bool json = false;                          // --json: the API's JSON, on a terminal too
  bool text = false;                          // --text: text, in a pipe too
};

// The admin token given, or the one the running serve keeps in its data directory; empty when there
// is none, after telling stderr where one comes from.
std::string AdminTokenOf(const AdminTarget& target);

// Text (true) or the API's JSON (false): --json, --text, else whether stdout is a terminal.
bool WantsText(const AdminTarget& target);

// The API's body as text for people (app/report_text.h).
using TextOf = std::function<std::string(std::string_view body)>;

// One admin call (`method` on `path`, with `body`), its answer printed: a 2xx answer as
// `text_of(body)` (null: AnswerText) or as the JSON body; another answer as its error (text: on
// stderr, with the HTTP status; JSON: the body on stdout, as the API gave it); no answer on
// stderr, naming the URL and where it came from. The exit code: 0 on a 2xx answer, 1 on another
// answer or none, 2 when there is no admin token.
int AdminCall(const AdminTarget& target, std::string_view method, const std::string& path,
              const TextOf& text_of = nullptr, std::string_view body = {});

// `flashsale dead-letters ACTIVITY [--retry ENTRY]`: lists the activity's dead letters, or puts
// one back on its order stream.
int RunDeadLetters(const std::string& activity_id, const std::string& retry_id,
                   const AdminTarget& target);

// `flashsale job prewarm|reconcile|expire [ACTIVITY] [--no-repair]`: runs a job now (once across
// all instances) and prints its report.
int RunJobNow(const std::string& job, const std::string& activity_id, bool repair,
              const AdminTarget& target);

// `flashsale webhooks [list|retry] [--receiver URL]`: the webhook deliveries that kept failing
// (parked), or asks for them (of one receiver, or all) to be tried again.
int RunWebhooks(const std::string& action, const std::string& receiver, const AdminTarget& target);

}  // namespace flashsale::app
