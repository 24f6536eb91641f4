#include "redis/reply.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <malloc.h>

#include <array>
#include <cassert>
#include <cstdlib>
#include <cstring>

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

namespace {

// Set when this thread's pool is destroyed (thread exit): later releases free their memory.
// Trivially destructible, so it stays readable until the thread ends.
thread_local bool tl_pool_gone = false;

// Free memory of replies, per thread: reply objects, and malloc blocks (strings, element arrays)
// by size class, class k holding blocks of at least 32 << k usable bytes.
class ReplyPool {
 public:
  static constexpr size_t kClasses = 8;  // 32 .. 4096 bytes
  static constexpr size_t kPerClass = 128;

  ~ReplyPool() {
    tl_pool_gone = true;
    for (size_t i = 0; i < reply_count_; ++i) std::free(replies_[i]);
    for (size_t k = 0; k < kClasses; ++k) {
      for (size_t i = 0; i < counts_[k]; ++i) std::free(blocks_[k][i]);
    }
  }

  redisReply* NewReply(int type) {
    void* memory = reply_count_ > 0 ? replies_[--reply_count_] : std::malloc(sizeof(redisReply));
    if (memory == nullptr) return nullptr;
    auto* reply = static_cast<redisReply*>(std::memset(memory, 0, sizeof(redisReply)));
    reply->type = type;
    return reply;
  }
  void DropReply(redisReply* reply) {
    if (reply_count_ < replies_.size()) {
      replies_[reply_count_++] = reply;
    } else {
      std::free(reply);
    }
  }

  void* NewBlock(size_t size) {
    size_t k = 0;
    while (k < kClasses && (size_t{32} << k) < size) ++k;
    if (k == kClasses) return std::malloc(size);
    if (counts_[k] > 0) return blocks_[k][--counts_[k]];
    return std::malloc(size_t{32} << k);
  }
  void DropBlock(void* block) {
    if (block == nullptr) return;
    const size_t usable = malloc_usable_size(block);
    if (usable < 32 || usable > (size_t{64} << kClasses)) {
      std::free(block);
      return;
    }
    size_t k = 0;
    while (k + 1 < kClasses && (size_t{32} << (k + 1)) <= usable) ++k;
    if (counts_[k] < kPerClass) {
      blocks_[k][counts_[k]++] = block;
    } else {
      std::free(block);
    }
  }

 private:
  std::array<void*, 256> replies_{};
  size_t reply_count_ = 0;
  std::array<std::array<void*, kPerClass>, kClasses> blocks_{};
  std::array<size_t, kClasses> counts_{};
};

ReplyPool& Pool() {
  thread_local ReplyPool pool;
  return pool;
}

void Release(redisReply* reply) {
  if (reply == nullptr) return;
  if (tl_pool_gone) {
    freeReplyObject(reply);  // the same malloc blocks hiredis's own replies are made of
    return;
  }
  ReplyPool& pool = Pool();
  switch (reply->type) {
    case REDIS_REPLY_ARRAY:
      if (reply->element != nullptr) {
        for (size_t i = 0; i < reply->elements; ++i) Release(reply->element[i]);
        pool.DropBlock(reply->element);
      }
      break;
    case REDIS_REPLY_ERROR:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_STRING:
      pool.DropBlock(reply->str);
      break;
    default:
      break;
  }
  pool.DropReply(reply);
}

// As hiredis's own functions (hiredis.c), with the pool's memory.
void* Attach(const redisReadTask* task, redisReply* reply) {
  if (task->parent != nullptr) {
    auto* parent = static_cast<redisReply*>(task->parent->obj);
    parent->element[task->idx] = reply;
  }
  return reply;
}

void* CreateString(const redisReadTask* task, char* text, size_t length) {
  ReplyPool& pool = Pool();
  redisReply* reply = pool.NewReply(task->type);
  if (reply == nullptr) return nullptr;
  auto* buffer = static_cast<char*>(pool.NewBlock(length + 1));
  if (buffer == nullptr) {
    pool.DropReply(reply);
    return nullptr;
  }
  std::memcpy(buffer, text, length);
  buffer[length] = '\0';
  reply->str = buffer;
  reply->len = length;
  return Attach(task, reply);
}

void* CreateArray(const redisReadTask* task, int elements) {
  ReplyPool& pool = Pool();
  redisReply* reply = pool.NewReply(REDIS_REPLY_ARRAY);
  if (reply == nullptr) return nullptr;
  if (elements > 0) {
    const size_t bytes = sizeof(redisReply*) * static_cast<size_t>(elements);
    void* block = pool.NewBlock(bytes);
    if (block == nullptr) {
      pool.DropReply(reply);
      return nullptr;
    }
    reply->element = static_cast<redisReply**>(std::memset(block, 0, bytes));
  }
  reply->elements = static_cast<size_t>(elements);
  return Attach(task, reply);
}

void* CreateInteger(const redisReadTask* task, long long value) {  // NOLINT: hiredis's type
  redisReply* reply = Pool().NewReply(REDIS_REPLY_INTEGER);
  if (reply == nullptr) return nullptr;
  reply->integer = value;
  return Attach(task, reply);
}

void* CreateNil(const redisReadTask* task) {
  redisReply* reply = Pool().NewReply(REDIS_REPLY_NIL);
  if (reply == nullptr) return nullptr;
  return Attach(task, reply);
}

void FreeObject(void* reply) { Release(static_cast<redisReply*>(reply)); }

redisReplyObjectFunctions kPooledFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                              FreeObject};

}  // namespace

redisReader* CreatePooledReader() { return redisReaderCreateWithFunctions(&kPooledFunctions); }

void Reply::Free::operator()(redisReply* reply) const { Release(reply); }

}  // namespace flashsale::redis
