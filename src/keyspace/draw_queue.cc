#include "keyspace/draw_queue.h"

#include <boost/asio/use_awaitable.hpp>
#include <string>
#include <vector>

#include "base/ids.h"
#include "keyspace/activity_scripts.h"

namespace flashsale::keyspace {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

DrawQueue::DrawQueue(redis::ScriptRunner& runner, std::string key_namespace)
    : runner_(runner),
      namespace_(std::move(key_namespace)),
      enqueue_(runner.scripts().Get("lottery_enqueue")),
      ticket_(runner.scripts().Get("lottery_ticket")),
      enqueue_code_(enqueue_, "code"),
      enqueue_ticket_id_(enqueue_, "ticket_id"),
      enqueue_draws_(enqueue_, "draws"),
      ticket_state_(ticket_, "state"),
      ticket_code_(ticket_, "code"),
      ticket_draws_(ticket_, "draws"),
      ticket_order_id_(ticket_, "order_id"),
      ticket_prize_id_(ticket_, "prize_id") {}

asio::awaitable<Result<EnqueueResult>> DrawQueue::Enqueue(std::string_view activity_id,
                                                          const EnqueueRequest& request) {
  if (!base::IsValidId(request.ticket_id) || !base::IsValidId(request.user_id) ||
      !base::IsValidId(request.user_token) || request.capacity < 1 || request.ticket_ttl_ms < 1) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "enqueue: ticket, user, user token, capacity and ttl must be valid");
  }
  const ActivityKeys keys(namespace_, activity_id);
  const bool idempotent = !request.idempotency_token.empty();
  const std::string ticket_key = keys.Ticket(request.ticket_id);
  const std::string idem_key = keys.Idempotency(idempotent ? request.idempotency_token : "-");
  const std::string pending_key = keys.PendingTickets(request.user_token);
  // The user's pending tickets, read first so that the script is given every key it reads
  // (lottery_enqueue.lua: a ticket added meanwhile counts as pending).
  const redis::Command pending({"ZRANGE", pending_key, "0", "-1"});
  auto listed = co_await redis::Await(runner_.connection(), pending);
  if (!listed.ok()) co_return std::move(listed).error();
  if (!listed->is_array()) {
    co_return MakeError(ErrorCode::kProtocol, "ZRANGE: unexpected {}", listed->Describe());
  }
  std::vector<std::string> ticket_keys;
  for (size_t i = 0; i < listed->size(); ++i) {
    const std::string_view id = (*listed)[i].str();
    if (base::IsValidId(id)) ticket_keys.push_back(keys.Ticket(id));
  }
  redis::ScriptCall call(enqueue_);
  call.Key("meta", keys.meta())
      .Key("queue", keys.queue())
      .Key("ticket", ticket_key)
      .Key("idem", idem_key)
      .Key("buyers", keys.buyers())
      .Key("pending", pending_key)
      .RestKeys("tickets", ticket_keys)
      .Arg("ticket_id", request.ticket_id)
      .Arg("user_id", request.user_id)
      .Arg("now_ms", request.now_ms)
      .Arg("capacity", request.capacity)
      .Arg("ticket_ttl_ms", request.ticket_ttl_ms)
      .Arg("idem_ttl_ms", idempotent ? request.idempotency_ttl_ms : 0);
  auto reply = co_await redis::Await(runner_, call);
  auto read = redis::ScriptReply::Read(enqueue_, reply);
  if (!read) co_return std::move(read).error();
  EnqueueResult result;
  switch (read->Int(enqueue_code_)) {
    case 1:
      result.outcome = EnqueueOutcome::kQueued;
      break;
    case 2:
      result.outcome = EnqueueOutcome::kReplayed;
      break;
    case 0:
      result.outcome = EnqueueOutcome::kLimitReached;
      if (read->HasTail()) result.draws = read->Int(enqueue_draws_);
      break;
    case -8:
      result.outcome = EnqueueOutcome::kFull;
      break;
    default:
      result.outcome = EnqueueOutcome::kUnknownActivity;
      break;
  }
  result.ticket_id = read->Str(enqueue_ticket_id_);
  co_return result;
}

asio::awaitable<Result<TicketState>> DrawQueue::Ticket(std::string_view activity_id,
                                                       std::string_view ticket_id,
                                                       std::string_view user_id) {
  if (!base::IsValidId(ticket_id)) co_return TicketState{};
  const ActivityKeys keys(namespace_, activity_id);
  const std::string ticket_key = keys.Ticket(ticket_id);
  redis::ScriptCall call(ticket_);
  call.Key("ticket", ticket_key).Key("orders", keys.orders()).Arg("user_id", user_id);
  auto reply = co_await redis::Await(runner_, call);
  auto read = redis::ScriptReply::Read(ticket_, reply);
  if (!read) co_return std::move(read).error();
  TicketState state;
  const int64_t ticket_state = read->Int(ticket_state_);
  if (ticket_state == -4) co_return state;
  if (ticket_state == 0) {
    state.state = TicketState::State::kPending;
    co_return state;
  }
  if (auto tail = read->NeedTail(); !tail) co_return tail.error();
  auto outcome = core::OutcomeFromCode(read->Int(ticket_code_));
  if (!outcome) {
    co_return MakeError(ErrorCode::kProtocol, "script {} returned unknown code {}", ticket_.name,
                        read->Int(ticket_code_));
  }
  state.state = TicketState::State::kDecided;
  state.outcome = *outcome;
  state.draws = read->Int(ticket_draws_);
  state.order_id = read->Str(ticket_order_id_);
  state.prize_id = read->Str(ticket_prize_id_);
  co_return state;
}

asio::awaitable<base::Status> DrawQueue::EnsureGroup(std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  co_return co_await EnsureStreamGroup(runner_, keys.queue(), keys.meta(), kGroup);
}

asio::awaitable<Result<std::vector<StreamEntry>>> DrawQueue::ReadNew(std::string_view activity_id,
                                                                     std::string_view consumer,
                                                                     int64_t count) {
  const ActivityKeys keys(namespace_, activity_id);
  co_return co_await ReadGroupNew(runner_.connection(), keys.queue(), kGroup, consumer, count);
}

asio::awaitable<Result<std::vector<StreamEntry>>> DrawQueue::Claim(std::string_view activity_id,
                                                                   std::string_view consumer,
                                                                   int64_t min_idle_ms,
                                                                   int64_t count) {
  const ActivityKeys keys(namespace_, activity_id);
  co_return co_await AutoClaim(runner_.connection(), keys.queue(), kGroup, consumer, min_idle_ms,
                               count);
}

asio::awaitable<base::Status> DrawQueue::Done(std::string_view activity_id,
                                              std::span<const std::string> ids) {
  if (ids.empty()) co_return base::Status();
  const ActivityKeys keys(namespace_, activity_id);
  std::vector<std::string_view> args = {"XACK", keys.queue(), kGroup};
  args.insert(args.end(), ids.begin(), ids.end());
  const redis::Command ack(args);
  args.erase(args.begin() + 2);
  args[0] = "XDEL";
  const redis::Command del(args);
  auto acked = co_await redis::Await(runner_.connection(), ack);
  auto deleted = co_await redis::Await(runner_.connection(), del);
  if (!acked.ok()) co_return std::move(acked).error();
  if (!deleted.ok()) co_return std::move(deleted).error();
  co_return base::Status();
}

asio::awaitable<Result<int64_t>> DrawQueue::Length(std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  const redis::Command xlen({"XLEN", keys.queue()});
  auto reply = co_await redis::Await(runner_.connection(), xlen);
  if (!reply.ok()) co_return std::move(reply).error();
  if (!reply->is_integer()) {
    co_return MakeError(ErrorCode::kProtocol, "XLEN: unexpected {}", reply->Describe());
  }
  co_return reply->integer();
}

}  // namespace flashsale::keyspace
