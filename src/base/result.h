#pragma once
// Results as values: every expected failure on the data path (Redis down, a timeout, bad input)
// travels as an Error inside a Result, never as an exception. Exceptions are for startup and
// configuration only.

#include <fmt/format.h>

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace flashsale::base {

enum class ErrorCode {
  kInvalidArgument,     // the caller's input is wrong; the same call fails again
  kNotFound,            // the thing asked for does not exist
  kAlreadyExists,       // the thing to create exists already
  kFailedPrecondition,  // the thing's state forbids the operation (an activity that sold cannot
                        // be deleted); the same call fails again until the state changes
  kUnavailable,         // a dependency could not be reached; the operation did NOT happen
  kUnknownOutcome,      // sent, but no reply came: the operation may or may not have happened
  kRemote,              // the dependency answered with an error (e.g. a Redis error reply)
  kProtocol,            // the dependency answered something we cannot understand
  kResourceExhausted,   // a queue or limit is full; try again later
  kCancelled,           // shut down before it could run
  kInternal,            // a bug: an invariant of our own code did not hold
};

std::string_view ToString(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;

  // "unavailable: connect to 127.0.0.1:6379 failed: Connection refused"
  std::string ToString() const;
};

template <typename... Args>
Error MakeError(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Error{code, fmt::format(format, std::forward<Args>(args)...)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& {
    assert(!ok());
    return std::get<1>(state_);
  }
  Error&& error() && {
    assert(!ok());
    return std::get<1>(std::move(state_));
  }

 private:
  std::variant<T, Error> state_;
};

// A Result without a value: success, or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const& {
    assert(!ok_);
    return error_;
  }
  Error&& error() && {
    assert(!ok_);
    return std::move(error_);
  }

 private:
  Error error_{ErrorCode::kInternal, {}};
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace flashsale::base
