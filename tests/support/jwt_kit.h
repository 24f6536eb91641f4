#pragma once
// Keys, key sets and tokens for the JWT identity tests, made by tools nobody here wrote: the keys
// by the openssl command, the JWKS and the tokens by Debian's python3-jwt (support/jwt_tool.py,
// run by /usr/bin/python3, whose packages python3-jwt and python3-cryptography are). Everything
// lands in a temporary directory removed at the end of the scope. A tool that fails or hangs
// (bounded: 60 s) fails the test with its output.

#include <map>
#include <string>
#include <vector>

#include "support/flashsale_process.h"

namespace flashsale::testing {

class JwtKit {
 public:
  JwtKit();

  const TempDir& dir() const { return dir_; }

  // openssl genpkey: an RSA 2048 key (or an EC P-256 key) in <dir>/<name>.pem and its public key
  // in <dir>/<name>.pub.pem. Returns false (with a gtest failure) when openssl fails.
  bool RsaKey(const std::string& name);
  bool EcKey(const std::string& name);
  std::string PrivatePem(const std::string& name) const { return dir_ / (name + ".pem"); }
  std::string PublicPem(const std::string& name) const { return dir_ / (name + ".pub.pem"); }

  // Writes the JWKS of the public keys (kid -> key name) to `path` (jwt_tool.py jwks).
  bool WriteJwks(const std::string& path, const std::map<std::string, std::string>& kid_to_key);

  // Mints every token of `spec` (jwt_tool.py's SPEC, as JSON text): name -> token. Empty (with a
  // gtest failure) when the tool fails.
  std::map<std::string, std::string> Mint(const std::string& spec_json);

 private:
  // Runs argv to its end (60 s at most); its output, or nullopt with a gtest failure.
  std::optional<std::string> Run(const std::vector<std::string>& argv, const std::string& what);

  TempDir dir_{"fs-jwt"};
  int runs_ = 0;
};

}  // namespace flashsale::testing
