#include "redis/command.h"

#include <charconv>

#include "base/string_pool.h"

namespace flashsale::redis {

namespace {

void AppendCount(std::string& out, char kind, size_t count) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), count);
  out += kind;
  out.append(digits, end);
  out += "\r\n";
}

}  // namespace

void AppendArrayHeader(std::string& out, size_t count) { AppendCount(out, '*', count); }

void AppendBulk(std::string& out, std::string_view arg) {
  AppendCount(out, '$', arg.size());
  out += arg;
  out += "\r\n";
}

Command::Command(std::span<const std::string_view> args) : wire_(base::TakeString()) {
  AppendArrayHeader(wire_, args.size());
  for (const std::string_view arg : args) AppendBulk(wire_, arg);
}

Command::~Command() { base::GiveString(std::move(wire_)); }

IntArg::IntArg(int64_t value) {
  auto [end, ec] = std::to_chars(buffer_, buffer_ + sizeof(buffer_), value);
  length_ = static_cast<size_t>(end - buffer_);
}

}  // namespace flashsale::redis
