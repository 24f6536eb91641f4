#include "app/server_url.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace flashsale::app {

namespace {

std::string UrlFile(const std::string& data_dir) { return data_dir + "/url"; }

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

}  // namespace

ServerUrl FindServerUrl(const std::string& flag, const std::string& data_dir,
                        const EnvLookup& getenv) {
  if (!flag.empty()) return {flag, "--url"};
  if (std::optional<std::string> from_env = getenv(std::string(kServerUrlEnv));
      from_env && !from_env->empty()) {
    return {*from_env, std::string(kServerUrlEnv)};
  }
  if (!data_dir.empty()) {
    const std::string path = UrlFile(data_dir);
    if (std::string written = FirstLine(path); !written.empty()) return {written, path};
  }
  return {std::string(kDefaultServerUrl), "the default"};
}

std::string WhereTheUrlCameFrom(const ServerUrl& url, const std::string& data_dir) {
  if (url.source == "the default") {
    return fmt::format(
        "(the default: no --url, no {} and no {}; start `flashsale serve`, or say where it "
        "runs)",
        kServerUrlEnv, data_dir.empty() ? std::string("--data-dir") : UrlFile(data_dir));
  }
  if (url.source == "--url" || url.source == kServerUrlEnv) {
    return fmt::format("(from {})", url.source);
  }
  return fmt::format("(from {}, written by the serve using that directory: is it running?)",
                     url.source);
}

base::Status WriteServerUrl(const std::string& data_dir, const std::string& url) {
  const std::string path = UrlFile(data_dir);
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << url << "\n";
    if (!out.flush()) {
      return base::MakeError(base::ErrorCode::kUnavailable, "write {}: {}", temporary,
                             std::strerror(errno));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return base::MakeError(base::ErrorCode::kUnavailable, "rename {} to {}: {}", temporary, path,
                           std::strerror(errno));
  }
  return {};
}

void RemoveServerUrl(const std::string& data_dir, const std::string& url) {
  const std::string path = UrlFile(data_dir);
  if (FirstLine(path) == url) std::remove(path.c_str());
}

}  // namespace flashsale::app
