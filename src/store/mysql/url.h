#pragma once
// The mysql:// URL of MySqlStore. User, password, database and socket are percent-decoded, so
// write '@' ':' '/' '?' '%' of a password as %40 %3A %2F %3F %25:
//   mysql://user[:password]@host[:port]/database               TCP; port 3306 by default; an
//                                                              IPv6 host in brackets ([::1])
//   mysql://user[:password]@localhost/database?socket=/path    the server's unix socket (the
//                                                              host may also be left empty)
// TLS over TCP, with the names and meaning of the MySQL/MariaDB clients' options:
//   ?ssl-mode=VERIFY_CA&ssl-ca=/path/ca.pem   encrypted; the server's certificate must chain to
//                                             ssl-ca (without it: the system's CAs). ssl-ca alone
//                                             means VERIFY_CA
//   ?ssl-mode=VERIFY_IDENTITY[&ssl-ca=...]    also the host name (or IP) must be in the certificate
//   ?ssl-mode=REQUIRED                        encrypted, the certificate not checked (a trusted
//                                             network only: it does not stop a man in the middle)
//   ?ssl-mode=DISABLED                        plaintext (also the default without ssl-mode/ssl-ca)
// Values are case-insensitive. A server without TLS is refused whenever TLS is asked for: there is
// no silent fallback to plaintext (MySQL's PREFERRED is refused). Not with ?socket= (a unix socket
// is local). No other query parameter is accepted.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashsale::store {

// How a TCP connection uses TLS (?ssl-mode=).
enum class SslMode { kDisabled, kRequired, kVerifyCa, kVerifyIdentity };

// "DISABLED", "REQUIRED", "VERIFY_CA" or "VERIFY_IDENTITY".
std::string_view SslModeName(SslMode mode);

// A parsed mysql:// URL.
struct MySqlEndpoint {
  std::string user;
  std::string password;
  std::string host;  // empty with a socket
  uint16_t port = 3306;
  std::string socket;  // a unix socket path, or empty for TCP
  std::string database;
  SslMode ssl_mode = SslMode::kDisabled;
  std::string ssl_ca;  // a PEM file of CAs, or empty (VERIFY_*: the system's CAs)

  bool tls() const { return ssl_mode != SslMode::kDisabled; }
  // "mysql://user@host:port/db" or "mysql://user@localhost/db?socket=/path", with
  // "?ssl-mode=...[&ssl-ca=...]" over TLS: no password.
  std::string Describe() const;
};

// kInvalidArgument (naming the problem, never the password) unless `url` has the form above.
base::Result<MySqlEndpoint> ParseMySqlUrl(std::string_view url);

}  // namespace flashsale::store
