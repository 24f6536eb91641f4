#include "base/result.h"

namespace flashsale::base {

std::string_view ToString(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kAlreadyExists:
      return "already exists";
    case ErrorCode::kFailedPrecondition:
      return "failed precondition";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kUnknownOutcome:
      return "unknown outcome";
    case ErrorCode::kRemote:
      return "remote error";
    case ErrorCode::kProtocol:
      return "protocol error";
    case ErrorCode::kResourceExhausted:
      return "resource exhausted";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "unknown error code";
}

std::string_view ToString(ErrorDetail detail) {
  switch (detail) {
    case ErrorDetail::kNone:
      return "none";
    case ErrorDetail::kNoGroup:
      return "no group";
    case ErrorDetail::kNoScript:
      return "no script";
    case ErrorDetail::kNoSuchKey:
      return "no such key";
    case ErrorDetail::kFenced:
      return "fenced";
    case ErrorDetail::kFrozen:
      return "frozen";
    case ErrorDetail::kDeadline:
      return "deadline";
    case ErrorDetail::kEntriesLost:
      return "entries lost";
  }
  return "unknown error detail";
}

std::string Error::ToString() const { return fmt::format("{}: {}", base::ToString(code), message); }

}  // namespace flashsale::base
