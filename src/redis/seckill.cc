#include "redis/seckill.h"

#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <charconv>
#include <stdexcept>

#include "base/ids.h"
#include "base/strings.h"

namespace flashsale::redis {

namespace asio = boost::asio;
using base::Error;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

// The script's reply as {code, ...}: an array whose first element is an integer.
Result<int64_t> Code(const Script& script, ReplyView reply, size_t min_size) {
  if (!reply.is_array() || reply.size() < std::max<size_t>(min_size, 1) || !reply[0].is_integer()) {
    return MakeError(ErrorCode::kProtocol, "script {} returned {}, expected an array of {}+",
                     script.name, reply.Describe(), min_size);
  }
  return reply[0].integer();
}

// The setup scripts' `load`: 0 definition only, 1 load if missing, 2 the same for a create.
int LoadArg(SetupMode mode) {
  switch (mode) {
    case SetupMode::kDefinitionOnly:
      return 0;
    case SetupMode::kLoadIfMissing:
      return 1;
    case SetupMode::kCreate:
      return 2;
  }
  return 0;
}

Result<int64_t> IntAt(const Script& script, ReplyView reply, size_t i) {
  if (i >= reply.size() || !reply[i].is_integer()) {
    return MakeError(ErrorCode::kProtocol, "script {}: element {} of the reply is not an integer",
                     script.name, i);
  }
  return reply[i].integer();
}

// Sends the call and turns the reply into a T with `parse`, or passes the error on.
template <typename T, typename Parse>
void Run(ScriptRunner& runner, const ScriptCall& call, Handler<T> handler, Parse parse) {
  runner.Eval(call, runner.connection().DefaultDeadline(),
              ReplyHandler([handler = std::move(handler), parse](Result<Reply> reply) mutable {
                Result<T> result = reply.ok() ? parse(*reply) : Result<T>(std::move(reply).error());
                asio::dispatch(asio::append(std::move(handler), std::move(result)));
              }));
}

template <typename T>
void Reject(ScriptRunner& runner, Handler<T> handler, Error error) {
  asio::post(runner.connection().executor(),
             asio::append(std::move(handler), Result<T>(std::move(error))));
}

Error BadActivityId(std::string_view id) {
  return MakeError(ErrorCode::kInvalidArgument,
                   "activity id '{}' must be 1-64 characters of [A-Za-z0-9_-]", id);
}

}  // namespace

SeckillKeys::SeckillKeys(std::string_view key_namespace, std::string_view activity_id)
    : prefix_(fmt::format("{}:seckill:{{{}}}:", key_namespace, activity_id)) {
  meta_ = prefix_ + "meta";
  stock_ = prefix_ + "stock";
  prizes_ = prefix_ + "prizes";
  items_ = prefix_ + "items";
  buyers_ = prefix_ + "buyers";
  orders_ = prefix_ + "orders";
  stream_ = prefix_ + "stream";
  user_orders_ = prefix_ + "user_orders";
  dead_ = prefix_ + "dead";
  failures_ = prefix_ + "failures";
  queue_ = prefix_ + "queue";
  queue_lock_ = prefix_ + "queue_lock";
  queue_fence_ = prefix_ + "queue_fence";
}

std::string SeckillKeys::Idempotency(std::string_view token) const {
  return fmt::format("{}idem:{}", prefix_, token);
}

std::string SeckillKeys::PendingTickets(std::string_view user_token) const {
  return fmt::format("{}pq:{}", prefix_, user_token);
}

std::string SeckillKeys::RateLimit(std::string_view kind, std::string_view token) const {
  return fmt::format("{}rl:{}:{}", prefix_, kind, token);
}

SeckillScripts::SeckillScripts(ScriptRunner& runner, std::string key_namespace)
    : runner_(runner),
      namespace_(std::move(key_namespace)),
      setup_(runner.scripts().Get("seckill_setup")),
      lottery_setup_(runner.scripts().Get("lottery_setup")),
      reserve_(runner.scripts().Get("seckill_reserve")),
      draw_(runner.scripts().Get("lottery_draw")),
      release_(runner.scripts().Get("seckill_release")),
      add_stock_(runner.scripts().Get("seckill_add_stock")),
      status_(runner.scripts().Get("seckill_status")),
      user_orders_(runner.scripts().Get("seckill_user_orders")) {
  if (!base::IsValidId(namespace_) || namespace_.find(':') != std::string::npos) {
    throw std::invalid_argument("key namespace '" + namespace_ +
                                "' must be 1-64 characters of [A-Za-z0-9_.@-]");
  }
}

void SeckillScripts::Setup(const core::SeckillActivity& activity, SetupMode mode,
                           Handler<SetupResult> handler) {
  if (auto valid = core::Validate(activity); !valid) {
    return Reject(runner_, std::move(handler), valid.error());
  }
  const SeckillKeys keys(namespace_, activity.id);
  const Script& script = activity.is_lottery() ? lottery_setup_ : setup_;
  ScriptCall call(script);
  std::vector<std::string> prizes;  // the call refers to these until it is sent
  if (activity.is_lottery()) {
    for (const auto& prize : activity.lottery->prizes) {
      prizes.push_back(prize.id);
      prizes.push_back(std::to_string(prize.weight));
      prizes.push_back(std::to_string(prize.stock));
    }
    call.Key("meta", keys.meta())
        .Key("prizes", keys.prizes())
        .Arg("start_ms", activity.start_ms)
        .Arg("end_ms", activity.end_ms)
        .Arg("per_user_limit", activity.per_user_limit)
        .Arg("state", activity.open ? "open" : "closed")
        .Arg("no_prize_weight", activity.lottery->no_prize_weight)
        .Arg("load", LoadArg(mode))
        .Rest("prizes", prizes);
  } else {
    call.Key("meta", keys.meta())
        .Key("stock", keys.stock())
        .Key("items", keys.items())
        .Arg("start_ms", activity.start_ms)
        .Arg("end_ms", activity.end_ms)
        .Arg("per_user_limit", activity.per_user_limit)
        .Arg("state", activity.open ? "open" : "closed")
        .Arg("kind", core::ToString(activity.kind))
        .Arg("units", activity.InitialUnits())
        .Arg("load", LoadArg(mode))
        .Rest("items", activity.items);
  }
  Run<SetupResult>(runner_, call, std::move(handler),
                   [&script](ReplyView reply) -> Result<SetupResult> {
                     auto code = Code(script, reply, 2);
                     if (!code) return std::move(code).error();
                     auto version = IntAt(script, reply, 1);
                     if (!version) return std::move(version).error();
                     if (*code == -9) {
                       SetupResult clash{.found = true, .clash = true, .held_total = *version};
                       if (reply.size() > 2 && reply[2].is_string()) {
                         clash.held_kind = std::string(reply[2].str());
                       }
                       return clash;
                     }
                     return SetupResult{*code != -4, *code == 1, *version};
                   });
}

namespace {

// What Reserve refuses before Redis.
base::Status CheckReserve(std::string_view activity_id, const ReserveRequest& request) {
  if (!core::IsValidActivityId(activity_id)) return BadActivityId(activity_id);
  if (auto valid = core::ValidatePurchase(request.user_id, request.quantity); !valid) {
    return valid.error();
  }
  if (!base::IsValidId(request.order_id)) {
    return MakeError(ErrorCode::kInvalidArgument, "order id '{}' is not valid", request.order_id);
  }
  if (!request.idempotency_token.empty() &&
      (!base::IsValidId(request.idempotency_token) || request.idempotency_ttl_ms <= 0)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "idempotency token must be an id and its ttl positive");
  }
  return {};
}

// Without a token the idem key is a placeholder the script never touches (it has to be named all
// the same: a script's keys are fixed).
std::string IdemKey(const SeckillKeys& keys, const ReserveRequest& request) {
  return keys.Idempotency(request.idempotency_token.empty() ? "-" : request.idempotency_token);
}

// The reserve call's KEYS and ARGV; `keys` and `idem_key` must outlive `call`.
void FillReserve(ScriptCall& call, const SeckillKeys& keys, const std::string& idem_key,
                 const ReserveRequest& request) {
  const bool idempotent = !request.idempotency_token.empty();
  call.Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Key("buyers", keys.buyers())
      .Key("orders", keys.orders())
      .Key("stream", keys.stream())
      .Key("user_orders", keys.user_orders())
      .Key("idem", idem_key)
      .Arg("order_id", request.order_id)
      .Arg("user_id", request.user_id)
      .Arg("quantity", request.quantity)
      .Arg("now_ms", request.now_ms)
      .Arg("idem_ttl_ms", idempotent ? request.idempotency_ttl_ms : 0);
}

}  // namespace

Result<std::vector<std::string>> SeckillScripts::ReserveArgv(std::string_view activity_id,
                                                             const ReserveRequest& request) const {
  if (auto valid = CheckReserve(activity_id, request); !valid) return std::move(valid).error();
  const SeckillKeys keys(namespace_, activity_id);
  const std::string idem_key = IdemKey(keys, request);
  ScriptCall call(reserve_);
  FillReserve(call, keys, idem_key, request);
  auto argv = call.BuildArgv();
  if (!argv) return std::move(argv).error();
  return std::vector<std::string>(argv->begin(), argv->end());
}

void SeckillScripts::Reserve(std::string_view activity_id, const ReserveRequest& request,
                             Handler<Reservation> handler) {
  if (auto valid = CheckReserve(activity_id, request); !valid) {
    return Reject(runner_, std::move(handler), std::move(valid).error());
  }
  const SeckillKeys keys(namespace_, activity_id);
  const std::string idem_key = IdemKey(keys, request);
  ScriptCall call(reserve_);
  FillReserve(call, keys, idem_key, request);
  Run<Reservation>(
      runner_, call, std::move(handler),
      [&script = reserve_](ReplyView reply) -> Result<Reservation> {
        auto code = Code(script, reply, 5);
        if (!code) return std::move(code).error();
        auto outcome = core::OutcomeFromCode(*code);
        if (!outcome) {
          return MakeError(ErrorCode::kProtocol, "script {} returned unknown code {}", script.name,
                           *code);
        }
        Reservation reservation;
        reservation.outcome = *outcome;
        int64_t* fields[] = {nullptr, nullptr, &reservation.remaining, &reservation.bought};
        for (size_t i = 1; i < 4; ++i) {
          auto value = IntAt(script, reply, i);
          if (!value) return std::move(value).error();
          if (i == 1) reservation.replayed = *value == 1;
          if (fields[i] != nullptr) *fields[i] = *value;
        }
        reservation.order_id = reply[4].str();
        for (size_t i = 5; i < reply.size(); ++i) reservation.items.emplace_back(reply[i].str());
        return reservation;
      });
}

void SeckillScripts::Draw(std::string_view activity_id, const DrawRequest& request,
                          Handler<DrawResult> handler) {
  if (!core::IsValidActivityId(activity_id)) {
    return Reject(runner_, std::move(handler), BadActivityId(activity_id));
  }
  if (auto valid = core::ValidatePurchase(request.user_id, 1); !valid) {
    return Reject(runner_, std::move(handler), valid.error());
  }
  if (!base::IsValidId(request.order_id)) {
    return Reject(
        runner_, std::move(handler),
        MakeError(ErrorCode::kInvalidArgument, "order id '{}' is not valid", request.order_id));
  }
  if (request.pick >= kDrawRandomBound || request.fallback >= kDrawRandomBound) {
    return Reject(runner_, std::move(handler),
                  MakeError(ErrorCode::kInvalidArgument, "draw random numbers must be < 2^52"));
  }
  if (!request.idempotency_token.empty() &&
      (!base::IsValidId(request.idempotency_token) || request.idempotency_ttl_ms <= 0)) {
    return Reject(runner_, std::move(handler),
                  MakeError(ErrorCode::kInvalidArgument,
                            "idempotency token must be an id and its ttl positive"));
  }
  const SeckillKeys keys(namespace_, activity_id);
  const bool idempotent = !request.idempotency_token.empty();
  const std::string idem_key = keys.Idempotency(idempotent ? request.idempotency_token : "-");
  ScriptCall call(draw_);
  call.Key("meta", keys.meta())
      .Key("prizes", keys.prizes())
      .Key("buyers", keys.buyers())
      .Key("orders", keys.orders())
      .Key("stream", keys.stream())
      .Key("user_orders", keys.user_orders())
      .Key("idem", idem_key)
      .Key("fence", keys.queue_fence())
      .Arg("order_id", request.order_id)
      .Arg("user_id", request.user_id)
      .Arg("now_ms", request.now_ms)
      .Arg("idem_ttl_ms", idempotent ? request.idempotency_ttl_ms : 0)
      .Arg("pick", static_cast<int64_t>(request.pick))
      .Arg("fallback", static_cast<int64_t>(request.fallback))
      .Arg("fence", request.fence);
  Run<DrawResult>(runner_, call, std::move(handler),
                  [&script = draw_](ReplyView reply) -> Result<DrawResult> {
                    auto code = Code(script, reply, 6);
                    if (!code) return std::move(code).error();
                    auto outcome = core::OutcomeFromCode(*code);
                    if (!outcome) {
                      return MakeError(ErrorCode::kProtocol, "script {} returned unknown code {}",
                                       script.name, *code);
                    }
                    DrawResult draw;
                    draw.outcome = *outcome;
                    auto replayed = IntAt(script, reply, 1);
                    auto remaining = IntAt(script, reply, 2);
                    auto draws = IntAt(script, reply, 3);
                    if (!replayed) return std::move(replayed).error();
                    if (!remaining) return std::move(remaining).error();
                    if (!draws) return std::move(draws).error();
                    draw.replayed = *replayed == 1;
                    draw.remaining = *remaining;
                    draw.draws = *draws;
                    draw.order_id = reply[4].str();
                    draw.prize_id = reply[5].str();
                    return draw;
                  });
}

void SeckillScripts::Release(std::string_view activity_id, std::string_view order_id,
                             Handler<ReleaseResult> handler) {
  if (!core::IsValidActivityId(activity_id)) {
    return Reject(runner_, std::move(handler), BadActivityId(activity_id));
  }
  if (!base::IsValidId(order_id)) {
    return Reject(runner_, std::move(handler),
                  MakeError(ErrorCode::kInvalidArgument, "order id '{}' is not valid", order_id));
  }
  const SeckillKeys keys(namespace_, activity_id);
  ScriptCall call(release_);
  call.Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Key("buyers", keys.buyers())
      .Key("orders", keys.orders())
      .Arg("order_id", order_id);
  Run<ReleaseResult>(runner_, call, std::move(handler),
                     [&script = release_](ReplyView reply) -> Result<ReleaseResult> {
                       auto code = Code(script, reply, 1);
                       if (!code) return std::move(code).error();
                       if ((*code < -1 || *code > 1) && *code != -4) {
                         return MakeError(ErrorCode::kProtocol, "script {} returned code {}",
                                          script.name, *code);
                       }
                       ReleaseResult release{static_cast<ReleaseOutcome>(*code), 0};
                       if (*code == 1) {
                         auto quantity = IntAt(script, reply, 1);
                         if (!quantity) return std::move(quantity).error();
                         release.quantity = *quantity;
                       }
                       return release;
                     });
}

void SeckillScripts::AddStock(std::string_view activity_id, int64_t units,
                              std::span<const std::string> items, Handler<AddStockResult> handler) {
  if (!core::IsValidActivityId(activity_id)) {
    return Reject(runner_, std::move(handler), BadActivityId(activity_id));
  }
  const bool itemised = !items.empty();
  if (units < 1 || (itemised && static_cast<int64_t>(items.size()) != units)) {
    return Reject(
        runner_, std::move(handler),
        MakeError(ErrorCode::kInvalidArgument,
                  "add {} units: must be >= 1 and, for item ids, one id per unit", units));
  }
  for (const auto& item : items) {
    if (!base::IsValidId(item)) {
      return Reject(runner_, std::move(handler),
                    MakeError(ErrorCode::kInvalidArgument, "item id '{}' is not valid", item));
    }
  }
  const SeckillKeys keys(namespace_, activity_id);
  ScriptCall call(add_stock_);
  call.Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Arg("units", units)
      .Rest("items", items);
  Run<AddStockResult>(runner_, call, std::move(handler),
                      [&script = add_stock_](ReplyView reply) -> Result<AddStockResult> {
                        auto code = Code(script, reply, 1);
                        if (!code) return std::move(code).error();
                        if (*code != 1) return AddStockResult{};
                        auto remaining = IntAt(script, reply, 1);
                        auto version = IntAt(script, reply, 2);
                        if (!remaining) return std::move(remaining).error();
                        if (!version) return std::move(version).error();
                        return AddStockResult{true, *remaining, *version};
                      });
}

void SeckillScripts::Status(std::string_view activity_id, Handler<ActivityStatus> handler) {
  if (!core::IsValidActivityId(activity_id)) {
    return Reject(runner_, std::move(handler), BadActivityId(activity_id));
  }
  const SeckillKeys keys(namespace_, activity_id);
  ScriptCall call(status_);
  call.Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Key("buyers", keys.buyers())
      .Key("orders", keys.orders())
      .Key("stream", keys.stream())
      .Key("prizes", keys.prizes());
  Run<ActivityStatus>(
      runner_, call, std::move(handler),
      [&script = status_](ReplyView reply) -> Result<ActivityStatus> {
        auto code = Code(script, reply, 1);
        if (!code) return std::move(code).error();
        ActivityStatus status;
        if (*code != 1) return status;
        if (reply.size() != 14 || !reply[1].is_string() || !reply[2].is_string()) {
          return MakeError(ErrorCode::kProtocol, "script {} returned {} elements, expected 14",
                           script.name, reply.size());
        }
        status.found = true;
        status.state = reply[1].str();
        status.kind = reply[2].str();
        int64_t* fields[] = {&status.start_ms, &status.end_ms,    &status.per_user_limit,
                             &status.total,    &status.reserved,  &status.released,
                             &status.version,  &status.remaining, &status.stream_length,
                             &status.orders,   &status.buyers};
        for (size_t i = 0; i < std::size(fields); ++i) {
          auto value = IntAt(script, reply, 3 + i);
          if (!value) return std::move(value).error();
          *fields[i] = *value;
        }
        return status;
      });
}

void SeckillScripts::UserOrders(std::string_view activity_id, std::string_view user_id,
                                Handler<std::vector<RecordedOrder>> handler) {
  if (!core::IsValidActivityId(activity_id)) {
    return Reject(runner_, std::move(handler), BadActivityId(activity_id));
  }
  if (!base::IsValidId(user_id)) {
    return Reject(runner_, std::move(handler),
                  MakeError(ErrorCode::kInvalidArgument, "user id is not valid"));
  }
  const SeckillKeys keys(namespace_, activity_id);
  ScriptCall call(user_orders_);
  call.Key("orders", keys.orders()).Key("user_orders", keys.user_orders()).Arg("user_id", user_id);
  Run<std::vector<RecordedOrder>>(
      runner_, call, std::move(handler),
      [&script = user_orders_](ReplyView reply) -> Result<std::vector<RecordedOrder>> {
        if (!reply.is_array() || reply.size() % 2 != 0) {
          return MakeError(ErrorCode::kProtocol, "script {} returned {}", script.name,
                           reply.Describe());
        }
        std::vector<RecordedOrder> orders;
        for (size_t i = 0; i < reply.size(); i += 2) {
          auto order = ParseOrderRecord(reply[i].str(), reply[i + 1].str());
          if (!order) {
            return MakeError(ErrorCode::kProtocol, "script {}: unreadable order record {}",
                             script.name, reply[i + 1].Describe());
          }
          orders.push_back(std::move(*order));
        }
        return orders;
      });
}

std::optional<RecordedOrder> ParseOrderRecord(std::string_view order_id, std::string_view record) {
  // "R|user|quantity|ts|items"
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t bar = record.find('|', start);
    if (bar == std::string_view::npos) return std::nullopt;
    parts.push_back(record.substr(start, bar - start));
    start = bar + 1;
  }
  parts.push_back(record.substr(start));
  RecordedOrder order;
  order.order_id = order_id;
  if (parts[0] != "R" && parts[0] != "X") return std::nullopt;  // N: a draw that won nothing
  order.released = parts[0] == "X";
  auto number = [](std::string_view text, int64_t& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size();
  };
  if (!number(parts[2], order.quantity) || !number(parts[3], order.created_ms)) {
    return std::nullopt;
  }
  order.items = base::SplitWords(parts[4]);
  return order;
}

}  // namespace flashsale::redis
