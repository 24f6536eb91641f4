#pragma once
// Small helpers for tests that drive the async client from a test thread.

#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "redis/connection.h"
#include "redis/url.h"
#include "support/io_thread.h"

namespace flashsale::testing {

// A started connection on `io`'s thread.
inline std::shared_ptr<redis::Connection> Connect(IoThread& io, const std::string& url,
                                                  redis::ConnectionOptions options = {}) {
  auto endpoint = redis::ParseUrl(url);
  if (!endpoint) throw std::invalid_argument(endpoint.error().message);
  options.endpoint = *endpoint;
  return io.Call([&] {
    auto connection = redis::Connection::Create(io.executor(), options);
    connection->Start();
    return connection;
  });
}

inline void Stop(IoThread& io, const std::shared_ptr<redis::Connection>& connection) {
  io.Call([&] { connection->Stop(); });
}

// One command, waited for from the test thread.
inline base::Result<redis::Reply> Exec(
    IoThread& io, redis::Connection& connection, std::initializer_list<std::string_view> args,
    std::chrono::milliseconds timeout = std::chrono::seconds(2)) {
  const redis::Command command(args);
  auto run = [&]() -> boost::asio::awaitable<base::Result<redis::Reply>> {
    co_return co_await connection.AsyncSend(command, redis::Clock::now() + timeout,
                                            boost::asio::use_awaitable);
  };
  return io.Run(run());
}

}  // namespace flashsale::testing
