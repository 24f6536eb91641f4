#include "redis/url.h"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <charconv>

namespace flashsale::redis {
namespace {

using base::ErrorCode;
using base::MakeError;

base::Result<int> ParseDb(std::string_view text, std::string_view url) {
  int db = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, db);
  if (text.empty() || ec != std::errc() || ptr != end || db < 0 || db > 65535) {
    return MakeError(ErrorCode::kInvalidArgument, "redis url '{}': database '{}' is not a number",
                     url, text);
  }
  return db;
}

}  // namespace

std::string Endpoint::Describe() const {
  std::string user = username.empty() ? "" : username + "@";
  if (kind == Kind::kUnix) return fmt::format("unix://{}{}?db={}", user, path, db);
  return fmt::format("{}://{}{}:{}/{}", tls ? "rediss" : "redis", user, host, port, db);
}

base::Result<Endpoint> ParseUrl(std::string_view text) {
  auto parsed = boost::urls::parse_uri(text);
  if (!parsed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "redis url '{}' is not a URL ({}); expected redis://host:port/db or "
                     "unix:///path/to.sock",
                     text, parsed.error().message());
  }
  const boost::urls::url_view& url = *parsed;
  Endpoint endpoint;
  if (url.has_userinfo()) {
    endpoint.username = url.user();
    endpoint.password = url.password();
  }
  const std::string scheme = url.scheme();
  if (scheme == "redis" || scheme == "rediss") {
    endpoint.kind = Endpoint::Kind::kTcp;
    endpoint.tls = scheme == "rediss";
    endpoint.host = url.host_address();
    if (endpoint.host.empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "redis url '{}' has no host", text);
    }
    if (url.has_port()) {
      if (url.port_number() == 0) {
        return MakeError(ErrorCode::kInvalidArgument, "redis url '{}': port '{}' is not valid",
                         text, std::string(url.port()));
      }
      endpoint.port = url.port_number();
    }
    std::string path = url.path();
    if (!path.empty() && path != "/") {
      auto db = ParseDb(std::string_view(path).substr(1), text);
      if (!db) return std::move(db).error();
      endpoint.db = *db;
    }
  } else if (scheme == "unix") {
    endpoint.kind = Endpoint::Kind::kUnix;
    endpoint.path = url.path();
    if (endpoint.path.empty() || endpoint.path[0] != '/') {
      return MakeError(ErrorCode::kInvalidArgument,
                       "redis url '{}' needs an absolute socket path: unix:///path/to.sock", text);
    }
  } else {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "redis url '{}': scheme '{}' is not supported (use redis://, rediss:// or unix://)", text,
        scheme);
  }
  for (const auto& param : url.params()) {
    if (param.key == "db") {
      auto db = ParseDb(param.value, text);
      if (!db) return std::move(db).error();
      endpoint.db = *db;
    } else if (param.key == "password") {
      endpoint.password = param.value;
    } else if (param.key == "user") {
      endpoint.username = param.value;
    } else if (param.key == "cacert" && endpoint.tls) {
      endpoint.ca_file = param.value;
    } else {
      return MakeError(ErrorCode::kInvalidArgument, "redis url '{}': unknown parameter '{}'", text,
                       param.key);
    }
  }
  return endpoint;
}

}  // namespace flashsale::redis
