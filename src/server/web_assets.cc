#include "server/web_assets.h"

#include <array>
#include <utility>

namespace flashsale::server {

const EmbeddedWebFile* FindWebFile(std::string_view name) {
  for (const EmbeddedWebFile& file : EmbeddedWebFiles()) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

std::string_view WebContentType(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kTypes = {{
      {".html", "text/html; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
  }};
  for (const auto& [extension, type] : kTypes) {
    if (name.ends_with(extension)) return type;
  }
  return "application/octet-stream";
}

}  // namespace flashsale::server
