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
  kCancelled,           // shut down before it could run (a stopped connection, a retry loop
                        // whose owner stops)
  kInternal,            // a bug: an invariant of our own code did not hold
};

std::string_view ToString(ErrorCode code);

// Which failure of its code an error is, where a caller acts on the difference: set where the
// error is made, tested where it is handled; a message is for people and is never searched for
// one. One meaning per value; most errors have none (kNone).
enum class ErrorDetail {
  kNone,
  kNoGroup,      // Redis (kRemote, NOGROUP): the stream or its consumer group does not exist,
                 // e.g. deleted with the data Redis lost
  kNoScript,     // Redis (kRemote, NOSCRIPT): the script is not loaded there
  kNoSuchKey,    // Redis (kRemote, "ERR no such key"): the key the command reads does not exist
                 // (XINFO on a missing stream)
  kFenced,       // a fence refused it, nothing written: a newer holder took over since it was read
                 // (a queue lock's newer holder: Redis's FENCED, kRemote; a repair's newer epoch:
                 // the record, kFailedPrecondition)
  kFrozen,       // kUnavailable: the activity is paused until its lost-write repair ran
  kDeadline,     // the command's own deadline passed: before it was sent (kUnavailable) or before
                 // its reply came (kUnknownOutcome)
  kEntriesLost,  // kFailedPrecondition: stream entries held for a retry are no longer this
                 // consumer's (claimed by another, or their stream was lost)
};

std::string_view ToString(ErrorDetail detail);

struct Error {
  ErrorCode code;
  std::string message;
  ErrorDetail detail = ErrorDetail::kNone;

  // "unavailable: connect to 127.0.0.1:6379 failed: Connection refused"
  std::string ToString() const;
};

template <typename... Args>
Error MakeError(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Error{code, fmt::format(format, std::forward<Args>(args)...)};
}

template <typename... Args>
Error MakeError(ErrorCode code, ErrorDetail detail, fmt::format_string<Args...> format,
                Args&&... args) {
  return Error{code, fmt::format(format, std::forward<Args>(args)...), detail};
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
