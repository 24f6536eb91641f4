#pragma once
// A Redis command in wire form (RESP), formatted from its arguments. Its bytes live in a string of
// the thread's pool (base/string_pool.h), given back when the command is destroyed, so building
// one on the request path costs no allocation in steady state.

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

  ~Command();
  Command(Command&&) = default;
  Command& operator=(Command&&) = default;

  // The RESP bytes to write.
  std::string_view wire() const { return wire_; }

 private:
  std::string wire_;
};

// RESP, appended to `out`: an array header of `count` elements, and one bulk-string element.
// A command is the header then its arguments, each as a bulk string.
void AppendArrayHeader(std::string& out, size_t count);
void AppendBulk(std::string& out, std::string_view arg);

// Decimal text of an integer argument, without allocating.
class IntArg {
 public:
  IntArg() = default;  // empty text
  explicit IntArg(int64_t value);
  std::string_view view() const { return {buffer_, length_}; }
  operator std::string_view() const { return view(); }  // NOLINT: an argument is text

 private:
  char buffer_[24];
  size_t length_ = 0;
};

}  // namespace flashsale::redis
