#include "store/mysql/url.h"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <cctype>
#include <charconv>
#include <optional>

namespace flashsale::store {
namespace {

using base::ErrorCode;
using base::MakeError;
using base::Result;
using base::Status;

constexpr std::string_view kForms =
    "expected mysql://user[:password]@host[:port]/database or "
    "mysql://user[:password]@localhost/database?socket=/path/to.sock";

// Every message names the part at fault, never the URL: it may hold the password.
base::Error Invalid(std::string_view problem) {
  return MakeError(ErrorCode::kInvalidArgument, "mysql url {}; {}", problem, kForms);
}

// A URL of the mysql scheme with an authority and nothing after '#'.
Result<boost::urls::url_view> ParseShape(std::string_view text) {
  auto parsed = boost::urls::parse_uri(text);
  if (!parsed) return Invalid(fmt::format("is not a URL ({})", parsed.error().message()));
  const boost::urls::url_view url = *parsed;
  if (url.scheme() != "mysql" || !url.has_authority()) {
    return Invalid("does not start with mysql://");
  }
  if (url.has_fragment()) return Invalid("has a fragment ('#'), which is not allowed");
  return url;
}

Status ReadUser(const boost::urls::url_view& url, MySqlEndpoint& endpoint) {
  if (!url.has_userinfo() || url.user().empty()) return Invalid("names no user");
  endpoint.user = url.user();
  if (url.has_password()) endpoint.password = url.password();
  return {};
}

// The path is "/database": one segment, not empty, no '/' even percent-encoded.
Status ReadDatabase(const boost::urls::url_view& url, MySqlEndpoint& endpoint) {
  const std::string path = url.path();
  if (path.size() <= 1) return Invalid("names no database");
  std::string database = path.substr(1);
  if (database.find('/') != std::string::npos) {
    return Invalid(fmt::format("database '{}' is not a name", database));
  }
  endpoint.database = std::move(database);
  return {};
}

Result<SslMode> ReadSslMode(std::string_view value) {
  std::string upper(value);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (SslMode mode :
       {SslMode::kDisabled, SslMode::kRequired, SslMode::kVerifyCa, SslMode::kVerifyIdentity}) {
    if (upper == SslModeName(mode)) return mode;
  }
  if (upper == "PREFERRED") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "mysql url: ssl-mode PREFERRED is not supported: it falls back to plaintext "
                     "without a word; use REQUIRED, VERIFY_CA or VERIFY_IDENTITY (or DISABLED)");
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "mysql url: ssl-mode '{}' is not one of DISABLED, REQUIRED, VERIFY_CA, "
                   "VERIFY_IDENTITY",
                   value);
}

// socket=/path, ssl-mode=MODE and ssl-ca=/path, none empty. '+' is a plus (no form encoding).
Status ReadParams(const boost::urls::url_view& url, MySqlEndpoint& endpoint) {
  boost::urls::encoding_opts no_plus_as_space;
  no_plus_as_space.space_as_plus = false;
  std::optional<SslMode> ssl_mode;
  for (const auto& param : url.params(no_plus_as_space)) {
    const bool known = param.key == "socket" || param.key == "ssl-mode" || param.key == "ssl-ca";
    if (known && !param.has_value) {
      return MakeError(ErrorCode::kInvalidArgument, "mysql url: parameter '{}' has no value",
                       param.key);
    }
    if (!known) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "mysql url: unknown parameter '{}' (only socket=/path/to.sock, "
                       "ssl-mode=DISABLED|REQUIRED|VERIFY_CA|VERIFY_IDENTITY, ssl-ca=/path/ca.pem)",
                       param.key);
    }
    if (param.value.empty()) return Invalid(fmt::format("has an empty value for {}", param.key));
    if (param.key == "socket") {
      endpoint.socket = param.value;
    } else if (param.key == "ssl-ca") {
      endpoint.ssl_ca = param.value;
    } else {
      auto mode = ReadSslMode(param.value);
      if (!mode) return std::move(mode).error();
      ssl_mode = *mode;
    }
  }
  // ssl-ca alone asks for TLS verified against it, as with the mysql client.
  if (!ssl_mode && !endpoint.ssl_ca.empty()) ssl_mode = SslMode::kVerifyCa;
  endpoint.ssl_mode = ssl_mode.value_or(SslMode::kDisabled);
  if (!endpoint.ssl_ca.empty() &&
      (endpoint.ssl_mode == SslMode::kDisabled || endpoint.ssl_mode == SslMode::kRequired)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "mysql url: ssl-ca is used only with ssl-mode=VERIFY_CA or VERIFY_IDENTITY, "
                     "not with ssl-mode={}",
                     SslModeName(endpoint.ssl_mode));
  }
  if (endpoint.tls() && !endpoint.socket.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "mysql url: ssl-mode={} is for TCP; a unix socket (?socket=) is local and "
                     "takes no TLS",
                     SslModeName(endpoint.ssl_mode));
  }
  return {};
}

// With a socket: no host but localhost, and no port. Over TCP: a host, and a port of 1 to 65535.
Status ReadHostAndPort(const boost::urls::url_view& url, MySqlEndpoint& endpoint) {
  const std::string host = url.host_address();
  if (url.has_port() && url.port().empty()) return Invalid("has an empty port");
  if (!endpoint.socket.empty()) {
    if (!(host.empty() || host == "localhost") || url.has_port()) {
      return Invalid("with ?socket= must have an empty or localhost host, and no port");
    }
    return {};
  }
  if (host.empty()) return Invalid("names no host");
  endpoint.host = host;
  if (url.has_port()) {
    // port_number() would wrap a number over 65535 silently.
    const std::string_view port = url.port();
    uint32_t number = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
    if (ec != std::errc() || end != port.data() + port.size() || number < 1 || number > 65535) {
      return MakeError(ErrorCode::kInvalidArgument, "mysql url: port '{}' is not 1 to 65535", port);
    }
    endpoint.port = static_cast<uint16_t>(number);
  }
  return {};
}

}  // namespace

std::string_view SslModeName(SslMode mode) {
  switch (mode) {
    case SslMode::kDisabled:
      return "DISABLED";
    case SslMode::kRequired:
      return "REQUIRED";
    case SslMode::kVerifyCa:
      return "VERIFY_CA";
    case SslMode::kVerifyIdentity:
      return "VERIFY_IDENTITY";
  }
  return "DISABLED";
}

std::string MySqlEndpoint::Describe() const {
  if (!socket.empty()) {
    return fmt::format("mysql://{}@localhost/{}?socket={}", user, database, socket);
  }
  const bool ipv6 = host.find(':') != std::string::npos;
  std::string out = fmt::format("mysql://{}@{}{}{}:{}/{}", user, ipv6 ? "[" : "", host,
                                ipv6 ? "]" : "", port, database);
  if (tls()) out += fmt::format("?ssl-mode={}", SslModeName(ssl_mode));
  if (!ssl_ca.empty()) out += fmt::format("&ssl-ca={}", ssl_ca);
  return out;
}

Result<MySqlEndpoint> ParseMySqlUrl(std::string_view text) {
  auto url = ParseShape(text);
  if (!url) return std::move(url).error();
  MySqlEndpoint endpoint;
  for (auto step : {&ReadUser, &ReadDatabase, &ReadParams, &ReadHostAndPort}) {
    if (auto read = step(*url, endpoint); !read) return std::move(read).error();
  }
  return endpoint;
}

}  // namespace flashsale::store
