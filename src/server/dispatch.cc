#include "server/dispatch.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <optional>
#include <string>

#include "server/replies.h"
#include "server/router.h"

namespace flashsale::server {

namespace {

// The call of a matched route with its caller authenticated (true); or the reply when there is
// nothing to call (no route, a bad identity header, not authenticated: false).
bool Prepare(const Request& request, std::string_view address, WorkerServices& services,
             RouteMatch& match, std::optional<Call>& call, Reply& reply) {
  match = MatchRoute(services.routes, request.method(), request.target());
  if (match.route == nullptr) {
    if (!match.allow.empty()) {
      reply = ErrorReply(http::status::method_not_allowed, Word::kMethodNotAllowed,
                         "method not allowed; this path takes " + match.allow);
      reply.allow = std::move(match.allow);
      return false;
    }
    reply = ErrorReply(http::status::not_found, Word::kNotFound, "no such route");
    return false;
  }
  call.emplace(Call{request, match.params, match.query, {}, address, services});
  if (match.route->access != Access::kPublic) {
    if (auto headers = CheckIdentityHeaders(request); !headers) {
      reply = ErrorReply(http::status::bad_request, Word::kBadRequest, headers.error().message);
      return false;
    }
  }
  switch (match.route->access) {
    case Access::kPublic:
      break;
    case Access::kUser: {
      auto user = AuthenticateUser(services.identity, request, services.service.clock().NowMs());
      if (!user) {
        reply = ErrorReply(http::status::unauthorized, Word::kUnauthorized, user.error().message);
        return false;
      }
      call->user_id = std::move(*user);
      break;
    }
    case Access::kAdmin:
      if (auto admin = AuthenticateAdmin(services.identity, request); !admin) {
        reply = ErrorReply(http::status::unauthorized, Word::kUnauthorized, admin.error().message);
        return false;
      }
      break;
  }
  return true;
}

// A cross-origin route's answer to a page of an allowed origin carries that origin (CORS); the
// answer depends on the Origin header, which caches are told.
void AllowOrigin(const CorsPolicy& cors, const Request& request, Reply& reply) {
  reply.vary_origin = cors.varies();
  const auto origin = request.find(http::field::origin);
  if (origin == request.end()) return;
  reply.allow_origin =
      cors.AllowOrigin(std::string_view(origin->value().data(), origin->value().size()));
}

// Exceptions never come from bad input (that is a value); one here is our bug: it becomes a 500
// and a log line, never a crash.
void Failed(const Request& request, const std::exception& e, Reply& reply) {
  spdlog::error("handler for {} {} threw: {}", std::string(request.method_string()),
                std::string(request.target()), e.what());
  reply = ErrorReply(http::status::internal_server_error, Word::kError, "internal error");
}

// The admin's detail, the labels of the access log and the metrics, and CORS.
void Label(const Request& request, const RouteMatch& match, const WorkerServices& services,
           Reply& reply) {
  if (match.route == nullptr) return;
  if (match.route->access == Access::kAdmin) reply = AdminDetail(std::move(reply));
  reply.route = match.route->id;
  if (match.route->names == Names::kActivity) reply.activity_id = match.params[0];
  if (services.cors != nullptr && services.cors->enabled() && IsCrossOriginRoute(reply.route)) {
    AllowOrigin(*services.cors, request, reply);
  }
}

}  // namespace

std::string_view ClientAddress(const Request& request, std::string_view peer,
                               bool trust_forwarded) {
  if (!trust_forwarded) return peer;
  const auto forwarded = request.find("X-Forwarded-For");
  if (forwarded == request.end()) return peer;
  std::string_view first(forwarded->value().data(), forwarded->value().size());
  first = first.substr(0, first.find(','));
  while (!first.empty() && first.front() == ' ') first.remove_prefix(1);
  return !first.empty() && first.size() <= 64 ? first : peer;
}

boost::asio::awaitable<void> Dispatch(const Request& request, std::string_view peer,
                                      WorkerServices& services, Reply& reply) {
  // Only what spans the handler's await lives in this frame; the rest is in plain functions.
  RouteMatch match;
  std::optional<Call> call;
  if (Prepare(request, ClientAddress(request, peer, services.trust_forwarded_for), services, match,
              call, reply)) {
    try {
      reply = co_await match.route->handler(*call);
    } catch (const std::exception& e) {
      Failed(request, e, reply);
    }
  }
  Label(request, match, services, reply);
}

}  // namespace flashsale::server
