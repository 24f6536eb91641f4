#pragma once
// The few cryptographic primitives flashsale needs, over OpenSSL: HMAC-SHA256 (tokens, user ids
// inside keys), MD5 (cache-key signatures, S0-6: a signature, not a secret), constant-time
// comparison, hex and base64url.

#include <string>
#include <string_view>

namespace flashsale::base {

// Raw 32-byte HMAC-SHA256 of `data` under `key`.
std::string HmacSha256(std::string_view key, std::string_view data);
// A key for one purpose derived from `secret` (a labelled HMAC: HMAC-SHA256(secret,
// "flashsale key v1: " + purpose)), so that one secret never keys two uses: what one use
// reveals or accepts is no help against another. Purposes in use: "token-signing", "key-ids",
// "cache-keys".
std::string DeriveKey(std::string_view secret, std::string_view purpose);
// Lower-case hex of the MD5 of `data` (32 characters).
std::string Md5Hex(std::string_view data);

std::string HexEncode(std::string_view bytes);
// Base64url without padding (RFC 4648 section 5).
std::string Base64UrlEncode(std::string_view bytes);
// False if `text` is not unpadded base64url.
bool Base64UrlDecode(std::string_view text, std::string& out);

// Equality in time independent of where the inputs differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// `bytes` random bytes from the CSPRNG, hex-encoded: for generated secrets and admin tokens.
std::string RandomHex(size_t bytes);

}  // namespace flashsale::base
