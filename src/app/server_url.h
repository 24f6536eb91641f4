#pragma once
// How the command line finds a running `flashsale serve`: `serve` writes the URL it listens on
// into <data-dir>/url once its listeners are open (next to <data-dir>/admin-token) and removes it
// when it stops cleanly; the client commands (activity, job, dead-letters, load) take, first
// found: --url, FLASHSALE_URL, that file, http://127.0.0.1:8080.

#include <string>

#include "app/config.h"
#include "base/result.h"

namespace flashsale::app {

inline constexpr std::string_view kDefaultServerUrl = "http://127.0.0.1:8080";
inline constexpr std::string_view kServerUrlEnv = "FLASHSALE_URL";

// The URL chosen and where it came from, for messages: "--url", "FLASHSALE_URL",
// "./flashsale-data/url" or "the default".
struct ServerUrl {
  std::string url;
  std::string source;
};

// `flag` (the --url given; empty when none), else the variable, else <data_dir>/url, else the
// default. A comma-separated list (load's several instances) is returned as it is.
ServerUrl FindServerUrl(const std::string& flag, const std::string& data_dir,
                        const EnvLookup& getenv);

// "cannot reach ...": what to add to a message when the chosen URL did not answer.
std::string WhereTheUrlCameFrom(const ServerUrl& url, const std::string& data_dir);

// serve: <data_dir>/url holds `url` (written whole: a temporary file renamed over it).
base::Status WriteServerUrl(const std::string& data_dir, const std::string& url);
// serve, stopping: removes <data_dir>/url if it still names `url` (another serve may have
// written it since).
void RemoveServerUrl(const std::string& data_dir, const std::string& url);

}  // namespace flashsale::app
