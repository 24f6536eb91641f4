#pragma once
// The OpenAPI 3.1 description of every route (api/openapi.json in the repository), compiled into
// the binary by cmake/embed_files.cmake and served at GET /api/v1/openapi.json. The tests lint
// it and validate every reply the HTTP integration tests receive against it (tests/api/).

#include <boost/asio/awaitable.hpp>
#include <span>
#include <string_view>

#include "server/reply.h"

namespace flashsale::server {

struct Call;  // handlers.h

struct EmbeddedApiFile {
  std::string_view name;  // "openapi.json"
  std::string_view body;
  std::string_view md5;  // hex MD5 of the bytes: the ETag
};

std::span<const EmbeddedApiFile> EmbeddedApiFiles();

// GET /api/v1/openapi.json: the document, with an ETag (an unchanged one is a 304).
boost::asio::awaitable<Reply> HandleOpenApi(Call& call);

}  // namespace flashsale::server
