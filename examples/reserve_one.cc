// The reservation core from C++, end to end: connect, set up an activity, reserve a unit.
//
//   build/dev/examples/reserve_one unix:///path/to/redis.sock    (or redis://127.0.0.1:6379)
//
// Prints the outcome of one purchase by "alice" of the activity "phone". Run it twice: the
// second run is refused with already_purchased (per-user limit 1), and the setup in it does not
// reset the stock.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>

#include "base/clock.h"
#include "base/ids.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/embedded_scripts.h"

namespace asio = boost::asio;
using namespace flashsale;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: reserve_one <redis url>\n";
    return 2;
  }
  auto endpoint = redis::ParseUrl(argv[1]);
  if (!endpoint) {
    std::cerr << endpoint.error().message << "\n";
    return 2;
  }

  asio::io_context io;  // one per I/O thread, with one Connection shared by its requests
  redis::ConnectionOptions options;
  options.endpoint = *endpoint;
  auto connection = redis::Connection::Create(io.get_executor(), options);
  connection->Start();
  redis::ScriptRunner runner(connection, keyspace::Scripts());
  keyspace::ActivityScripts activity_scripts(runner, "example");  // the key namespace

  int exit_code = 1;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const base::Clock& clock = base::SystemClock::Instance();
        core::Activity phone{.id = "phone",
                             .start_ms = clock.NowMs() - 1000,
                             .end_ms = clock.NowMs() + 3'600'000,
                             .per_user_limit = 1,
                             .stock = 100};
        // Loads the stock the first time only; later runs update the window and keep the stock.
        auto setup = co_await activity_scripts.AsyncSetup(phone, asio::use_awaitable);
        if (!setup.ok()) {
          std::cerr << "setup: " << setup.error().ToString() << "\n";
          connection->Stop();
          co_return;
        }
        base::SecureRandom random;
        base::OrderIdGenerator ids(clock, random);
        const std::string order_id = ids.Next();
        auto reservation = co_await activity_scripts.AsyncReserve(
            "phone",
            {.order_id = order_id, .user_id = "alice", .quantity = 1, .now_ms = clock.NowMs()},
            asio::use_awaitable);
        if (!reservation.ok()) {
          // The code says whether a retry is safe: kUnavailable (never ran) yes; kUnknownOutcome
          // only with the same order id, which the script makes idempotent.
          std::cerr << "reserve: " << reservation.error().ToString() << "\n";
        } else {
          std::cout << "code " << static_cast<int>(reservation->outcome) << " "
                    << core::StatusWord(reservation->outcome);
          if (reservation->outcome == core::Outcome::kReserved) {
            std::cout << ", order " << order_id << ", " << reservation->remaining << " left";
          }
          std::cout << "\n";
          exit_code = 0;
        }
        connection->Stop();
      },
      asio::detached);
  io.run();
  return exit_code;
}
