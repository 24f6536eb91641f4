#include "server/api_spec.h"

#include <fmt/format.h>

#include "server/handlers.h"

namespace flashsale::server {

boost::asio::awaitable<Reply> HandleOpenApi(Call& call) {
  const auto files = EmbeddedApiFiles();
  if (files.empty()) {
    co_return ErrorReply(http::status::not_found, Word::kNotFound, "no API description built in");
  }
  const EmbeddedApiFile& file = files.front();
  Reply reply;
  reply.content_type = "application/json";
  reply.cache_control = "no-cache";
  reply.etag = file.md5;
  auto it = call.request.find(http::field::if_none_match);
  if (it != call.request.end() &&
      std::string_view(it->value().data(), it->value().size())
              .find(fmt::format("\"{}\"", file.md5)) != std::string_view::npos) {
    reply.status = http::status::not_modified;
    co_return reply;
  }
  reply.body = std::string(file.body);
  co_return reply;
}

}  // namespace flashsale::server
