#pragma once
// Cache keys by the rule of S0-6:
//   <namespace>:cache:<domain>:<md5 of the canonical JSON of the parameters>:v<version>
// The namespace keeps test and production apart in a shared Redis; the md5 of a canonical JSON
// encoding (keys sorted, no spaces) is the same for the same parameters in any language; the
// version suffix switches a whole family of entries at once (bump it instead of deleting).
// Parameters that identify a person are HMAC'd with the server secret before they enter the
// JSON, so a key never carries a user id in clear or as a plain hash someone could probe.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace flashsale::core {

class CacheKeys {
 public:
  CacheKeys(std::string key_namespace, std::string secret);

  // `params` are the parameters the cached value depends on. Values of params marked sensitive
  // (see Sensitive) are HMAC'd first.
  std::string Key(std::string_view domain, const std::map<std::string, std::string>& params,
                  int64_t version) const;

  // Marks a parameter value as sensitive: Key() replaces it with its HMAC.
  static std::string Sensitive(std::string_view value);

  // The canonical JSON of a string map: {"a":"1","b":"x"} with keys in byte order.
  static std::string CanonicalJson(const std::map<std::string, std::string>& params);

 private:
  std::string namespace_;
  std::string secret_;
};

}  // namespace flashsale::core
