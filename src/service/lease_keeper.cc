#include "service/lease_keeper.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace flashsale::service {

namespace asio = boost::asio;

asio::awaitable<void> LeaseKeeper::Run(std::shared_ptr<LeaseKeeper> self,
                                       std::shared_ptr<keyspace::DistributedLock> lock,
                                       keyspace::Lease lease, std::chrono::milliseconds ttl,
                                       std::chrono::milliseconds every) {
  while (!self->done_) {
    self->timer_.expires_after(every);
    co_await self->timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (self->done_) break;
    auto extended = co_await lock->Extend(lease, ttl);
    if (!extended.ok() || !*extended) {
      self->lost_ = true;
      break;
    }
  }
}

std::shared_ptr<LeaseKeeper> LeaseKeeper::Start(asio::any_io_executor executor,
                                                std::shared_ptr<keyspace::DistributedLock> lock,
                                                keyspace::Lease lease,
                                                std::chrono::milliseconds ttl,
                                                std::chrono::milliseconds every) {
  auto keeper = std::make_shared<LeaseKeeper>(executor);
  asio::co_spawn(executor, Run(keeper, std::move(lock), std::move(lease), ttl, every),
                 asio::detached);
  return keeper;
}

void LeaseKeeper::Stop() {
  done_ = true;
  timer_.cancel();
}

}  // namespace flashsale::service
