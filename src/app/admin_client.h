#pragma once
// A small blocking HTTP client for the admin subcommands of the CLI (they call the admin API of
// a running `flashsale serve`), with a timeout on every step.

#include <chrono>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashsale::app {

struct HttpAnswer {
  int status = 0;
  std::string body;
  std::string next_cursor;  // the X-Next-Cursor header (a page of an export), when there is one
};

// `base_url` is http://host:port; an empty `admin_token` sends none (public routes). kUnavailable
// when the server cannot be reached.
base::Result<HttpAnswer> CallAdmin(std::string_view base_url, std::string_view method,
                                   std::string_view target, std::string_view admin_token,
                                   std::string_view body = {},
                                   std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace flashsale::app
