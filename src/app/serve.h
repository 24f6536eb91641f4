#pragma once
// `flashsale serve` and `flashsale token`: wiring every layer together into the running service.

#include <string>

#include "app/config.h"

namespace flashsale::app {

// Runs the service until SIGINT or SIGTERM, then stops gracefully. The process exit code: 0 after
// a clean stop, 1 when it could not start (the reason is logged).
int RunServe(const ServeConfig& config);

// Runs order consumers only (no HTTP) until SIGINT or SIGTERM: `flashsale worker`. Redis is the
// configured URL, or the embedded one of a `serve` using the same data directory.
int RunWorker(const ServeConfig& config, bool serve_http);

// Prints a bearer token for `user_id` valid for `ttl_s`, signed with the secret given or the one
// serve generated in `data_dir`. The process exit code.
int RunToken(const std::string& user_id, int64_t ttl_s, const std::string& secret,
             const std::string& data_dir);

// Where the admin subcommands send their calls: the admin API of a running serve at `base_url`,
// with the admin token given or the one in <data_dir>/admin-token.
struct AdminTarget {
  std::string base_url = "http://127.0.0.1:8080";
  std::string admin_token;
  std::string data_dir = "./flashsale-data";
};

// `flashsale dead-letters`: lists the activity's dead letters, or retries one.
int RunDeadLetters(const std::string& activity_id, const std::string& retry_id,
                   const AdminTarget& target);

// `flashsale activity list | show ID | create FILE|- | open ID | close ID`: the admin API's
// activities (sales and lotteries; `create` takes the JSON body of POST /api/v1/admin/activities).
int RunActivity(const std::string& action, const std::string& argument, const AdminTarget& target);

// `flashsale job prewarm|reconcile [--activity ID] [--no-repair]`: runs a job now (once across
// all instances) and prints its report.
int RunJobNow(const std::string& job, const std::string& activity_id, bool repair,
              const AdminTarget& target);

// The secret in `path`, generated (32 random bytes, hex, file mode 0600) if the file is missing.
base::Result<std::string> ReadOrCreateSecret(const std::string& path);

}  // namespace flashsale::app
