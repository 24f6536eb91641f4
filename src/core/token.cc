#include "core/token.h"

#include <fmt/format.h>

#include <charconv>

#include "base/crypto.h"
#include "base/ids.h"

namespace flashsale::core {

std::string SecretProblem(std::string_view secret) {
  if (secret.size() >= kMinSecretBytes) return "";
  return fmt::format("must be at least {} bytes, not {} (make one with: openssl rand -hex 32)",
                     kMinSecretBytes, secret.size());
}

using base::ErrorCode;
using base::MakeError;

TokenSigner::TokenSigner(std::string secret)
    : signing_key_(base::DeriveKey(secret, "token-signing")), legacy_key_(std::move(secret)) {}

std::string TokenSigner::Issue(std::string_view user_id, int64_t expires_ms) const {
  std::string body = base::Base64UrlEncode(user_id) + "." + std::to_string(expires_ms);
  return body + "." + base::Base64UrlEncode(base::HmacSha256(signing_key_, body));
}

base::Result<std::string> TokenSigner::Verify(std::string_view token, int64_t now_ms) const {
  const size_t last_dot = token.rfind('.');
  if (token.size() > 512 || last_dot == std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "malformed token");
  }
  const std::string_view body = token.substr(0, last_dot);
  std::string signature;
  if (!base::Base64UrlDecode(token.substr(last_dot + 1), signature) ||
      (!base::ConstantTimeEquals(signature, base::HmacSha256(signing_key_, body)) &&
       !base::ConstantTimeEquals(signature, base::HmacSha256(legacy_key_, body)))) {
    return MakeError(ErrorCode::kInvalidArgument, "token signature does not verify");
  }
  const size_t dot = body.find('.');
  if (dot == std::string_view::npos)
    return MakeError(ErrorCode::kInvalidArgument, "malformed token");
  const std::string_view expiry_text = body.substr(dot + 1);
  int64_t expires_ms = 0;
  auto [end, ec] =
      std::from_chars(expiry_text.data(), expiry_text.data() + expiry_text.size(), expires_ms);
  if (ec != std::errc() || end != expiry_text.data() + expiry_text.size()) {
    return MakeError(ErrorCode::kInvalidArgument, "malformed token expiry");
  }
  if (now_ms >= expires_ms) return MakeError(ErrorCode::kInvalidArgument, "token expired");
  std::string user;
  if (!base::Base64UrlDecode(body.substr(0, dot), user) || !base::IsValidId(user)) {
    return MakeError(ErrorCode::kInvalidArgument, "token names no valid user id");
  }
  return user;
}

}  // namespace flashsale::core
