#include "app/redis_check.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <string>

#include "redis/scripts.h"

namespace flashsale::app {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;

namespace {

// The policy's name; empty with `why` set when Redis answered CONFIG GET with an error.
struct Policy {
  std::string name;
  std::string why;
};

// Redis not reachable, or CONFIG refused: a Policy without a name, saying why.
Policy ReadPolicy(const redis::ConnectionOptions& options) {
  asio::io_context io;
  auto connection = redis::Connection::Create(io.get_executor(), options);
  connection->Start();
  auto future = asio::co_spawn(
      io,
      [&]() -> asio::awaitable<Policy> {
        const redis::Command get{"CONFIG", "GET", "maxmemory-policy"};
        auto reply = co_await redis::Await(*connection, get);
        connection->Stop();
        if (!reply.ok()) co_return Policy{.why = reply.error().message};
        if (!reply->is_array() || reply->size() != 2) {
          co_return Policy{.why = "CONFIG GET maxmemory-policy answered " + reply->Describe()};
        }
        co_return Policy{.name = std::string((*reply)[1].str())};
      },
      asio::use_future);
  io.run();
  return future.get();
}

}  // namespace

base::Status CheckEvictionPolicy(const redis::ConnectionOptions& options, bool allow_evicting) {
  const Policy policy = ReadPolicy(options);
  if (policy.name.empty()) {
    spdlog::warn(
        "redis maxmemory-policy could not be checked ({}); it must be noeviction or volatile-*, "
        "or Redis may evict stock and order intents",
        policy.why);
    return {};
  }
  if (policy.name == "noeviction" || policy.name.starts_with("volatile-")) return {};
  const std::string problem = fmt::format(
      "redis maxmemory-policy is {}: when memory runs out Redis may evict stock, buyers and order "
      "intents (keys without a TTL), and a sale would oversell or lose orders. Set it to "
      "noeviction (CONFIG SET maxmemory-policy noeviction, or in redis.conf)",
      policy.name);
  if (allow_evicting) {
    spdlog::warn("{}; going on as --allow-evicting-redis says", problem);
    return {};
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "{}, or start with --allow-evicting-redis to run anyway", problem);
}

}  // namespace flashsale::app
