#include "support/script_double.h"

#include <hiredis/read.h>

#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdlib>
#include <utility>

#include "redis/connection.h"
#include "redis/reply.h"

namespace flashsale::testing {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace resp {
std::string Int(int64_t value) { return ":" + std::to_string(value) + "\r\n"; }
std::string Bulk(std::string_view value) {
  return "$" + std::to_string(value.size()) + "\r\n" + std::string(value) + "\r\n";
}
std::string Nil() { return "$-1\r\n"; }
std::string Error(std::string_view message) { return "-" + std::string(message) + "\r\n"; }
std::string Array(const std::vector<std::string>& elements) {
  std::string out = "*" + std::to_string(elements.size()) + "\r\n";
  for (const std::string& element : elements) out += element;
  return out;
}
std::string Array(std::initializer_list<std::string> elements) {
  return Array(std::vector<std::string>(elements));
}
}  // namespace resp

InProcessScripts::InProcessScripts(asio::any_io_executor executor, const redis::ScriptSet& scripts)
    : ScriptEvaluator(std::move(executor), std::chrono::seconds(5)), scripts_(scripts) {}

InProcessScripts& InProcessScripts::Then(std::string_view script, Answer answer) {
  scripts_.Get(script);  // throws for a script that does not exist
  queued_[std::string(script)].push_back(std::move(answer));
  return *this;
}

InProcessScripts& InProcessScripts::Always(std::string_view script, Responder responder) {
  scripts_.Get(script);
  always_[std::string(script)] = std::move(responder);
  return *this;
}

std::vector<ScriptCallRecord> InProcessScripts::CallsOf(std::string_view script) const {
  std::vector<ScriptCallRecord> out;
  for (const ScriptCallRecord& call : calls_) {
    if (call.script == script) out.push_back(call);
  }
  return out;
}

Result<redis::Reply> InProcessScripts::Respond(const ScriptCallRecord& record) {
  Answer answer = MakeError(ErrorCode::kInternal, "no answer scripted for {}", record.script);
  if (auto queue = queued_.find(record.script); queue != queued_.end() && !queue->second.empty()) {
    answer = std::move(queue->second.front());
    queue->second.pop_front();
  } else if (auto responder = always_.find(record.script); responder != always_.end()) {
    answer = responder->second(record);
  }
  if (!answer.ok()) return std::move(answer).error();
  // The bytes through the reader a connection parses Redis's replies with.
  redisReader* reader = redis::CreatePooledReader();
  void* raw = nullptr;
  const bool parsed = redisReaderFeed(reader, answer->data(), answer->size()) == REDIS_OK &&
                      redisReaderGetReply(reader, &raw) == REDIS_OK && raw != nullptr;
  redisReaderFree(reader);
  if (!parsed) {
    return MakeError(ErrorCode::kInternal, "the answer scripted for {} is not one RESP value",
                     record.script);
  }
  redis::Reply reply(static_cast<redisReply*>(raw));
  // As a connection turns an error reply into the call's error.
  if (reply.is_error()) {
    return base::Error{ErrorCode::kRemote, std::string(reply.str()),
                       redis::ErrorDetailOf(reply.str())};
  }
  return reply;
}

void InProcessScripts::Eval(const redis::ScriptCall& call, redis::Deadline /*deadline*/,
                            redis::ReplyHandler handler) {
  auto argv = call.BuildArgv();
  if (!argv.ok()) {
    asio::post(executor(), asio::append(std::move(handler), Result<redis::Reply>(argv.error())));
    return;
  }
  // EVALSHA <sha> <numkeys> <keys...> <args...>
  const std::vector<std::string_view>& words = *argv;
  const size_t keys = static_cast<size_t>(std::strtoll(std::string(words[2]).c_str(), nullptr, 10));
  ScriptCallRecord record{.script = call.script().name};
  for (size_t i = 3; i < words.size(); ++i) {
    (i < 3 + keys ? record.keys : record.args).emplace_back(words[i]);
  }
  calls_.push_back(record);
  asio::post(executor(), asio::append(std::move(handler), Respond(calls_.back())));
}

}  // namespace flashsale::testing
