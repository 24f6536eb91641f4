#pragma once
// The mysql:// URL of MySqlStore. User, password, database and socket are percent-decoded, so
// write '@' ':' '/' '?' '%' of a password as %40 %3A %2F %3F %25:
//   mysql://user[:password]@host[:port]/database               TCP; port 3306 by default; an
//                                                              IPv6 host in brackets ([::1])
//   mysql://user[:password]@localhost/database?socket=/path    the server's unix socket (the
//                                                              host may also be left empty)
// No other query parameter is accepted. There is no TLS: use a unix socket or a trusted network.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashsale::store {

// A parsed mysql:// URL.
struct MySqlEndpoint {
  std::string user;
  std::string password;
  std::string host;  // empty with a socket
  uint16_t port = 3306;
  std::string socket;  // a unix socket path, or empty for TCP
  std::string database;

  // "mysql://user@host:port/db" or "mysql://user@localhost/db?socket=/path": no password.
  std::string Describe() const;
};

// kInvalidArgument (naming the problem, never the password) unless `url` has the form above.
base::Result<MySqlEndpoint> ParseMySqlUrl(std::string_view url);

}  // namespace flashsale::store
