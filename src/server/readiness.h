#pragma once
// The readiness probe behind /readyz (HandleReady): Redis answers a PING within 500 ms and the
// database a ping within 1000 ms (on the database executor: the I/O thread never blocks).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "redis/connection.h"
#include "server/handlers.h"
#include "store/store.h"

namespace flashsale::server {

// What failed, per part (empty: ready); the messages name endpoints (for the log and the admin).
boost::asio::awaitable<WorkerServices::Readiness> ProbeReadiness(
    redis::Connection& redis, store::Store& store, boost::asio::any_io_executor db_executor);

}  // namespace flashsale::server
