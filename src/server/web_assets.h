#pragma once
// The files of web/ (the buyer page, the dashboard, their CSS and JS), compiled into the binary
// by cmake/embed_files.cmake and served by HandleWebFile. No build step, no framework: the bytes
// in the repository are the bytes served.

#include <span>
#include <string_view>

namespace flashsale::server {

struct EmbeddedWebFile {
  std::string_view name;  // the file's name in web/: "index.html"
  std::string_view body;  // its bytes
  std::string_view md5;   // hex MD5 of the bytes: the ETag
};

std::span<const EmbeddedWebFile> EmbeddedWebFiles();

// The file named `name` (no folders), or null.
const EmbeddedWebFile* FindWebFile(std::string_view name);

// The Content-Type for a file name by its extension; application/octet-stream when unknown.
std::string_view WebContentType(std::string_view name);

}  // namespace flashsale::server
