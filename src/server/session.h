#pragma once
// The connections of one I/O thread. A session only moves bytes under deadlines: it reads a
// request within its limits (idle, read, header and body size; a Transfer-Encoding that is not
// chunked is refused; 100-continue answered), hands it to Dispatch (server/dispatch.h), writes
// the reply, counts it and logs it (the access log), and keeps the connection alive or closes it.
// Nothing here knows a route or a use case.
//
// Deadlines without a timer per operation: every 100 ms one sweep (SweepDeadlines) closes the
// sockets whose read or write is overdue, which ends their pending operation. Timeouts are
// therefore accurate to 100 ms, which is plenty for 5 s read and 60 s idle limits, and the
// request path pays no timer scheduling.

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>

#include "server/handlers.h"
#include "server/http_server.h"

namespace flashsale::server {

class Sessions {
 public:
  // `draining` is the server's flag: set, no connection is kept alive past its reply.
  Sessions(boost::asio::io_context& io, const ServerOptions& options, WorkerServices& services,
           const bool& draining);
  Sessions(const Sessions&) = delete;
  Sessions& operator=(const Sessions&) = delete;

  // Serves an accepted connection (non-blocking, TCP_NODELAY) until it closes.
  boost::asio::awaitable<void> Serve(boost::asio::ip::tcp::socket socket);
  // Closes overdue sockets every 100 ms; ends when `stop` is set or the drain has closed every
  // connection.
  boost::asio::awaitable<void> SweepDeadlines(const bool& stop);
  // While draining: the connections waiting for a request end now (busy ones after their reply).
  void CancelIdle();
  // Cuts every connection still open.
  void CloseAll();
  // Connections open now (read from any thread).
  size_t open() const { return count_.load(); }

 private:
  struct Entry {
    boost::asio::ip::tcp::socket* socket;
    bool idle;
    std::chrono::steady_clock::time_point deadline;  // of the read or write in progress
  };

  boost::asio::io_context& io_;
  const ServerOptions& options_;
  WorkerServices& services_;
  const bool& draining_;
  std::list<Entry> entries_;
  std::atomic<size_t> count_{0};
  int64_t requests_seen_ = 0;  // for the access log's sampling (this thread's requests)
};

}  // namespace flashsale::server
