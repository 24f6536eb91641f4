#pragma once
// The route table (routes.cc) and matching. A pattern is a path with `{name}` segments; a
// request's target matches when every literal segment is equal and every parameter segment is
// non-empty. A path that matches with another method gets 405 and an Allow header.

#include <array>
#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <span>
#include <string>
#include <string_view>

#include "server/reply.h"

namespace flashsale::server {

struct Call;  // handlers.h
using Handler = boost::asio::awaitable<Reply> (*)(Call&);

enum class Access {
  kPublic,  // anyone
  kUser,    // an authenticated user (token or gateway header)
  kAdmin,   // the admin token
};

// Whether a route's first `{..}` segment is an activity id (the access log's activity).
enum class Names : bool { kNothing, kActivity };

struct Route {
  http::verb method;
  std::string_view pattern;
  RouteId id;  // the metrics label
  Access access;
  Handler handler;
  Names names = Names::kNothing;
};

// Every route the service answers, in one table.
std::span<const Route> Routes();
// The operations routes only (/healthz, /readyz, /metrics): what `flashsale worker` serves.
std::span<const Route> OpsRoutes();

struct RouteMatch {
  const Route* route = nullptr;  // null: no route (404), or wrong method (405, see allow)
  std::array<std::string_view, 2> params{};
  std::string allow;       // wrong method: the methods this path takes, e.g. "GET, POST"
  std::string_view query;  // the part of the target after '?'
};

// Matches `target` (path and query) against `routes`.
RouteMatch MatchRoute(std::span<const Route> routes, http::verb method, std::string_view target);

}  // namespace flashsale::server
