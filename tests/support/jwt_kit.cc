#include "support/jwt_kit.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/json/parse.hpp>
#include <fstream>

#include "base/subprocess.h"

namespace flashsale::testing {

namespace {
constexpr const char* kPython = "/usr/bin/python3";  // Debian's, with python3-jwt
const std::string kTool = std::string(FLASHSALE_SOURCE_DIR) + "/tests/support/jwt_tool.py";
}  // namespace

JwtKit::JwtKit() = default;

std::optional<std::string> JwtKit::Run(const std::vector<std::string>& argv,
                                       const std::string& what) {
  const std::string log = dir_ / fmt::format("run-{}.out", ++runs_);
  auto child = base::Subprocess::Spawn(argv, log);
  if (!child.ok()) {
    ADD_FAILURE() << what << ": " << child.error().message;
    return std::nullopt;
  }
  if (!child->Wait(std::chrono::seconds(60))) {
    child->Terminate(std::chrono::seconds(1));
    ADD_FAILURE() << what << ": did not finish within 60 s; output:\n" << ReadFile(log);
    return std::nullopt;
  }
  const std::optional<int> status = child->exit_status();
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    ADD_FAILURE() << what << ": " << (status ? base::DescribeExitStatus(*status) : "no status")
                  << "; output:\n"
                  << ReadFile(log);
    return std::nullopt;
  }
  return ReadFile(log);
}

bool JwtKit::RsaKey(const std::string& name) {
  return Run({"openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out",
              PrivatePem(name)},
             "openssl genpkey RSA")
             .has_value() &&
         Run({"openssl", "pkey", "-in", PrivatePem(name), "-pubout", "-out", PublicPem(name)},
             "openssl pkey -pubout")
             .has_value();
}

bool JwtKit::EcKey(const std::string& name) {
  return Run({"openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
              "-out", PrivatePem(name)},
             "openssl genpkey EC")
             .has_value() &&
         Run({"openssl", "pkey", "-in", PrivatePem(name), "-pubout", "-out", PublicPem(name)},
             "openssl pkey -pubout")
             .has_value();
}

bool JwtKit::WriteJwks(const std::string& path,
                       const std::map<std::string, std::string>& kid_to_key) {
  // Written next to `path` and renamed over it: a reader never sees half a file.
  const std::string partial = path + ".partial";
  std::vector<std::string> argv = {kPython, kTool, "jwks", partial};
  for (const auto& [kid, key] : kid_to_key) argv.push_back(kid + "=" + PublicPem(key));
  if (!Run(argv, "jwt_tool.py jwks").has_value()) return false;
  return std::rename(partial.c_str(), path.c_str()) == 0;
}

std::map<std::string, std::string> JwtKit::Mint(const std::string& spec_json) {
  const std::string spec = dir_ / fmt::format("spec-{}.json", runs_ + 1);
  std::ofstream(spec) << spec_json;
  auto out = Run({kPython, kTool, "mint", spec}, "jwt_tool.py mint");
  if (!out.has_value()) return {};
  boost::system::error_code ec;
  const boost::json::value tokens = boost::json::parse(*out, ec);
  if (ec || !tokens.is_object()) {
    ADD_FAILURE() << "jwt_tool.py mint printed no JSON object: " << *out;
    return {};
  }
  std::map<std::string, std::string> result;
  for (const auto& [name, token] : tokens.get_object()) {
    result[std::string(name)] = std::string(token.as_string());
  }
  return result;
}

}  // namespace flashsale::testing
