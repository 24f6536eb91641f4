#include "server/identity.h"

#include "base/crypto.h"
#include "base/ids.h"

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

}  // namespace

base::Result<std::string> AuthenticateUser(const IdentityConfig& config, const Request& request,
                                           int64_t now_ms) {
  if (config.mode == IdentityMode::kGateway) {
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
