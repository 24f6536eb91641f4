#include "redis/url.h"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <charconv>

#include "base/redact.h"

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

// redis+cluster://[[user]:password@]host:port[,host:port...]: each seed is parsed as the
// redis:// URL with the same credentials.
base::Result<Endpoint> ParseClusterUrl(std::string_view text) {
  const std::string shown = base::RedactUrl(text);  // messages never show the password
  std::string_view rest = text.substr(std::string_view("redis+cluster://").size());
  std::string userinfo;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    userinfo = std::string(rest.substr(0, at + 1));
    rest.remove_prefix(at + 1);
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  Endpoint endpoint;
  endpoint.cluster = true;
  for (bool more = true; more;) {
    const size_t comma = rest.find(',');
    const std::string_view seed = rest.substr(0, comma);
    more = comma != std::string_view::npos;
    if (more) rest.remove_prefix(comma + 1);
    if (seed.empty() || seed.find_first_of("/?") != std::string_view::npos) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "redis url '{}': expected redis+cluster://host:port[,host:port...] (no "
                       "database or parameters: a cluster has database 0 only)",
                       shown);
    }
    auto node = ParseUrl(fmt::format("redis://{}{}", userinfo, seed));
    if (!node) {
      return MakeError(ErrorCode::kInvalidArgument, "redis url '{}': seed '{}': {}", shown, seed,
                       node.error().message);
    }
    if (endpoint.seeds.empty()) {
      endpoint.host = node->host;
      endpoint.port = node->port;
      endpoint.username = node->username;
      endpoint.password = node->password;
    }
    endpoint.seeds.emplace_back(node->host, node->port);
  }
  return endpoint;
}

}  // namespace

std::string Endpoint::Describe() const {
  std::string user = username.empty() ? "" : username + "@";
  if (cluster) {
    std::string out = "redis+cluster://" + user;
    for (size_t i = 0; i < seeds.size(); ++i) {
      out += fmt::format("{}{}:{}", i == 0 ? "" : ",", seeds[i].first, seeds[i].second);
    }
    return out;
  }
  if (kind == Kind::kUnix) return fmt::format("unix://{}{}?db={}", user, path, db);
  return fmt::format("{}://{}{}:{}/{}", tls ? "rediss" : "redis", user, host, port, db);
}

base::Result<Endpoint> ParseUrl(std::string_view text) {
  if (text.starts_with("redis+cluster://")) return ParseClusterUrl(text);
  const std::string shown = base::RedactUrl(text);  // messages never show the password
  auto parsed = boost::urls::parse_uri(text);
  if (!parsed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "redis url '{}' is not a URL ({}); expected redis://host:port/db or "
                     "unix:///path/to.sock",
                     shown, parsed.error().message());
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
      return MakeError(ErrorCode::kInvalidArgument, "redis url '{}' has no host", shown);
    }
    if (url.has_port()) {
      if (url.port_number() == 0) {
        return MakeError(ErrorCode::kInvalidArgument, "redis url '{}': port '{}' is not valid",
                         shown, std::string(url.port()));
      }
      endpoint.port = url.port_number();
    }
    std::string path = url.path();
    if (!path.empty() && path != "/") {
      auto db = ParseDb(std::string_view(path).substr(1), shown);
      if (!db) return std::move(db).error();
      endpoint.db = *db;
    }
  } else if (scheme == "unix") {
    endpoint.kind = Endpoint::Kind::kUnix;
    endpoint.path = url.path();
    if (endpoint.path.empty() || endpoint.path[0] != '/') {
      return MakeError(ErrorCode::kInvalidArgument,
                       "redis url '{}' needs an absolute socket path: unix:///path/to.sock", shown);
    }
  } else {
    return MakeError(ErrorCode::kInvalidArgument,
                     "redis url '{}': scheme '{}' is not supported (use redis://, rediss://, "
                     "unix:// or redis+cluster://)",
                     shown, scheme);
  }
  for (const auto& param : url.params()) {
    if (param.key == "db") {
      auto db = ParseDb(param.value, shown);
      if (!db) return std::move(db).error();
      endpoint.db = *db;
    } else if (param.key == "password") {
      endpoint.password = param.value;
    } else if (param.key == "user") {
      endpoint.username = param.value;
    } else if (param.key == "cacert" && endpoint.tls) {
      endpoint.ca_file = param.value;
    } else {
      return MakeError(ErrorCode::kInvalidArgument, "redis url '{}': unknown parameter '{}'", shown,
                       param.key);
    }
  }
  return endpoint;
}

}  // namespace flashsale::redis
