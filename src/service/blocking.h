#pragma once
// Runs a blocking call (a database query) on another executor and completes on the caller's:
//   auto record = co_await RunBlocking(db_executor, [&] { return store.GetActivity(id, false); },
//                                      asio::use_awaitable);
// The I/O thread is free while the call runs. The function must not touch state of the I/O
// thread it came from.

#include <boost/asio/append.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <type_traits>
#include <utility>

namespace flashsale::service {

template <typename Executor, typename F, typename Token>
auto RunBlocking(const Executor& executor, F function, Token&& token) {
  using R = std::invoke_result_t<F&>;
  return boost::asio::async_initiate<Token, void(R)>(
      [executor](auto handler, F function) {
        // Keep the caller's executor alive (and its io_context running) while we are away.
        auto work = boost::asio::make_work_guard(boost::asio::get_associated_executor(handler));
        boost::asio::post(executor, [function = std::move(function), handler = std::move(handler),
                                     work = std::move(work)]() mutable {
          R result = function();
          boost::asio::dispatch(boost::asio::append(std::move(handler), std::move(result)));
        });
      },
      token, std::move(function));
}

}  // namespace flashsale::service
