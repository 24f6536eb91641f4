#include "server/reply.h"

#include <array>

#include "base/json_writer.h"

namespace flashsale::server {

namespace {
constexpr std::array<std::string_view, static_cast<size_t>(Word::kCount)> kWords = {
    "reserved",
    "already_purchased",
    "sold_out",
    "not_started",
    "ended",
    "unknown_activity",
    "closed",
    "conflict",
    "rate_limited",
    "overloaded",
    "won",
    "no_prize",
    "limit_reached",
    "limit_exceeded",
    "paid",
    "compensation_due",
    "cancelled",
    "refused",
    "idempotency_key_reused",
    "queued",
    "pending",
    "pass_required",
    "drawing",
    "waiting",
    "admitted",
    "not_joined",
    "ok",
    "created",
    "bad_request",
    "unauthorized",
    "not_found",
    "method_not_allowed",
    "payload_too_large",
    "headers_too_large",
    "unavailable",
    "unknown_outcome",
    "shutting_down",
    "error",
};
}  // namespace

std::string_view WordName(Word word) { return kWords[static_cast<size_t>(word)]; }

Reply ErrorReply(http::status status, Word word, std::string_view message) {
  base::JsonWriter w;
  w.BeginObject().Key("status").String(WordName(word)).Key("error").String(message).EndObject();
  return JsonReply(status, word, std::move(w).Take());
}

Reply JsonReply(http::status status, Word word, std::string body) {
  Reply reply;
  reply.status = status;
  reply.word = word;
  reply.body = std::move(body);
  return reply;
}

}  // namespace flashsale::server
