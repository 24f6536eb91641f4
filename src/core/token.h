#pragma once
// Bearer tokens for token mode: `<base64url(user id)>.<expiry, unix ms>.<base64url(signature)>`,
// the signature being HMAC-SHA256 of the first two parts under a key derived from the server
// secret for token signing only (base::DeriveKey "token-signing"). A token signed before that
// key existed (under the raw secret) still verifies until it expires. Stateless:
// any instance with the secret verifies any token; they expire and cannot be revoked one by one
// (rotate the secret to revoke all).

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashsale::core {

// One rule for every secret flashsale takes (the token secret, the admin token, the gateway
// secret), wherever it comes from (a flag, a variable, the config file, a file of the data
// directory): at least this many bytes.
inline constexpr size_t kMinSecretBytes = 16;

// What is wrong with `secret` ("" when nothing), phrased to follow its name: "must be at least 16
// bytes, not 5 (make one with: openssl rand -hex 32)".
std::string SecretProblem(std::string_view secret);

class TokenSigner {
 public:
  explicit TokenSigner(std::string secret);

  std::string Issue(std::string_view user_id, int64_t expires_ms) const;
  // The user id, or kInvalidArgument saying why (malformed, bad signature, expired).
  base::Result<std::string> Verify(std::string_view token, int64_t now_ms) const;

 private:
  std::string signing_key_;  // DeriveKey(secret, "token-signing")
  std::string legacy_key_;   // the raw secret: verifies tokens issued before; never signs
};

}  // namespace flashsale::core
