#include "core/cache_key.h"

#include <fmt/format.h>

#include "base/crypto.h"
#include "base/json_writer.h"

namespace flashsale::core {
namespace {

constexpr std::string_view kSensitiveMark = "\x01sensitive:";

}  // namespace

CacheKeys::CacheKeys(std::string key_namespace, std::string secret)
    : namespace_(std::move(key_namespace)), secret_(std::move(secret)) {}

std::string CacheKeys::Sensitive(std::string_view value) {
  return std::string(kSensitiveMark) + std::string(value);
}

std::string CacheKeys::CanonicalJson(const std::map<std::string, std::string>& params) {
  std::string json = "{";
  for (const auto& [key, value] : params) {
    if (json.size() > 1) json.push_back(',');
    base::JsonWriter::AppendEscaped(json, key);
    json.push_back(':');
    base::JsonWriter::AppendEscaped(json, value);
  }
  json.push_back('}');
  return json;
}

std::string CacheKeys::Key(std::string_view domain,
                           const std::map<std::string, std::string>& params,
                           int64_t version) const {
  std::map<std::string, std::string> safe;
  for (const auto& [key, value] : params) {
    if (value.starts_with(kSensitiveMark)) {
      safe[key] = base::HexEncode(
          base::HmacSha256(secret_, std::string_view(value).substr(kSensitiveMark.size())));
    } else {
      safe[key] = value;
    }
  }
  return fmt::format("{}:cache:{}:{}:v{}", namespace_, domain, base::Md5Hex(CanonicalJson(safe)),
                     version);
}

}  // namespace flashsale::core
