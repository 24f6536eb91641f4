#include "redis/connection.h"

#include "redis/cluster.h"
#include "redis/node_connection.h"

namespace flashsale::redis {

using base::ErrorCode;

std::shared_ptr<Connection> Connection::Create(boost::asio::any_io_executor executor,
                                               ConnectionOptions options) {
  if (options.endpoint.cluster) {
    return std::make_shared<ClusterRouter>(std::move(executor), std::move(options));
  }
  return NodeConnection::Create(std::move(executor), std::move(options));
}

base::ErrorDetail ErrorDetailOf(std::string_view error_reply) {
  const std::string_view word = error_reply.substr(0, error_reply.find(' '));
  if (word == "NOGROUP") return base::ErrorDetail::kNoGroup;
  if (word == "NOSCRIPT") return base::ErrorDetail::kNoScript;
  if (word == "FENCED") return base::ErrorDetail::kFenced;
  if (error_reply == "ERR no such key") return base::ErrorDetail::kNoSuchKey;
  return base::ErrorDetail::kNone;
}

std::string InfoField(std::string_view info, std::string_view name) {
  size_t at = 0;
  while (at < info.size()) {
    size_t end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(at, end - at);
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.size() > name.size() && line.starts_with(name) && line[name.size()] == ':') {
      return std::string(line.substr(name.size() + 1));
    }
    at = end + 1;
  }
  return {};
}

void ConnectionStats::CountError(ErrorCode code) {
  switch (code) {
    case ErrorCode::kUnavailable:
      unavailable.Add();
      break;
    case ErrorCode::kUnknownOutcome:
      unknown_outcome.Add();
      break;
    case ErrorCode::kRemote:
      remote_errors.Add();
      break;
    default:
      break;
  }
}

}  // namespace flashsale::redis
