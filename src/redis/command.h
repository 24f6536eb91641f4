#pragma once
// A Redis command in wire form (RESP), formatted by hiredis from its arguments.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace flashsale::redis {

class Command {
 public:
  explicit Command(std::span<const std::string_view> args);
  Command(std::initializer_list<std::string_view> args)
      : Command(std::span<const std::string_view>(args.begin(), args.size())) {}

  // The RESP bytes to write.
  std::string_view wire() const { return wire_; }

 private:
  std::string wire_;
};

// Decimal text of an integer argument, without allocating.
class IntArg {
 public:
  explicit IntArg(int64_t value);
  std::string_view view() const { return {buffer_, length_}; }
  operator std::string_view() const { return view(); }  // NOLINT: an argument is text

 private:
  char buffer_[24];
  size_t length_;
};

}  // namespace flashsale::redis
