#pragma once
// What the admin subcommands (`flashsale activity`, `job`, `dead-letters`) share: where the
// running serve is (app/server_url.h), its admin token, and one call to its admin API.

#include <functional>
#include <string>
#include <string_view>

namespace flashsale::app {

struct AdminTarget {
  std::string url;                            // --url; empty: found as app/server_url.h says
  std::string admin_token;                    // empty: the one in <data_dir>/admin-token
  std::string data_dir = "./flashsale-data";  // where `flashsale serve` keeps both
};

// How a 2xx answer's body is printed; null: as it is.
using TextOf = std::function<std::string(std::string_view body)>;

// One admin call (`method` on `path`, with `body`); prints the answer (a 2xx answer through
// `text_of` when given), or, with no answer, the URL and where it came from. The exit code: 0 on
// a 2xx answer, 1 on another answer or none, 2 when there is no admin token.
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

}  // namespace flashsale::app
