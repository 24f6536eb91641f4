#include "keyspace/activity_scripts.h"

#include <array>
#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <charconv>
#include <stdexcept>

#include "base/ids.h"
#include "base/string_pool.h"
#include "base/strings.h"

namespace flashsale::keyspace {

namespace asio = boost::asio;
using base::Error;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

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

// Sends the call, checks the reply against the script's RETURNS and turns it into a T with
// `parse`, or passes the error on.
template <typename T, typename Parse>
void Run(redis::ScriptEvaluator& runner, const redis::ScriptCall& call, Handler<T> handler,
         Parse parse) {
  runner.Eval(call, runner.DefaultDeadline(),
              redis::ReplyHandler([handler = std::move(handler), parse,
                                   &script = call.script()](Result<redis::Reply> reply) mutable {
                auto read = redis::ScriptReply::Read(script, reply);
                Result<T> result = read.ok() ? parse(*read) : Result<T>(std::move(read).error());
                asio::dispatch(asio::append(std::move(handler), std::move(result)));
              }));
}

Error UnknownCode(const redis::ScriptReply& reply, int64_t code) {
  return MakeError(ErrorCode::kProtocol, "script {} returned unknown code {}", reply.script().name,
                   code);
}

template <typename T>
void Reject(redis::ScriptEvaluator& runner, Handler<T> handler, Error error) {
  asio::post(runner.executor(), asio::append(std::move(handler), Result<T>(std::move(error))));
}

Error BadActivityId(std::string_view id) {
  return MakeError(ErrorCode::kInvalidArgument,
                   "activity id '{}' must be 1-64 characters of [A-Za-z0-9_-]", id);
}

// The first result of a batch of one, or the batch's error.
template <typename T>
Handler<std::vector<Result<T>>> First(Handler<T> handler) {
  return Handler<std::vector<Result<T>>>(
      [handler = std::move(handler)](Result<std::vector<Result<T>>> result) mutable {
        std::move(handler)(result.ok() ? std::move(result->front())
                                       : Result<T>(std::move(result).error()));
      });
}

// A batch's results into a vector of their own (the forms without a caller's vector).
template <typename T, typename Start>
void IntoOwnVector(Handler<std::vector<Result<T>>> handler, Start start) {
  using Results = std::vector<Result<T>>;
  auto out = std::make_shared<Results>();
  Results& results = *out;
  start(results, Handler<void>([out = std::move(out),
                                handler = std::move(handler)](base::Status status) mutable {
          std::move(handler)(status.ok() ? Result<Results>(std::move(*out))
                                         : Result<Results>(std::move(status).error()));
        }));
}

}  // namespace

ActivityKeys::ActivityKeys(std::string_view key_namespace, std::string_view activity_id)
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
  reconcile_report_ = prefix_ + "reconcile";
  missing_since_ = meta_ + ":missing_since";
}

std::string ActivityKeys::Idempotency(std::string_view token) const {
  std::string key;
  AssignIdempotency(key, token);
  return key;
}

void ActivityKeys::AssignIdempotency(std::string& out, std::string_view token) const {
  out.assign(prefix_);
  out.append("idem:");
  out.append(token);
}

std::string ActivityKeys::PendingTickets(std::string_view user_token) const {
  return fmt::format("{}pq:{}", prefix_, user_token);
}

std::string ActivityKeys::RateLimit(std::string_view kind, std::string_view token) const {
  return fmt::format("{}rl:{}:{}", prefix_, kind, token);
}

// The fields of each script's RETURNS that its binding reads.
struct ActivityScripts::Replies {
  struct Setup {
    explicit Setup(const redis::Script& s)
        : code(s, "code"),
          version(s, "version"),
          held_total(s, "held_total"),
          held_kind(s, "held_kind") {}
    redis::IntField code, version, held_total;
    redis::StrField held_kind;
  };
  struct Reserve {
    explicit Reserve(const redis::Script& s)
        : wepoch(s, "wepoch"),
          wseq(s, "wseq"),
          left(s, "left"),
          row(s, "row"),
          row_text(s, "row") {}
    redis::IntField wepoch, wseq, left, row;
    redis::StrField row_text;  // the same field, when the row is a string
  };
  struct Draw {
    explicit Draw(const redis::Script& s)
        : wepoch(s, "wepoch"),
          wseq(s, "wseq"),
          code(s, "code"),
          replayed(s, "replayed"),
          remaining(s, "remaining"),
          draws(s, "draws"),
          order_id(s, "order_id"),
          prize_id(s, "prize_id") {}
    redis::IntField wepoch, wseq, code, replayed, remaining, draws;
    redis::StrField order_id, prize_id;
  };
  struct Release {
    explicit Release(const redis::Script& s) : code(s, "code"), quantity(s, "quantity") {}
    redis::IntField code, quantity;
  };
  struct AddStock {
    explicit AddStock(const redis::Script& s)
        : code(s, "code"), remaining(s, "remaining"), version(s, "version") {}
    redis::IntField code, remaining, version;
  };
  struct Status {
    // An integer field and where it goes.
    struct Int {
      redis::IntField field;
      int64_t ActivityStatus::*out;
    };
    explicit Status(const redis::Script& s)
        : code(s, "code"),
          state(s, "state"),
          kind(s, "kind"),
          wepoch(s, "wepoch"),
          wseq(s, "wseq"),
          ints{{{{s, "start_ms"}, &ActivityStatus::start_ms},
                {{s, "end_ms"}, &ActivityStatus::end_ms},
                {{s, "per_user_limit"}, &ActivityStatus::per_user_limit},
                {{s, "total"}, &ActivityStatus::total},
                {{s, "reserved"}, &ActivityStatus::reserved},
                {{s, "released"}, &ActivityStatus::released},
                {{s, "version"}, &ActivityStatus::version},
                {{s, "remaining"}, &ActivityStatus::remaining},
                {{s, "stream_length"}, &ActivityStatus::stream_length},
                {{s, "orders"}, &ActivityStatus::orders},
                {{s, "buyers"}, &ActivityStatus::buyers},
                {{s, "oversold"}, &ActivityStatus::oversold}}} {}
    redis::IntField code;
    redis::StrField state, kind;
    redis::IntField wepoch, wseq;
    std::array<Int, 12> ints;
  };
  struct UserOrders {
    explicit UserOrders(const redis::Script& s) : order_id(s, "order_id"), record(s, "record") {}
    redis::StrField order_id, record;
  };

  explicit Replies(const ActivityScripts& s)
      : setup(s.setup_),
        lottery_setup(s.lottery_setup_),
        reserve(s.reserve_),
        draw(s.draw_),
        release(s.release_),
        add_stock(s.add_stock_),
        status(s.status_),
        user_orders(s.user_orders_) {}

  Setup setup, lottery_setup;
  Reserve reserve;
  Draw draw;
  Release release;
  AddStock add_stock;
  Status status;
  UserOrders user_orders;
};

ActivityScripts::ActivityScripts(redis::ScriptEvaluator& runner, std::string key_namespace)
    : runner_(runner),
      namespace_(std::move(key_namespace)),
      setup_(runner.scripts().Get("sale_setup")),
      lottery_setup_(runner.scripts().Get("lottery_setup")),
      reserve_(runner.scripts().Get("sale_reserve")),
      draw_(runner.scripts().Get("lottery_draw")),
      release_(runner.scripts().Get("sale_release")),
      add_stock_(runner.scripts().Get("sale_add_stock")),
      status_(runner.scripts().Get("activity_status")),
      user_orders_(runner.scripts().Get("activity_user_orders")),
      replies_(std::make_shared<const Replies>(*this)) {
  if (!base::IsValidId(namespace_) || namespace_.find(':') != std::string::npos) {
    throw std::invalid_argument("key namespace '" + namespace_ +
                                "' must be 1-64 characters of [A-Za-z0-9_.@-]");
  }
}

void ActivityScripts::Setup(const core::Activity& activity, SetupMode mode,
                            Handler<SetupResult> handler) {
  if (auto valid = core::Validate(activity); !valid) {
    return Reject(runner_, std::move(handler), valid.error());
  }
  const ActivityKeys keys(namespace_, activity.id);
  const redis::Script& script = activity.is_lottery() ? lottery_setup_ : setup_;
  redis::ScriptCall call(script);
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
                   [replies = replies_, lottery = activity.is_lottery()](
                       const redis::ScriptReply& reply) -> Result<SetupResult> {
                     const Replies::Setup& f = lottery ? replies->lottery_setup : replies->setup;
                     const int64_t code = reply.Int(f.code);
                     if (code == -9) {
                       if (auto tail = reply.NeedTail(); !tail) return tail.error();
                       return SetupResult{.found = true,
                                          .clash = true,
                                          .held_total = reply.Int(f.held_total),
                                          .held_kind = std::string(reply.Str(f.held_kind))};
                     }
                     return SetupResult{code != -4, code == 1, reply.Int(f.version)};
                   });
}

namespace {

// A reply's order id (26 characters, longer than a short string holds) into `out`, in a string
// from this thread's pool (base/string_pool.h) when `out` has no room: the purchase or draw that
// ends up owning it gives the storage back (service::PurchaseResult, service::DrawResult), so in
// steady state the order id of a reply costs no allocation.
void AssignPooled(std::string& out, std::string_view text) {
  if (out.capacity() < text.size()) out = base::TakeString();
  out.assign(text);
}

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

// What a reserve call refers to until it is sent: the keys, the idempotency keys of the requests
// that have one, the call's time (the first request's) and every request's three arguments
// (sale_reserve.lua: order id, user, and options, empty for one unit at the call's time without
// an idempotency key), in `scratch`'s strings. `sent(i)` says whether request i goes in the call.
template <typename Sent>
struct ReserveCall {
  ReserveCall(const ActivityKeys& keys, const redis::Script& script,
              std::span<const ReserveRequest> requests, WriteSeq floor, Sent sent,
              ActivityScripts::CallScratch& scratch)
      : call(script) {
    scratch.idem_keys.Reset();
    scratch.args.Reset();
    bool first = true;
    int64_t now_ms = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!sent(i)) continue;
      const ReserveRequest& request = requests[i];
      if (first) now_ms = request.now_ms, first = false;
      const bool idempotent = !request.idempotency_token.empty();
      if (idempotent) keys.AssignIdempotency(scratch.idem_keys.Next(), request.idempotency_token);
      scratch.args.Add(request.order_id);
      scratch.args.Add(request.user_id);
      std::string& options = scratch.args.Next();
      if (request.quantity != 1 || request.now_ms != now_ms || idempotent) {
        // "quantity,now_ms,idem_slot,idem_ttl_ms", each empty when it is the default.
        if (request.quantity != 1) options = std::to_string(request.quantity);
        options += ',';
        if (request.now_ms != now_ms) options += std::to_string(request.now_ms);
        options += ',';
        if (idempotent) options += std::to_string(scratch.idem_keys.size());
        options += ',';
        if (idempotent) options += std::to_string(request.idempotency_ttl_ms);
      }
    }
    call.Key("meta", keys.meta())
        .Key("stock", keys.stock())
        .Key("items", keys.items())
        .Key("buyers", keys.buyers())
        .Key("orders", keys.orders())
        .Key("stream", keys.stream())
        .RestKeys("idem", scratch.idem_keys.view())
        .Arg("floor_epoch", floor.epoch)
        .Arg("floor_seq", floor.seq)
        .Arg("now_ms", now_ms)
        .Rest("request", scratch.args.view());
  }
  redis::ScriptCall call;
};

// A whole decimal integer.
bool ParseWhole(std::string_view text, int64_t& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// One row of the reserve script's reply into `r` (sale_reserve.lua's RETURNS): an integer
// (bought * 64 + code + 32: the request's own outcome; `r` holds the request's order id already)
// or "code|replayed|bought|order_id|items". The outcome's code into `code`.
base::Status ReadReserveRow(const redis::ScriptReply& reply, const redis::IntField& row_int,
                            const redis::StrField& row_text, size_t row, int64_t& code,
                            Reservation& r) {
  const std::string_view text = reply.Str(row_text, row);
  if (text.empty()) {
    const int64_t value = reply.Int(row_int, row);
    if (value < 0) {
      return MakeError(ErrorCode::kProtocol, "script {} returned row {}", reply.script().name,
                       value);
    }
    code = value % 64 - 32;
    r.bought = value / 64;
    r.replayed = false;
    r.items.clear();
    return {};
  }
  std::array<std::string_view, 4> parts;
  std::string_view rest = text;
  for (auto& part : parts) {
    const size_t bar = rest.find('|');
    if (bar == std::string_view::npos) {
      return MakeError(ErrorCode::kProtocol, "script {} returned row '{}'", reply.script().name,
                       text);
    }
    part = rest.substr(0, bar);
    rest.remove_prefix(bar + 1);
  }
  int64_t replayed = 0, bought = 0;
  if (!ParseWhole(parts[0], code) || !ParseWhole(parts[1], replayed) ||
      !ParseWhole(parts[2], bought)) {
    return MakeError(ErrorCode::kProtocol, "script {} returned row '{}'", reply.script().name,
                     text);
  }
  r.replayed = replayed == 1;
  // A replayed order's row carries its units where others carry the buyer's.
  const auto outcome = core::OutcomeFromCode(code);
  (r.replayed && outcome && core::IsOrderState(*outcome) ? r.quantity : r.bought) = bought;
  AssignPooled(r.order_id, parts[3]);
  r.items = base::SplitWords(rest);
  return {};
}

// What Draw refuses before Redis.
base::Status CheckDraw(std::string_view activity_id, const DrawRequest& request) {
  if (!core::IsValidActivityId(activity_id)) return BadActivityId(activity_id);
  if (auto valid = core::ValidatePurchase(request.user_id, 1); !valid) return valid.error();
  if (!base::IsValidId(request.order_id)) {
    return MakeError(ErrorCode::kInvalidArgument, "order id '{}' is not valid", request.order_id);
  }
  if (request.pick >= kDrawRandomBound || request.fallback >= kDrawRandomBound) {
    return MakeError(ErrorCode::kInvalidArgument, "draw random numbers must be < 2^52");
  }
  if (!request.idempotency_token.empty() &&
      (!base::IsValidId(request.idempotency_token) || request.idempotency_ttl_ms <= 0)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "idempotency token must be an id and its ttl positive");
  }
  if (request.fence < 0) return MakeError(ErrorCode::kInvalidArgument, "fence must be >= 0");
  return {};
}

// What a draw call refers to until it is sent (lottery_draw.lua): the keys, the idempotency keys
// (or tickets) of the requests that have one, and every request's eight arguments, in
// `scratch`'s strings; `sent(i)` as ReserveCall.
template <typename Sent>
struct DrawCall {
  DrawCall(const ActivityKeys& keys, const redis::Script& script,
           std::span<const DrawRequest> requests, WriteSeq floor, Sent sent,
           ActivityScripts::CallScratch& scratch)
      : call(script) {
    scratch.idem_keys.Reset();
    scratch.args.Reset();
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!sent(i)) continue;
      const DrawRequest& request = requests[i];
      const bool idempotent = !request.idempotency_token.empty();
      if (idempotent) keys.AssignIdempotency(scratch.idem_keys.Next(), request.idempotency_token);
      scratch.args.Add(request.order_id);
      scratch.args.Add(request.user_id);
      scratch.args.AddInt(request.now_ms);
      scratch.args.AddInt(idempotent ? request.idempotency_ttl_ms : 0);
      scratch.args.AddInt(static_cast<int64_t>(request.pick));
      scratch.args.AddInt(static_cast<int64_t>(request.fallback));
      scratch.args.AddInt(request.fence);
      scratch.args.AddInt(idempotent ? static_cast<int64_t>(scratch.idem_keys.size()) : 0);
    }
    call.Key("meta", keys.meta())
        .Key("prizes", keys.prizes())
        .Key("buyers", keys.buyers())
        .Key("orders", keys.orders())
        .Key("stream", keys.stream())
        .Key("fence", keys.queue_fence())
        .RestKeys("idem", scratch.idem_keys.view())
        .Arg("floor_epoch", floor.epoch)
        .Arg("floor_seq", floor.seq)
        .Rest("request", scratch.args.view());
  }
  redis::ScriptCall call;
};

// Every request goes in the call (checked already).
constexpr auto kAll = [](size_t) { return true; };

}  // namespace

std::string& ActivityScripts::StringSlots::Next() {
  if (used_ == strings_.size()) strings_.emplace_back();
  std::string& next = strings_[used_++];
  next.clear();
  return next;
}

void ActivityScripts::StringSlots::AddInt(int64_t value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  Next().assign(digits, end);
}

Result<std::vector<std::string>> ActivityScripts::ReserveBatchArgv(
    std::string_view activity_id, std::span<const ReserveRequest> requests) const {
  for (const ReserveRequest& request : requests) {
    if (auto valid = CheckReserve(activity_id, request); !valid) return std::move(valid).error();
  }
  const ActivityKeys keys(namespace_, activity_id);
  CallScratch scratch;
  const ReserveCall reserve(keys, reserve_, requests, WriteSeq{}, kAll, scratch);
  auto argv = reserve.call.BuildArgv();
  if (!argv) return std::move(argv).error();
  return std::vector<std::string>(argv->begin(), argv->end());
}

const ActivityKeys& ActivityScripts::KeysOf(std::string_view activity_id) {
  if (auto known = keys_.find(activity_id); known != keys_.end()) return known->second;
  if (keys_.size() >= kKeptKeys) keys_.clear();
  return keys_.try_emplace(std::string(activity_id), namespace_, activity_id).first->second;
}

template <typename Request, typename T, typename Check, typename Send>
void ActivityScripts::Batch(std::span<const Request> requests, std::vector<Result<T>>& out,
                            Check check, Send send, Handler<void> handler) {
  out.clear();
  bool any = false;
  for (const Request& request : requests) {
    if (auto valid = check(request); !valid) {
      out.emplace_back(std::move(valid).error());
    } else {
      out.emplace_back(T{});
      any = true;
    }
  }
  if (!any) {
    return asio::post(runner_.executor(), asio::append(std::move(handler), base::Status()));
  }
  send(std::move(handler));
}

template <typename T, typename Fields, typename Fill>
void ActivityScripts::SendRows(const redis::ScriptCall& call, std::vector<Result<T>>& out,
                               const Fields& fields, Fill fill, Handler<void> handler) {
  size_t rows = 0;
  for (const Result<T>& slot : out) rows += slot.ok() ? 1 : 0;
  runner_.Eval(call, runner_.DefaultDeadline(),
               redis::ReplyHandler([handler = std::move(handler), out = &out, rows, &fields, fill,
                                    replies = replies_,
                                    &script = call.script()](Result<redis::Reply> reply) mutable {
                 auto read = redis::ScriptReply::Read(script, reply);
                 base::Status status;
                 if (!read.ok()) {
                   status = std::move(read).error();
                 } else if (read->Rows() != rows) {
                   status = MakeError(ErrorCode::kProtocol, "script {} answered {} requests of {}",
                                      script.name, read->Rows(), rows);
                 } else {
                   size_t row = 0;
                   const WriteSeq written{read->Int(fields.wepoch), read->Int(fields.wseq)};
                   for (Result<T>& slot : *out) {
                     if (!slot.ok()) continue;
                     auto outcome = core::OutcomeFromCode(read->Int(fields.code, row));
                     if (!outcome) {
                       status = UnknownCode(*read, read->Int(fields.code, row));
                       break;
                     }
                     slot->outcome = *outcome;
                     slot->written = written;
                     fill(*read, row, *slot);
                     ++row;
                   }
                 }
                 std::move(handler)(std::move(status));
               }));
}

void ActivityScripts::SendReserve(std::string_view activity_id,
                                  std::span<const ReserveRequest> requests, WriteSeq floor,
                                  std::vector<Result<Reservation>>& out, Handler<void> handler) {
  const ReserveCall reserve(
      KeysOf(activity_id), reserve_, requests, floor, [&out](size_t i) { return out[i].ok(); },
      scratch_);
  // What an integer row leaves out, kept in the slot until the reply: the request's order id,
  // and its quantity (in `quantity`, a replayed order's units once the reply is read).
  size_t rows = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].ok()) continue;
    ++rows;
    AssignPooled(out[i]->order_id, requests[i].order_id);
    out[i]->quantity = requests[i].quantity;
  }
  runner_.Eval(
      reserve.call, runner_.DefaultDeadline(),
      redis::ReplyHandler([handler = std::move(handler), out = &out, rows, replies = replies_,
                           &script = reserve.call.script()](Result<redis::Reply> reply) mutable {
        const Replies::Reserve& f = replies->reserve;
        auto read = redis::ScriptReply::Read(script, reply);
        base::Status status;
        if (!read.ok()) {
          status = std::move(read).error();
        } else if (read->Rows() != rows) {
          status = MakeError(ErrorCode::kProtocol, "script {} answered {} requests of {}",
                             script.name, read->Rows(), rows);
        } else {
          size_t row = 0;
          const WriteSeq written{read->Int(f.wepoch), read->Int(f.wseq)};
          // Each request's `remaining`: the units left before the call, less those reserved by
          // it and the requests before it.
          int64_t left = read->Int(f.left);
          for (size_t i = 0; i < out->size() && status.ok(); ++i) {
            Result<Reservation>& slot = (*out)[i];
            if (!slot.ok()) continue;
            int64_t code = 0;
            const int64_t quantity = slot->quantity;
            slot->quantity = 0;
            status = ReadReserveRow(*read, f.row, f.row_text, row, code, *slot);
            if (!status.ok()) break;
            auto outcome = core::OutcomeFromCode(code);
            if (!outcome) {
              status = UnknownCode(*read, code);
              break;
            }
            slot->outcome = *outcome;
            slot->written = written;
            if (code == 1 && !slot->replayed) left -= quantity;
            // Answered without the units left, as the script always did: an unknown activity,
            // behind the floor, another user's order id, a reused idempotency key.
            const bool none = code == -4 || code == -6 || code == -12 || code == -20;
            slot->remaining = none ? 0 : left;
            ++row;
          }
        }
        std::move(handler)(std::move(status));
      }));
}

void ActivityScripts::Reserve(std::string_view activity_id, const ReserveRequest& request,
                              Handler<Reservation> handler) {
  ReserveBatch(activity_id, std::span<const ReserveRequest>(&request, 1),
               First(std::move(handler)));
}

void ActivityScripts::ReserveBatch(std::string_view activity_id,
                                   std::span<const ReserveRequest> requests,
                                   Handler<std::vector<Result<Reservation>>> handler) {
  IntoOwnVector<Reservation>(std::move(handler), [&](auto& out, Handler<void> done) {
    ReserveBatch(activity_id, requests, out, std::move(done));
  });
}

void ActivityScripts::ReserveBatch(std::string_view activity_id,
                                   std::span<const ReserveRequest> requests, WriteSeq floor,
                                   std::vector<Result<Reservation>>& out, Handler<void> handler) {
  Batch<ReserveRequest, Reservation>(
      requests, out,
      [activity_id](const ReserveRequest& request) { return CheckReserve(activity_id, request); },
      [&](Handler<void> done) { SendReserve(activity_id, requests, floor, out, std::move(done)); },
      std::move(handler));
}

void ActivityScripts::SendDraw(std::string_view activity_id, std::span<const DrawRequest> requests,
                               WriteSeq floor, std::vector<Result<DrawResult>>& out,
                               Handler<void> handler) {
  const DrawCall draw(
      KeysOf(activity_id), draw_, requests, floor, [&out](size_t i) { return out[i].ok(); },
      scratch_);
  const Replies::Draw& f = replies_->draw;
  SendRows(
      draw.call, out, f,
      [&f](const redis::ScriptReply& reply, size_t row, DrawResult& d) {
        d.replayed = reply.Int(f.replayed, row) == 1;
        d.remaining = reply.Int(f.remaining, row);
        d.draws = reply.Int(f.draws, row);
        AssignPooled(d.order_id, reply.Str(f.order_id, row));
        d.prize_id = reply.Str(f.prize_id, row);
      },
      std::move(handler));
}

void ActivityScripts::Draw(std::string_view activity_id, const DrawRequest& request, WriteSeq floor,
                           Handler<DrawResult> handler) {
  IntoOwnVector<DrawResult>(First(std::move(handler)), [&](auto& out, Handler<void> done) {
    DrawBatch(activity_id, std::span<const DrawRequest>(&request, 1), floor, out, std::move(done));
  });
}

void ActivityScripts::DrawBatch(std::string_view activity_id, std::span<const DrawRequest> requests,
                                Handler<std::vector<Result<DrawResult>>> handler) {
  IntoOwnVector<DrawResult>(std::move(handler), [&](auto& out, Handler<void> done) {
    DrawBatch(activity_id, requests, out, std::move(done));
  });
}

void ActivityScripts::DrawBatch(std::string_view activity_id, std::span<const DrawRequest> requests,
                                WriteSeq floor, std::vector<Result<DrawResult>>& out,
                                Handler<void> handler) {
  Batch<DrawRequest, DrawResult>(
      requests, out,
      [activity_id](const DrawRequest& request) { return CheckDraw(activity_id, request); },
      [&](Handler<void> done) { SendDraw(activity_id, requests, floor, out, std::move(done)); },
      std::move(handler));
}

void ActivityScripts::Release(std::string_view activity_id, std::string_view order_id,
                              Handler<ReleaseResult> handler) {
  if (!core::IsValidActivityId(activity_id)) {
    return Reject(runner_, std::move(handler), BadActivityId(activity_id));
  }
  if (!base::IsValidId(order_id)) {
    return Reject(runner_, std::move(handler),
                  MakeError(ErrorCode::kInvalidArgument, "order id '{}' is not valid", order_id));
  }
  const ActivityKeys keys(namespace_, activity_id);
  redis::ScriptCall call(release_);
  call.Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Key("buyers", keys.buyers())
      .Key("orders", keys.orders())
      .Arg("order_id", order_id);
  Run<ReleaseResult>(
      runner_, call, std::move(handler),
      [replies = replies_](const redis::ScriptReply& reply) -> Result<ReleaseResult> {
        const Replies::Release& f = replies->release;
        const int64_t code = reply.Int(f.code);
        if ((code < -1 || code > 1) && code != -4) return UnknownCode(reply, code);
        ReleaseResult release{static_cast<ReleaseOutcome>(code), 0};
        if (code == 1) {
          if (auto tail = reply.NeedTail(); !tail) return tail.error();
          release.quantity = reply.Int(f.quantity);
        }
        return release;
      });
}

void ActivityScripts::AddStock(std::string_view activity_id, int64_t units,
                               std::span<const std::string> items,
                               Handler<AddStockResult> handler) {
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
  const ActivityKeys keys(namespace_, activity_id);
  redis::ScriptCall call(add_stock_);
  call.Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Arg("units", units)
      .Rest("items", items);
  Run<AddStockResult>(
      runner_, call, std::move(handler),
      [replies = replies_](const redis::ScriptReply& reply) -> Result<AddStockResult> {
        const Replies::AddStock& f = replies->add_stock;
        if (reply.Int(f.code) != 1) return AddStockResult{};
        if (auto tail = reply.NeedTail(); !tail) return tail.error();
        return AddStockResult{true, reply.Int(f.remaining), reply.Int(f.version)};
      });
}

void ActivityScripts::Status(std::string_view activity_id, Handler<ActivityStatus> handler) {
  if (!core::IsValidActivityId(activity_id)) {
    return Reject(runner_, std::move(handler), BadActivityId(activity_id));
  }
  const ActivityKeys keys(namespace_, activity_id);
  redis::ScriptCall call(status_);
  call.Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Key("buyers", keys.buyers())
      .Key("orders", keys.orders())
      .Key("stream", keys.stream())
      .Key("prizes", keys.prizes());
  Run<ActivityStatus>(
      runner_, call, std::move(handler),
      [replies = replies_](const redis::ScriptReply& reply) -> Result<ActivityStatus> {
        const Replies::Status& f = replies->status;
        ActivityStatus status;
        if (reply.Int(f.code) != 1) return status;
        if (auto tail = reply.NeedTail(); !tail) return tail.error();
        status.found = true;
        status.state = reply.Str(f.state);
        status.kind = reply.Str(f.kind);
        for (const auto& [field, out] : f.ints) status.*out = reply.Int(field);
        status.written = {reply.Int(f.wepoch), reply.Int(f.wseq)};
        return status;
      });
}

void ActivityScripts::UserOrders(std::string_view activity_id, std::string_view user_id,
                                 const PersistedOrders& persisted,
                                 Handler<std::vector<RecordedOrder>> handler) {
  if (!core::IsValidActivityId(activity_id)) {
    return Reject(runner_, std::move(handler), BadActivityId(activity_id));
  }
  if (!base::IsValidId(user_id)) {
    return Reject(runner_, std::move(handler),
                  MakeError(ErrorCode::kInvalidArgument, "user id is not valid"));
  }
  const ActivityKeys keys(namespace_, activity_id);
  redis::ScriptCall call(user_orders_);
  call.Key("orders", keys.orders())
      .Key("stream", keys.stream())
      .Key("dead", keys.dead())
      .Key("buyers", keys.buyers())
      .Arg("user_id", user_id)
      .Arg("persisted_units", persisted.live_units)
      .Rest("persisted_order_id", persisted.order_ids);
  Run<std::vector<RecordedOrder>>(
      runner_, call, std::move(handler),
      [replies = replies_](const redis::ScriptReply& reply) -> Result<std::vector<RecordedOrder>> {
        const Replies::UserOrders& f = replies->user_orders;
        std::vector<RecordedOrder> orders;
        for (size_t i = 0; i < reply.Rows(); ++i) {
          auto order = ParseOrderRecord(reply.Str(f.order_id, i), reply.Str(f.record, i));
          if (!order) {
            return MakeError(ErrorCode::kProtocol, "script {}: unreadable order record \"{}\"",
                             reply.script().name, reply.Str(f.record, i));
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
  // N: a draw that won nothing
  if (parts[0] != "R" && parts[0] != "X" && parts[0] != "F") return std::nullopt;
  order.released = parts[0] != "R";
  order.refused = parts[0] == "F";
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

}  // namespace flashsale::keyspace
