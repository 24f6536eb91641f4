#pragma once
// A self-signed certificate made by the openssl command, for the TLS servers tests start (an
// HTTPS JWKS, an HTTPS webhook receiver); the code under test trusts it through SSL_CERT_FILE, as
// an operator with a private CA would.

#include <string>

namespace flashsale::testing {

// openssl req -x509: a certificate for `host` (CN and subjectAltName DNS) in <dir>/<name>.crt, its
// RSA key in <dir>/<name>.key, valid for a day. False (the log in <dir>/<name>-req.log) when
// openssl fails or takes over a minute.
bool SelfSignedCertificate(const std::string& dir, const std::string& name,
                           const std::string& host = "localhost");

}  // namespace flashsale::testing
