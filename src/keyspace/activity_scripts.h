#pragma once
// Typed bindings of the activity scripts (src/keyspace/lua/sale_*.lua for sales, lottery_*.lua for
// lotteries, activity_*.lua for both) and the key layout of one activity. The binding is the only
// code that knows a script's KEYS and ARGV; callers pass named fields and get typed results.
//
// Key layout (docs/design.md): <namespace>:seckill:{<activity_id>}:<name>. The hash tag keeps one
// activity in one Redis Cluster slot, so a script may touch all of its keys.
//   meta    hash    state, window, per-user limit, kind, total/released, version,
//                   oversold (units the lost-write repair applied that had been sold again),
//                   wepoch/wseq (the write sequence: core/write_seq.h; absent: 0)
//   meta:missing_since string  when a reconciliation run first found the activity lost; set
//                   until its rebuild finished (service/reconcile.cc)
//   stock   string  remaining units (counted stock)
//   prizes  hash    prize id -> units left (a lottery)
//   items   list    remaining item ids (itemised stock)
//   buyers  hash    user id -> units held (a lottery: draws made)
//   orders  hash    order id -> "R|user|quantity|ts|items" (R reserved, X released, F refused:
//                   dead-lettered, its units returned; a lottery win has its prize id as the
//                   item, N marks a draw that won nothing)
//                   (units reserved are derived: total + released + oversold - remaining)
//   user_orders hash legacy: a per-user order index older versions wrote; nothing reads it now
//                   (a user's orders not yet persisted are found on `stream` and `dead`),
//                   deleting an activity deletes it
//   stream  stream  the order intents: the outbox the order pipeline persists (group "persist");
//                   one packed field `o` per intent (its layout: keyspace/order_stream.h)
//   dead    stream  order intents that kept failing, with the reason (dead letters)
//   failures hash   stream entry id -> failed deliveries so far
//   pq:<token>      zset    a user's queued draws still pending: ticket id -> expiry (token =
//                   HMAC of the user)
//   idem:<token>    string  what an idempotency key's first request made (token = HMAC of
//                   user+key), kept the idempotency TTL: a reservation "1|0|order_id", a draw
//                   "code|draws|order_id|user" (won, no prize), a queued draw "T|ticket id";
//                   never a refusal (a retry is decided again), so a user holds one per order
//                   or draw made, however many keys it sends; a queued draw's ticket is
//                   idem:<ticket id> ("P|user" until drawn, then the draw's outcome, whatever it
//                   is)
//   queue   stream  a lottery's admission queue: tickets waiting for a draw (group "draw")
//   queue_lock, queue_fence  the lock of a strict (fifo) queue's one consumer, its fencing counter
//   rl:<kind>:<token> string  a GCRA limiter's theoretical arrival time (token = HMAC of the
//                   user or client address)
//   reconcile       string  the last reconciliation's report (JSON; service/reconcile.h)
//   meta:missing_since string  when reconciliation first found the activity missing from Redis
//                   (Unix ms; expires after a day)
// Keys that belong to no activity are in NamespaceKeys (keyspace/service_state.h).
// Tokens are computed by the caller with the server secret: no user id appears in a key name.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "core/activity.h"
#include "core/outcome.h"
#include "core/write_seq.h"
#include "redis/scripts.h"

namespace flashsale::keyspace {

class ActivityKeys {
 public:
  ActivityKeys(std::string_view key_namespace, std::string_view activity_id);

  const std::string& meta() const { return meta_; }
  const std::string& stock() const { return stock_; }
  const std::string& prizes() const { return prizes_; }
  const std::string& items() const { return items_; }
  const std::string& buyers() const { return buyers_; }
  const std::string& orders() const { return orders_; }
  const std::string& stream() const { return stream_; }
  const std::string& user_orders() const { return user_orders_; }
  const std::string& dead() const { return dead_; }          // dead-letter stream
  const std::string& failures() const { return failures_; }  // entry id -> failed deliveries
  const std::string& queue() const { return queue_; }
  const std::string& queue_lock() const { return queue_lock_; }
  const std::string& queue_fence() const { return queue_fence_; }
  const std::string& reconcile_report() const { return reconcile_report_; }
  const std::string& missing_since() const { return missing_since_; }
  std::string Ticket(std::string_view ticket_id) const { return Idempotency(ticket_id); }
  std::string PendingTickets(std::string_view user_token) const;
  std::string Idempotency(std::string_view token) const;
  // Idempotency(token) written into `out` (its capacity reused).
  void AssignIdempotency(std::string& out, std::string_view token) const;
  std::string RateLimit(std::string_view kind, std::string_view token) const;

 private:
  std::string prefix_;
  std::string meta_, stock_, prizes_, items_, buyers_, orders_, stream_, user_orders_, dead_,
      failures_;
  std::string queue_, queue_lock_, queue_fence_;
  std::string reconcile_report_, missing_since_;
};

struct SetupResult {
  bool found = true;    // false: not loaded, and the call was not allowed to load it
  bool loaded = false;  // true: this call loaded the stock; false: it was loaded before
  int64_t version = 0;  // bumped on every change of the activity
  // SetupMode::kCreate only: Redis holds the activity with another kind or stock, untouched.
  bool clash = false;
  int64_t held_total = 0;
  std::string held_kind;
};

enum class SetupMode {
  kLoadIfMissing,   // a new activity: load its stock unless it is loaded already
  kDefinitionOnly,  // update a loaded activity's definition; never load stock
  kCreate,  // kLoadIfMissing for a create: one Redis holds with another kind or stock is a clash
};

// An activity's write sequence in Redis (meta `wepoch`, `wseq`; core/write_seq.h).
using core::WriteSeq;

struct ReserveRequest {
  std::string_view order_id;  // unique per purchase; a retry with the same id is a replay
  std::string_view user_id;
  int64_t quantity = 1;
  int64_t now_ms = 0;  // the caller's clock decides the window
  // With a token (HMAC of user and Idempotency-Key; see ActivityKeys), the first outcome is kept
  // for idempotency_ttl_ms and every retry with the token gets it back, with its order id.
  std::string_view idempotency_token;
  int64_t idempotency_ttl_ms = 0;
};

struct DrawRequest {
  std::string_view order_id;  // unique per draw; a retry with the same id is a replay
  std::string_view user_id;
  int64_t now_ms = 0;
  // Uniform random integers in [0, 2^52) from the caller's CSPRNG: the first chooses by weight
  // among "no prize" and every prize, the second among the prizes left when the first chose one
  // that is out (lottery_draw.lua).
  uint64_t pick = 0;
  uint64_t fallback = 0;
  // As for ReserveRequest; a queued draw passes its ticket id here.
  std::string_view idempotency_token;
  int64_t idempotency_ttl_ms = 0;
  // A strict queue's consumer: its fencing token from the queue lock; the draw is refused
  // (a kRemote error, detail kFenced: Redis's FENCED) if a newer holder exists. 0: no check.
  int64_t fence = 0;
};
inline constexpr uint64_t kDrawRandomBound = uint64_t{1} << 52;

struct DrawResult {
  core::Outcome outcome = core::Outcome::kUnknownActivity;  // kReserved: won
  bool replayed = false;
  int64_t remaining = 0;  // prize units left, all prizes
  int64_t draws = 0;      // the user's draws so far (this one included)
  std::string order_id;   // the draw's id (an earlier call's, when replayed)
  std::string prize_id;   // kReserved: the prize won
  WriteSeq written;       // the activity's write sequence as Redis holds it after the call
};

struct Reservation {
  // Replayed: the order as it is now (kReserved, kCancelled, kRefused), or an earlier refusal.
  core::Outcome outcome = core::Outcome::kUnknownActivity;
  bool replayed = false;  // the outcome of an earlier call (same order id or idempotency key)
  int64_t remaining = 0;  // units left
  int64_t bought = 0;     // units the user holds (after this reservation, if reserved)
  // A replayed order's own units (0: not known, or not a replayed order).
  int64_t quantity = 0;
  std::string order_id;            // the reservation's order id (an earlier call's, when replayed)
  std::vector<std::string> items;  // an order, itemised stock: the item ids taken
  WriteSeq written;                // the activity's write sequence as Redis holds it after the call
};

// One order as Redis recorded it, for reading back before the database has it.
struct RecordedOrder {
  std::string order_id;
  int64_t quantity = 0;
  int64_t created_ms = 0;
  bool released = false;  // its units are back in stock (X released, or F refused)
  bool refused = false;   // F: dead-lettered, the record refused it (order_dead_letter.lua)
  std::vector<std::string> items;
};

// What the record already has of one user's orders in one activity, so that UserOrders reads of
// the stream only what it does not (the stream is the pipeline's backlog).
struct PersistedOrders {
  int64_t live_units = 0;              // units of the user's reserved or paid orders
  std::vector<std::string> order_ids;  // the user's orders, any state
};

enum class ReleaseOutcome {
  kReleased = 1,
  kAlreadyReleased = 0,
  kUnknownOrder = -1,
  kUnknownActivity = -4,  // not loaded in Redis: nothing written
};
struct ReleaseResult {
  ReleaseOutcome outcome = ReleaseOutcome::kUnknownOrder;
  int64_t quantity = 0;  // kReleased: units returned
};

struct AddStockResult {
  bool found = false;  // false: the activity is not loaded
  int64_t remaining = 0;
  int64_t version = 0;
};

struct ActivityStatus {
  bool found = false;
  std::string state;  // "open" | "closed"
  std::string kind;   // "counted" | "items"
  int64_t start_ms = 0, end_ms = 0, per_user_limit = 0;
  int64_t total = 0;     // units ever loaded or added
  int64_t reserved = 0;  // units ever reserved
  int64_t released = 0;  // units returned by release
  int64_t version = 0;
  int64_t remaining = 0;
  int64_t stream_length = 0;
  int64_t orders = 0;    // order records (reserved or released)
  int64_t buyers = 0;    // users holding at least one unit
  int64_t oversold = 0;  // units applied again that had been sold again (the activity closed)
  WriteSeq written;      // the write sequence
};

// Parses an `orders` hash value ("R|user|quantity|ts|items"); nothing if it is malformed.
std::optional<RecordedOrder> ParseOrderRecord(std::string_view order_id, std::string_view record);

template <typename T>
using Handler = boost::asio::any_completion_handler<void(base::Result<T>)>;

class ActivityScripts {
 public:
  // `runner` must outlive this object; calls complete on its executor.
  ActivityScripts(redis::ScriptEvaluator& runner, std::string key_namespace);

  void Setup(const core::Activity& activity, SetupMode mode, Handler<SetupResult> handler);
  void Reserve(std::string_view activity_id, const ReserveRequest& request,
               Handler<Reservation> handler);
  // Several reservations of one activity decided in order, each exactly as a single Reserve
  // would decide it at that point (per-user limits exact inside the batch, the same user twice
  // included). A request refused before Redis (bad input) gets its own error in its slot; an
  // error of the whole call (Redis down, an unknown outcome) is the handler's error. The results
  // come in the order of `requests`. The requests (and the strings they view) are copied into
  // the command before ReserveBatch returns (with AsyncReserveBatch: once the operation has been
  // initiated, e.g. awaited). One script call: five Redis commands for a single reservation,
  // seven for a batch of counted reservations, whose intents are one stream entry
  // (sale_reserve.lua).
  void ReserveBatch(std::string_view activity_id, std::span<const ReserveRequest> requests,
                    Handler<std::vector<base::Result<Reservation>>> handler);
  // The same into `out`, for a caller that keeps one vector per queue (base/coalescer.h):
  // `out` is cleared and refilled, its capacity reused, and must stay alive until `handler` is
  // called. An ok status means `out` holds one result per request, in order (a request refused
  // before Redis: its error in its slot); an error is the whole call's. The handler is invoked
  // directly on the connection's thread when the reply is read (posted there if nothing was
  // sent), not dispatched to an executor of its own. The call's arguments are built in strings
  // this object keeps, so in steady state the binding allocates nothing but the reply's own
  // strings (the order id of each result, its items).
  void ReserveBatch(std::string_view activity_id, std::span<const ReserveRequest> requests,
                    std::vector<base::Result<Reservation>>& out, Handler<void> handler) {
    ReserveBatch(activity_id, requests, WriteSeq{}, out, std::move(handler));
  }
  // With the lowest write sequence Redis may hold (`floor`): a Redis that holds less refuses the
  // whole call before writing anything, and every request's outcome is kBehind.
  void ReserveBatch(std::string_view activity_id, std::span<const ReserveRequest> requests,
                    WriteSeq floor, std::vector<base::Result<Reservation>>& out,
                    Handler<void> handler);
  // A lottery draw (the activity must be a lottery; a sale answers kUnknownActivity).
  void Draw(std::string_view activity_id, const DrawRequest& request, Handler<DrawResult> handler) {
    Draw(activity_id, request, WriteSeq{}, std::move(handler));
  }
  // With a floor, as ReserveBatch.
  void Draw(std::string_view activity_id, const DrawRequest& request, WriteSeq floor,
            Handler<DrawResult> handler);
  // Several draws of one lottery decided in order, as ReserveBatch (each exactly as a single Draw
  // at that point; a request refused before Redis gets its error in its slot). A stale fence of
  // any request refuses the whole call (FENCED), before anything is written.
  void DrawBatch(std::string_view activity_id, std::span<const DrawRequest> requests,
                 Handler<std::vector<base::Result<DrawResult>>> handler);
  // The same into `out`, as the ReserveBatch above.
  void DrawBatch(std::string_view activity_id, std::span<const DrawRequest> requests,
                 std::vector<base::Result<DrawResult>>& out, Handler<void> handler) {
    DrawBatch(activity_id, requests, WriteSeq{}, out, std::move(handler));
  }
  // With a floor, as ReserveBatch.
  void DrawBatch(std::string_view activity_id, std::span<const DrawRequest> requests,
                 WriteSeq floor, std::vector<base::Result<DrawResult>>& out, Handler<void> handler);
  // The EVALSHA arguments ReserveBatch would send ("EVALSHA", sha, numkeys, keys..., args...),
  // for tools that send the call themselves (bench/redis_client_bench.cc); the same checks first
  // (every request must pass them).
  base::Result<std::vector<std::string>> ReserveBatchArgv(
      std::string_view activity_id, std::span<const ReserveRequest> requests) const;
  void Release(std::string_view activity_id, std::string_view order_id,
               Handler<ReleaseResult> handler);
  void AddStock(std::string_view activity_id, int64_t units, std::span<const std::string> items,
                Handler<AddStockResult> handler);
  void Status(std::string_view activity_id, Handler<ActivityStatus> handler);
  // The user's orders of the activity Redis holds and the record does not have (`persisted`).
  void UserOrders(std::string_view activity_id, std::string_view user_id,
                  const PersistedOrders& persisted, Handler<std::vector<RecordedOrder>> handler);

  // Coroutine / completion-token forms. As with any Asio operation, the strings and the activity
  // passed in must stay alive until the operation completes; the small values are copied.
  template <typename Token>
  auto AsyncSetup(const core::Activity& activity, SetupMode mode, Token&& token) {
    return Initiate<SetupResult>(
        token, [this, a = &activity, mode](auto h) { Setup(*a, mode, std::move(h)); });
  }
  template <typename Token>
  auto AsyncSetup(const core::Activity& activity, Token&& token) {
    return AsyncSetup(activity, SetupMode::kLoadIfMissing, std::forward<Token>(token));
  }
  template <typename Token>
  auto AsyncReserve(std::string_view activity_id, const ReserveRequest& request, Token&& token) {
    return Initiate<Reservation>(token, [this, activity_id, request](auto h) {
      Reserve(activity_id, request, std::move(h));
    });
  }
  template <typename Token>
  auto AsyncReserveBatch(std::string_view activity_id, std::span<const ReserveRequest> requests,
                         Token&& token) {
    return Initiate<std::vector<base::Result<Reservation>>>(
        token, [this, activity_id, requests](auto h) {
          this->ReserveBatch(activity_id, requests, std::move(h));
        });
  }
  template <typename Token>
  auto AsyncDraw(std::string_view activity_id, const DrawRequest& request, Token&& token) {
    return AsyncDraw(activity_id, request, WriteSeq{}, std::forward<Token>(token));
  }
  template <typename Token>
  auto AsyncDraw(std::string_view activity_id, const DrawRequest& request, WriteSeq floor,
                 Token&& token) {
    return Initiate<DrawResult>(token, [this, activity_id, request, floor](auto h) {
      this->Draw(activity_id, request, floor, std::move(h));
    });
  }
  template <typename Token>
  auto AsyncDrawBatch(std::string_view activity_id, std::span<const DrawRequest> requests,
                      Token&& token) {
    return Initiate<std::vector<base::Result<DrawResult>>>(
        token, [this, activity_id, requests](auto h) {
          this->DrawBatch(activity_id, requests, std::move(h));
        });
  }
  template <typename Token>
  auto AsyncRelease(std::string_view activity_id, std::string_view order_id, Token&& token) {
    return Initiate<ReleaseResult>(token, [this, activity_id, order_id](auto h) {
      Release(activity_id, order_id, std::move(h));
    });
  }
  template <typename Token>
  auto AsyncAddStock(std::string_view activity_id, int64_t units,
                     std::span<const std::string> items, Token&& token) {
    return Initiate<AddStockResult>(token, [this, activity_id, units, items](auto h) {
      AddStock(activity_id, units, items, std::move(h));
    });
  }
  template <typename Token>
  auto AsyncStatus(std::string_view activity_id, Token&& token) {
    return Initiate<ActivityStatus>(
        token, [this, activity_id](auto h) { Status(activity_id, std::move(h)); });
  }
  template <typename Token>
  auto AsyncUserOrders(std::string_view activity_id, std::string_view user_id,
                       const PersistedOrders& persisted, Token&& token) {
    return Initiate<std::vector<RecordedOrder>>(
        token, [this, activity_id, user_id, p = &persisted](auto h) {
          UserOrders(activity_id, user_id, *p, std::move(h));
        });
  }

  // Strings reused call after call (the arguments of the call being built): Next() hands the
  // next one, emptied, its capacity kept. Used only while a call is built, before it is sent
  // (activity_scripts.cc builds the reserve and draw calls in them).
  class StringSlots {
   public:
    std::string& Next();
    void Add(std::string_view value) { Next().assign(value); }
    void AddInt(int64_t value);
    std::span<const std::string> view() const { return {strings_.data(), used_}; }
    size_t size() const { return used_; }
    void Reset() { used_ = 0; }

   private:
    std::vector<std::string> strings_;
    size_t used_ = 0;
  };
  struct CallScratch {
    StringSlots idem_keys;
    StringSlots args;
  };

  const std::string& key_namespace() const { return namespace_; }

 private:
  CallScratch scratch_;

  // Checks each request, puts its error or a placeholder in its slot of `out`, then sends the
  // ones that passed as one script call with `send`, or posts `handler` if none did.
  template <typename Request, typename T, typename Check, typename Send>
  void Batch(std::span<const Request> requests, std::vector<base::Result<T>>& out, Check check,
             Send send, Handler<void> handler);
  // One script call (built in `call`) deciding the requests of the ok slots of `out`, one reply
  // row each, in order: `fill(reply, row, result)` reads a row into its slot; the outcome code
  // (field `code`) and the write sequence (fields `wepoch`, `wseq`, into `T::written`) are read
  // here.
  template <typename T, typename Fields, typename Fill>
  void SendRows(const redis::ScriptCall& call, std::vector<base::Result<T>>& out,
                const Fields& fields, Fill fill, Handler<void> handler);
  // One reserve script call deciding the requests of the ok slots of `out` in order.
  void SendReserve(std::string_view activity_id, std::span<const ReserveRequest> requests,
                   WriteSeq floor, std::vector<base::Result<Reservation>>& out,
                   Handler<void> handler);
  // One draw script call deciding the requests of the ok slots of `out` in order.
  void SendDraw(std::string_view activity_id, std::span<const DrawRequest> requests, WriteSeq floor,
                std::vector<base::Result<DrawResult>>& out, Handler<void> handler);
  // The keys of an activity, built once per activity and kept (the hot path names them on every
  // call; at most kKeptKeys activities, then the cache starts over).
  const ActivityKeys& KeysOf(std::string_view activity_id);
  static constexpr size_t kKeptKeys = 1024;
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  std::unordered_map<std::string, ActivityKeys, KeyHash, std::equal_to<>> keys_;

  // `start` captures by value: with use_awaitable the initiation runs only when the awaitable is
  // awaited, after the Async* call has returned.
  template <typename T, typename Token, typename Start>
  static auto Initiate(Token& token, Start start) {
    return boost::asio::async_initiate<Token, void(base::Result<T>)>(
        [](auto handler, Start start) { start(Handler<T>(std::move(handler))); }, token, start);
  }

  redis::ScriptEvaluator& runner_;
  std::string namespace_;
  const redis::Script& setup_;
  const redis::Script& lottery_setup_;
  const redis::Script& reserve_;
  const redis::Script& draw_;
  const redis::Script& release_;
  const redis::Script& add_stock_;
  const redis::Script& status_;
  const redis::Script& user_orders_;
  // The reply fields each binding reads, resolved by name once (activity_scripts.cc); shared with
  // the calls in flight.
  struct Replies;
  std::shared_ptr<const Replies> replies_;
};

}  // namespace flashsale::keyspace
