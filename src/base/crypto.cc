#include "base/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <stdexcept>

namespace flashsale::base {

std::string HmacSha256(std::string_view key, std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest.data(), &length);
  return std::string(reinterpret_cast<const char*>(digest.data()), length);
}

std::string DeriveKey(std::string_view secret, std::string_view purpose) {
  return HmacSha256(secret, std::string("flashsale key v1: ").append(purpose));
}

std::string Md5Hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_md5(), nullptr);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(digest.data()), length));
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto byte = static_cast<unsigned char>(bytes[i]);
    hex[2 * i] = kHex[byte >> 4];
    hex[2 * i + 1] = kHex[byte & 15];
  }
  return hex;
}

namespace {
constexpr std::string_view kBase64Url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
}

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : bytes) {
    buffer = (buffer << 8) | static_cast<unsigned char>(c);
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kBase64Url[(buffer >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kBase64Url[(buffer << (6 - bits)) & 63]);
  return out;
}

bool Base64UrlDecode(std::string_view text, std::string& out) {
  out.clear();
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    const size_t value = kBase64Url.find(c);
    if (value == std::string_view::npos) return false;
    buffer = (buffer << 6) | static_cast<uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  // Leftover bits must be zero padding of the last character, and never a whole character.
  return bits < 6 && (buffer & ((1u << bits) - 1)) == 0;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    throw std::runtime_error("OpenSSL RAND_bytes failed: no secure randomness available");
  }
  return HexEncode(raw);
}

}  // namespace flashsale::base
