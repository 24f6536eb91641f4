#include "server/router.h"

#include <boost/beast/http/verb.hpp>

namespace flashsale::server {

namespace {

// Matches a path against one pattern, filling up to params.size() parameters.
bool Matches(std::string_view pattern, std::string_view path,
             std::array<std::string_view, 2>& params) {
  size_t count = 0;
  while (!pattern.empty() || !path.empty()) {
    if (pattern.empty() || path.empty() || pattern[0] != '/' || path[0] != '/') return false;
    pattern.remove_prefix(1);
    path.remove_prefix(1);
    const size_t pattern_end = std::min(pattern.find('/'), pattern.size());
    const size_t path_end = std::min(path.find('/'), path.size());
    const std::string_view want = pattern.substr(0, pattern_end);
    const std::string_view got = path.substr(0, path_end);
    if (want.size() >= 2 && want.front() == '{' && want.back() == '}') {
      if (got.empty() || count == params.size()) return false;
      params[count++] = got;
    } else if (want != got) {
      return false;
    }
    pattern.remove_prefix(pattern_end);
    path.remove_prefix(path_end);
  }
  return true;
}

}  // namespace

RouteMatch MatchRoute(std::span<const Route> routes, http::verb method, std::string_view target) {
  RouteMatch match;
  const size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  if (question != std::string_view::npos) match.query = target.substr(question + 1);
  for (const Route& route : routes) {
    std::array<std::string_view, 2> params{};
    if (!Matches(route.pattern, path, params)) continue;
    if (route.method == method) {
      match.route = &route;
      match.params = params;
      match.allow.clear();
      return match;
    }
    if (!match.allow.empty()) match.allow += ", ";
    match.allow += std::string(http::to_string(route.method));
  }
  return match;
}

}  // namespace flashsale::server
