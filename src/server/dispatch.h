#pragma once
// From a request to its reply, with no socket in sight (as Beast's examples' handle_request): the
// route matched in the table (server/router.h), the caller's identity checked
// (server/identity.h), the handler awaited, a handler's exception turned into a 500, the admin's
// error detail and CORS added, and the reply labelled with its route and activity for the access
// log and the metrics. The session (server/session.h) moves the bytes around it.

#include <boost/asio/awaitable.hpp>
#include <string_view>

#include "server/handlers.h"
#include "server/identity.h"
#include "server/reply.h"

namespace flashsale::server {

// Answers `request` into `reply`. `peer` is the connection's remote address (the client's, unless
// X-Forwarded-For is trusted: WorkerServices::trust_forwarded_for). The reply's views
// (activity_id) point into `request`. The reply is an out-parameter, not the coroutine's value,
// so that the frame (a request's, recycled by Asio only up to about a kilobyte) holds one reply
// fewer: the hot path allocates nothing (tests/server/alloc_integration_test.cc).
boost::asio::awaitable<void> Dispatch(const Request& request, std::string_view peer,
                                      WorkerServices& services, Reply& reply);

// The client's address: the first X-Forwarded-For entry when trusted (and 1-64 characters),
// else `peer`.
std::string_view ClientAddress(const Request& request, std::string_view peer, bool trust_forwarded);

}  // namespace flashsale::server
