#pragma once
// A parsed Redis reply. hiredis's reader builds the tree; Reply owns it, ReplyView reads it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct redisReply;
struct redisReader;

namespace flashsale::redis {

class ReplyView {
 public:
  explicit ReplyView(const redisReply* reply) : reply_(reply) {}

  bool is_string() const;  // a bulk string
  bool is_status() const;  // +OK style
  bool is_integer() const;
  bool is_nil() const;
  bool is_array() const;
  bool is_error() const;

  int64_t integer() const;               // is_integer()
  std::string_view str() const;          // string, status or error text
  size_t size() const;                   // array length
  ReplyView operator[](size_t i) const;  // array element, i < size()

  // A short human description for error messages: `(integer) 5`, `"abc"`, `(array of 3)`.
  std::string Describe() const;

 private:
  const redisReply* reply_;
};

class Reply : public ReplyView {
 public:
  // Takes ownership of a reply from hiredis's reader (either kind: CreatePooledReader's, or one
  // with hiredis's own functions).
  explicit Reply(redisReply* owned);

 private:
  struct Free {
    void operator()(redisReply* reply) const;
  };
  std::unique_ptr<redisReply, Free> owned_;
};

// A hiredis reader (free it with redisReaderFree) whose replies take their memory from this
// thread's pool of reply objects and buffers, and give it back when their Reply is destroyed: a
// connection's replies cost no allocation in steady state. The buffers are plain malloc blocks, so
// a reply of either kind may be released either way.
redisReader* CreatePooledReader();

}  // namespace flashsale::redis
