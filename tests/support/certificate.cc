#include "support/certificate.h"

#include <chrono>

#include "base/subprocess.h"

namespace flashsale::testing {

bool SelfSignedCertificate(const std::string& dir, const std::string& name,
                           const std::string& host) {
  const std::string base = dir + "/" + name;
  auto openssl =
      base::Subprocess::Spawn({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                               "1", "-subj", "/CN=" + host, "-addext", "subjectAltName=DNS:" + host,
                               "-keyout", base + ".key", "-out", base + ".crt"},
                              base + "-req.log");
  if (!openssl.ok() || !openssl->Wait(std::chrono::seconds(60))) return false;
  return openssl->exit_status() == 0;
}

}  // namespace flashsale::testing
