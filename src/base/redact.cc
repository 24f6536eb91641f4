#include "base/redact.h"

#include <algorithm>

namespace flashsale::base {

std::string RedactUrl(std::string_view url) {
  std::string out(url);
  // The userinfo: between "://" and the last '@' before the query (a cluster URL's one userinfo
  // precedes all its seeds; a password may hold a '/' the user did not percent-encode). Its
  // password is what follows the first ':'.
  if (const size_t scheme = out.find("://"); scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t query = out.find_first_of("?#", start);
    const size_t at = out.rfind('@', query);
    if (at != std::string::npos && at > start) {
      const size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) {
        out.replace(colon + 1, at - colon - 1, "***");
      }
    }
  }
  // A password=... query parameter.
  if (const size_t query = out.find('?'); query != std::string::npos) {
    size_t at = query + 1;
    while (at < out.size()) {
      const size_t end = std::min(out.find('&', at), out.size());
      constexpr std::string_view kKey = "password=";
      if (std::string_view(out).substr(at, end - at).starts_with(kKey)) {
        out.replace(at + kKey.size(), end - at - kKey.size(), "***");
        at += kKey.size() + 4;  // past "***&"
      } else {
        at = end + 1;
      }
    }
  }
  return out;
}

}  // namespace flashsale::base
