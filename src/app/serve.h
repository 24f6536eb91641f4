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

// `flashsale webhooks key`: the key webhook receivers check signatures with (hex), derived from
// --secret or the secret in --data-dir (service/event_relay.h, WebhookKey).
int RunWebhookKey(const std::string& secret, const std::string& data_dir);

// The secret in `path` (its first line): kNotFound when there is no such file, kInvalidArgument
// naming the file when the secret breaks the rule of secrets (core::SecretProblem).
base::Result<std::string> ReadSecretFile(const std::string& path);

// The secret in `path`, generated (32 random bytes, hex, file mode 0600) if the file is missing.
base::Result<std::string> ReadOrCreateSecret(const std::string& path);

}  // namespace flashsale::app
