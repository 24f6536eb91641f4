#pragma once
// Cross-origin requests (CORS, https://fetch.spec.whatwg.org/#http-cors-protocol) for a shop
// front served from another origin than the API: the origins allowed (`--cors-origin`), the
// routes that answer them (the buyers' routes and the public reads; never the admin or operations
// routes), and the headers of a preflight's answer. Requests carry no cookies (identity is a
// header), so credentials are never allowed.

#include <string>
#include <string_view>
#include <vector>

#include "server/metrics.h"

namespace flashsale::server {

// What is wrong with `origin` as an allowed origin ("" when nothing): "*" (any), or
// scheme://host[:port] with scheme http or https and nothing after the authority, as a browser
// sends it in the Origin header.
std::string CheckOrigin(std::string_view origin);

class CorsPolicy {
 public:
  CorsPolicy() = default;
  // `origins` as CheckOrigin accepts them; empty: no cross-origin access at all.
  explicit CorsPolicy(std::vector<std::string> origins);

  bool enabled() const { return !origins_.empty(); }
  // The Access-Control-Allow-Origin value for a request from `origin` (the Origin header): the
  // allowed origin itself (held by this policy), "*" when any is allowed, "" when not allowed.
  std::string_view AllowOrigin(std::string_view origin) const;
  // "Vary: Origin" is needed: the answer depends on the request's origin (not for "*").
  bool varies() const { return !any_; }

 private:
  std::vector<std::string> origins_;
  bool any_ = false;
};

// The routes a page of another origin may call: purchase, draw, tickets, activities, config,
// orders (and their preflights).
bool IsCrossOriginRoute(RouteId route);

// The header lines (each ending in CRLF) a preflight's 204 carries for an allowed origin, the
// path taking `methods` (e.g. "POST, OPTIONS"). The origin itself is added with every answer.
std::string PreflightHeaders(std::string_view methods);

}  // namespace flashsale::server
