#pragma once
// Runs a blocking call (a database query) on another executor while the calling coroutine waits
// on its own I/O thread, which stays free for other work meanwhile:
//   auto record = co_await RunBlocking(db_executor, [&] { return store.GetActivity(id, false); },
//                                      std::chrono::seconds(10));
// Every wait has a timeout: nothing (std::nullopt) means the call did not finish in time. It then
// finishes in the background and its result is dropped, so the function must own (capture by
// value) what it uses, or use objects that outlive the executor's threads (the store does).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace flashsale::service {

// (`function` is taken by reference and copied inside: GCC 12 double-destroys lambdas with
// captures that are passed by value within a co_await expression.)
template <typename F>
boost::asio::awaitable<std::optional<std::invoke_result_t<const F&>>> RunBlocking(
    boost::asio::any_io_executor db_executor, const F& function,
    std::chrono::milliseconds timeout) {
  namespace asio = boost::asio;
  using R = std::invoke_result_t<const F&>;
  struct State {
    std::optional<R> result;
    asio::steady_timer timer;
  };
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  auto state = std::make_shared<State>(State{std::nullopt, asio::steady_timer(executor, timeout)});
  asio::post(db_executor, [state, executor, function]() {
    R result = function();
    asio::post(executor, [state, result = std::move(result)]() mutable {
      state->result.emplace(std::move(result));
      state->timer.cancel();
    });
  });
  co_await state->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return std::move(state->result);
}

}  // namespace flashsale::service
