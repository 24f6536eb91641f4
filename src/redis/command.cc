#include "redis/command.h"

#include <hiredis/hiredis.h>

#include <charconv>
#include <new>
#include <vector>

namespace flashsale::redis {

Command::Command(std::span<const std::string_view> args) {
  // Most commands have few arguments; keep their pointers on the stack.
  constexpr size_t kInline = 32;
  const char* inline_argv[kInline];
  size_t inline_len[kInline];
  std::vector<const char*> heap_argv;
  std::vector<size_t> heap_len;
  const char** argv = inline_argv;
  size_t* argvlen = inline_len;
  if (args.size() > kInline) {
    heap_argv.resize(args.size());
    heap_len.resize(args.size());
    argv = heap_argv.data();
    argvlen = heap_len.data();
  }
  for (size_t i = 0; i < args.size(); ++i) {
    argv[i] = args[i].data();
    argvlen[i] = args[i].size();
  }
  char* formatted = nullptr;
  const int length =
      redisFormatCommandArgv(&formatted, static_cast<int>(args.size()), argv, argvlen);
  if (length < 0 || formatted == nullptr) throw std::bad_alloc();
  wire_.assign(formatted, static_cast<size_t>(length));
  redisFreeCommand(formatted);
}

IntArg::IntArg(int64_t value) {
  auto [end, ec] = std::to_chars(buffer_, buffer_ + sizeof(buffer_), value);
  length_ = static_cast<size_t>(end - buffer_);
}

}  // namespace flashsale::redis
