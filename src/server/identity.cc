#include "server/identity.h"

#include <boost/beast/core/string.hpp>

#include "base/crypto.h"
#include "base/ids.h"
#include "service/jwt.h"

namespace flashsale::server {

using base::ErrorCode;
using base::MakeError;

namespace {

// The token of `Authorization: Bearer <token>`, or empty.
std::string_view BearerToken(const Request& request) {
  auto it = request.find(http::field::authorization);
  if (it == request.end()) return {};
  std::string_view value(it->value().data(), it->value().size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.size() <= kBearer.size() || value.substr(0, kBearer.size()) != kBearer) return {};
  return value.substr(kBearer.size());
}

constexpr std::string_view kGatewaySecretHeader = "X-Gateway-Secret";

}  // namespace

base::Status CheckIdentityHeaders(const Request& request) {
  // One pass over the few fields a request has, rather than a lookup per name.
  int counts[3] = {0, 0, 0};
  const std::string_view names[3] = {"X-User-Id", "Authorization", kGatewaySecretHeader};
  for (const auto& field : request) {
    if (field.name() == http::field::authorization) {
      ++counts[1];
    } else if (field.name() == http::field::unknown) {
      const std::string_view name(field.name_string().data(), field.name_string().size());
      if (boost::beast::iequals(name, names[0])) {
        ++counts[0];
      } else if (boost::beast::iequals(name, names[2])) {
        ++counts[2];
      }
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (counts[i] > 1) {
      return MakeError(ErrorCode::kInvalidArgument, "header {} appears more than once", names[i]);
    }
  }
  return {};
}

base::Result<std::string> AuthenticateUser(const IdentityConfig& config, const Request& request,
                                           int64_t now_ms) {
  if (config.mode == IdentityMode::kGateway) {
    if (!config.gateway_secret.empty()) {
      auto secret = request.find(kGatewaySecretHeader);
      const std::string_view given =
          secret == request.end()
              ? std::string_view()
              : std::string_view(secret->value().data(), secret->value().size());
      if (given.empty() || !base::ConstantTimeEquals(given, config.gateway_secret)) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "missing or wrong X-Gateway-Secret (gateway mode with a gateway secret)");
      }
    }
    auto it = request.find("X-User-Id");
    if (it == request.end()) {
      return MakeError(ErrorCode::kInvalidArgument, "missing X-User-Id header (gateway mode)");
    }
    std::string_view user(it->value().data(), it->value().size());
    if (!base::IsValidId(user)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "X-User-Id must be 1-64 characters of [A-Za-z0-9_.:@-]");
    }
    return std::string(user);
  }
  const std::string_view token = BearerToken(request);
  if (config.mode == IdentityMode::kJwt) {
    if (token.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "missing 'Authorization: Bearer <access token>' (jwt mode: the access token "
                       "of the shop's identity provider)");
    }
    if (config.jwt == nullptr)
      return MakeError(ErrorCode::kInternal, "jwt mode without a verifier");
    auto user = config.jwt->Verify(token);
    if (!user.ok())
      return MakeError(ErrorCode::kInvalidArgument, "bad JWT: {}", user.error().message);
    return user;
  }
  if (token.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "missing 'Authorization: Bearer <token>' (token mode; `flashsale token` or "
                     "POST /api/v1/admin/tokens issues one)");
  }
  auto user = config.signer.Verify(token, now_ms);
  if (!user.ok())
    return MakeError(ErrorCode::kInvalidArgument, "bad token: {}", user.error().message);
  return user;
}

base::Status AuthenticateAdmin(const IdentityConfig& config, const Request& request) {
  const std::string_view token = BearerToken(request);
  if (token.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "admin routes need 'Authorization: Bearer <admin token>'");
  }
  if (config.admin_token.empty() || !base::ConstantTimeEquals(token, config.admin_token)) {
    return MakeError(ErrorCode::kInvalidArgument, "wrong admin token");
  }
  return {};
}

}  // namespace flashsale::server
