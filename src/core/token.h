#pragma once
// Bearer tokens for token mode: `<base64url(user id)>.<expiry, unix ms>.<base64url(signature)>`,
// the signature being HMAC-SHA256 under the server secret of the first two parts. Stateless:
// any instance with the secret verifies any token; they expire and cannot be revoked one by one
// (rotate the secret to revoke all).

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashsale::core {

class TokenSigner {
 public:
  explicit TokenSigner(std::string secret);

  std::string Issue(std::string_view user_id, int64_t expires_ms) const;
  // The user id, or kInvalidArgument saying why (malformed, bad signature, expired).
  base::Result<std::string> Verify(std::string_view token, int64_t now_ms) const;

 private:
  std::string secret_;
};

}  // namespace flashsale::core
