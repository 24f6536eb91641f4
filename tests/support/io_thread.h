#pragma once
// An io_context running on its own thread, and a way to run a coroutine on it from a test and
// wait for its result with a timeout (a test never hangs on a lost completion).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

namespace flashsale::testing {

class IoThread {
 public:
  IoThread() : work_(context_.get_executor()), thread_([this] { context_.run(); }) {}
  ~IoThread() {
    work_.reset();
    context_.stop();
    thread_.join();
  }
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  boost::asio::io_context& context() { return context_; }
  boost::asio::any_io_executor executor() { return context_.get_executor(); }

  // Runs `coroutine` on this thread and returns its result; throws if it takes longer than
  // `timeout`.
  template <typename T>
  T Run(boost::asio::awaitable<T> coroutine,
        std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    // co_spawn wants a default-constructible result; Result<T> is not, std::optional is.
    auto wrapped = [](boost::asio::awaitable<T> inner) -> boost::asio::awaitable<std::optional<T>> {
      co_return co_await std::move(inner);
    };
    auto future =
        boost::asio::co_spawn(context_, wrapped(std::move(coroutine)), boost::asio::use_future);
    if (future.wait_for(timeout) != std::future_status::ready) {
      throw std::runtime_error("coroutine did not finish within the test timeout");
    }
    return std::move(*future.get());
  }

  // Runs a plain function on this thread and waits for it.
  template <typename F>
  auto Call(F function) {
    auto task = std::make_shared<std::packaged_task<decltype(function())()>>(std::move(function));
    auto future = task->get_future();
    boost::asio::post(context_, [task] { (*task)(); });
    if (future.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      throw std::runtime_error("call did not finish within the test timeout");
    }
    return future.get();
  }

 private:
  boost::asio::io_context context_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace flashsale::testing
