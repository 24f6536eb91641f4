#include "redis/reply.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <cassert>

namespace flashsale::redis {

bool ReplyView::is_string() const { return reply_->type == REDIS_REPLY_STRING; }
bool ReplyView::is_status() const { return reply_->type == REDIS_REPLY_STATUS; }
bool ReplyView::is_integer() const { return reply_->type == REDIS_REPLY_INTEGER; }
bool ReplyView::is_nil() const { return reply_->type == REDIS_REPLY_NIL; }
bool ReplyView::is_array() const { return reply_->type == REDIS_REPLY_ARRAY; }
bool ReplyView::is_error() const { return reply_->type == REDIS_REPLY_ERROR; }

int64_t ReplyView::integer() const {
  assert(is_integer());
  return reply_->integer;
}

std::string_view ReplyView::str() const {
  if (reply_->str == nullptr) return {};
  return {reply_->str, reply_->len};
}

size_t ReplyView::size() const { return is_array() ? reply_->elements : 0; }

ReplyView ReplyView::operator[](size_t i) const {
  assert(i < size());
  return ReplyView(reply_->element[i]);
}

std::string ReplyView::Describe() const {
  constexpr size_t kMax = 80;
  auto clip = [](std::string_view s) {
    return s.size() <= kMax ? std::string(s) : std::string(s.substr(0, kMax)) + "...";
  };
  switch (reply_->type) {
    case REDIS_REPLY_STRING:
      return fmt::format("\"{}\"", clip(str()));
    case REDIS_REPLY_STATUS:
      return clip(str());
    case REDIS_REPLY_ERROR:
      return fmt::format("(error) {}", clip(str()));
    case REDIS_REPLY_INTEGER:
      return fmt::format("(integer) {}", reply_->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY:
      return fmt::format("(array of {})", reply_->elements);
    default:
      return fmt::format("(reply type {})", reply_->type);
  }
}

Reply::Reply(redisReply* owned) : ReplyView(owned), owned_(owned) {}

void Reply::Free::operator()(redisReply* reply) const { freeReplyObject(reply); }

}  // namespace flashsale::redis
