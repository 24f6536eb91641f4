#include "server/readiness.h"

#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <string>

#include "service/blocking.h"

namespace flashsale::server {

boost::asio::awaitable<WorkerServices::Readiness> ProbeReadiness(
    redis::Connection& redis, store::Store& store, boost::asio::any_io_executor db_executor) {
  WorkerServices::Readiness problems;
  const redis::Command ping{"PING"};
  auto pong = co_await redis.AsyncSend(ping, redis::Clock::now() + std::chrono::milliseconds(500),
                                       boost::asio::use_awaitable);
  if (!pong.ok()) problems.redis = pong.error().message;
  auto db = co_await service::RunBlocking(
      db_executor, [&store] { return store.Ping(); }, std::chrono::milliseconds(1000));
  if (!db || !db->ok()) {
    problems.db = db ? db->error().message : std::string("no answer within 1000 ms");
  }
  co_return problems;
}

}  // namespace flashsale::server
