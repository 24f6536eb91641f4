#include "server/cors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace flashsale::server {

std::string CheckOrigin(std::string_view origin) {
  if (origin == "*") return "";
  const auto bad = [origin](std::string_view why) {
    return fmt::format(
        "\"{}\" is not an origin ({}): scheme://host[:port], e.g. "
        "https://shop.example or http://127.0.0.1:3000, or * for any",
        origin, why);
  };
  const size_t scheme_end = origin.find("://");
  if (scheme_end == std::string_view::npos) return bad("no scheme");
  const std::string_view scheme = origin.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return bad("the scheme must be http or https");
  const std::string_view authority = origin.substr(scheme_end + 3);
  if (authority.empty()) return bad("no host");
  if (authority.find_first_of("/?#") != std::string_view::npos) {
    return bad("nothing may follow the host and port, not even '/'");
  }
  const bool allowed = std::all_of(authority.begin(), authority.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == ':' ||
           c == '[' || c == ']';
  });
  if (!allowed || authority.front() == ':') return bad("not a host[:port]");
  return "";
}

CorsPolicy::CorsPolicy(std::vector<std::string> origins) : origins_(std::move(origins)) {
  // Browsers send the serialized origin, scheme and host in lower case, and compare the answer's
  // Access-Control-Allow-Origin with it exactly.
  for (std::string& origin : origins_) {
    std::transform(origin.begin(), origin.end(), origin.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  any_ = std::find(origins_.begin(), origins_.end(), "*") != origins_.end();
}

std::string_view CorsPolicy::AllowOrigin(std::string_view origin) const {
  if (origin.empty() || origins_.empty()) return {};
  if (any_) return "*";
  for (const std::string& allowed : origins_) {
    if (allowed.size() == origin.size() &&
        std::equal(allowed.begin(), allowed.end(), origin.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return allowed;
    }
  }
  return {};
}

bool IsCrossOriginRoute(RouteId route) {
  switch (route) {
    case RouteId::kPurchase:
    case RouteId::kDraw:
    case RouteId::kTicket:
    case RouteId::kActivity:
    case RouteId::kOrders:
    case RouteId::kPreflight:
      return true;
    default:
      return false;
  }
}

std::string PreflightHeaders(std::string_view methods) {
  // The request headers a buyer's page sends: its identity (a token, or a gateway's user header
  // in gateway mode), a JSON body, an idempotency key. Cached by the browser for ten minutes.
  return fmt::format(
      "Access-Control-Allow-Methods: {}\r\n"
      "Access-Control-Allow-Headers: Authorization, Content-Type, Idempotency-Key, X-User-Id, "
      "X-Waiting-Room-Pass\r\n"
      "Access-Control-Max-Age: 600\r\n",
      methods);
}

}  // namespace flashsale::server
