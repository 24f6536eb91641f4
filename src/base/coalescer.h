#pragma once
// Coalescing of script calls per key (an activity id) on one connection.
//
// Under contention, many purchases of one activity wait on the same Redis connection at once.
// A Coalescer sends them as one call that decides them in order, instead of one call each:
//
//   - no call for the key in flight: the request is sent alone, at once (a lone request is never
//     delayed: there is no timer anywhere here);
//   - a call for the key in flight: the request is queued; when that call completes, everything
//     queued for the key is sent as one batch, in arrival order, at most `max_batch` requests
//     per batch (the rest go in the next one, sent when that one completes);
//   - each waiter gets the reply of its own slot; an error of the whole call (the connection
//     lost, no reply in time) reaches every waiter of that batch.
//
// Every wait is bounded by the sender's own: a waiter waits for the batches queued ahead of it
// (one in flight, and one more per max_batch requests queued before it) and its own, each one
// call with the Redis client's command timeout.
//
// What a batch means is the sender's business (service/script_batches.h: one script call that
// decides the requests in order). The sender gets a Done and must call it exactly once: with an
// ok status after filling `Done::replies()` with one reply per request, in order, or with one
// error for the whole batch.
//
// One queue hop per request: a call's completion is posted to the executor once (never handled
// inside the sender's call, so a sender that completes at once does not re-enter the lane being
// sent); from there the lane's next batch is sent first, then the waiters of the completed batch
// are resumed directly, in slot order (their handlers are invoked inline; a waiter with an
// executor of its own is responsible for getting there). A waiter that submits again while
// resumed queues behind the batch just sent (or, if nothing was queued, is sent at once as the
// lane's next call), exactly as any other request arriving while a call is in flight. Each
// waiter's handler is moved out of the lane and destroyed before the next one runs, so a waiter
// that owns the last reference to something releases it at once.
//
// Storage: per key, a lane with a queue and two batch slots (the call in flight and the one whose
// waiters are being resumed), whose vectors keep their capacity; the Done handed to the sender
// refers to its slot and carries Asio's recycling allocator, so in steady state a request costs
// no heap allocation here (the type-erased handler of each waiter, and of a Done the sender wraps
// in one, come from Asio's per-thread recycling cache).
//
// Threading: one Coalescer per I/O thread (ServiceContext); every member function must be called
// on its executor, and the sender must call Done on it too. Not thread-safe, by design; only
// stats() may be read from another thread.
//
// Lifetime: as with any Asio operation, what a Request refers to (string views) must stay alive
// until the operation completes; a coroutine that co_awaits the reply keeps it so. Cancellation
// is not supported: a waiter whose coroutine is cancelled waits for its reply all the same (a
// bounded wait; the request may already be in Redis). Destroying the Coalescer destroys the
// waiters still queued (their coroutines are destroyed, never resumed: what happens to any
// pending Asio operation when its io_context goes) and sends nothing more; a batch in flight
// completes its waiters when its reply comes (its lane is kept alive by the call's Done).

#include <algorithm>
#include <atomic>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/recycling_allocator.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"

namespace flashsale::base {

// What a Coalescer has sent so far (for metrics and tests).
struct CoalescerStats {
  int64_t calls = 0;          // sender calls made
  int64_t requests = 0;       // requests sent in them
  int64_t batched_calls = 0;  // calls that carried more than one request
  int64_t largest_batch = 0;  // most requests in one call
};

// The counters behind CoalescerStats: written by the Coalescer's thread only, read by any
// (a /metrics scrape runs on whichever I/O thread took it). Relaxed loads and stores: one writer,
// no read-modify-write, so the hot path pays plain moves.
class CoalescerCounters {
 public:
  void Count(int64_t batch) {
    Bump(calls_, 1);
    Bump(requests_, batch);
    if (batch > 1) Bump(batched_calls_, 1);
    if (batch > largest_batch_.load(std::memory_order_relaxed)) {
      largest_batch_.store(batch, std::memory_order_relaxed);
    }
  }
  CoalescerStats Read() const {
    return {.calls = calls_.load(std::memory_order_relaxed),
            .requests = requests_.load(std::memory_order_relaxed),
            .batched_calls = batched_calls_.load(std::memory_order_relaxed),
            .largest_batch = largest_batch_.load(std::memory_order_relaxed)};
  }

 private:
  static void Bump(std::atomic<int64_t>& counter, int64_t by) {
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> batched_calls_{0};
  std::atomic<int64_t> largest_batch_{0};
};

inline constexpr size_t kDefaultMaxBatch = 64;

template <typename Request, typename Reply>
class Coalescer {
 private:
  struct State;
  struct Lane;

 public:
  using Replies = std::vector<base::Result<Reply>>;

  // The completion of one call, handed to the sender. Call it exactly once, on the coalescer's
  // executor: with an ok Status once replies() holds one reply per request (in order), or with
  // the error of the whole call. The Result<Replies> form moves a vector in first (for senders
  // that build their own). Movable only; destroying it uncalled leaves the lane stuck in flight,
  // so a sender never drops it.
  class Done {
   public:
    using allocator_type = boost::asio::recycling_allocator<void>;
    allocator_type get_allocator() const { return {}; }

    Done(Done&&) noexcept = default;
    Done& operator=(Done&&) noexcept = default;
    Done(const Done&) = delete;
    Done& operator=(const Done&) = delete;

    // Where the replies go: empty, with the capacity of earlier batches of the lane.
    Replies& replies() const { return lane_->slots[slot_].replies; }

    void operator()(base::Status status) && {
      std::shared_ptr<State> state = std::move(state_);
      boost::asio::post(state->executor, Completion{state, lane_, slot_, std::move(status)});
    }
    void operator()(base::Result<Replies> replies) && {
      if (!replies.ok()) return std::move(*this)(base::Status(std::move(replies).error()));
      this->replies() = std::move(*replies);
      std::move (*this)(base::Status());
    }

   private:
    friend class Coalescer;
    Done(std::shared_ptr<State> state, Lane* lane, int slot)
        : state_(std::move(state)), lane_(lane), slot_(slot) {}
    std::shared_ptr<State> state_;
    Lane* lane_;
    int slot_;
  };

  // Sends `requests` (all of `key`, in arrival order) as one call; calls `done` once.
  using Sender =
      std::function<void(std::string_view key, std::span<const Request> requests, Done done)>;

  Coalescer(boost::asio::any_io_executor executor, Sender sender,
            size_t max_batch = kDefaultMaxBatch)
      : state_(std::make_shared<State>(std::move(executor), std::move(sender),
                                       max_batch == 0 ? 1 : max_batch)) {}
  ~Coalescer() {
    state_->closed = true;
    // The queued waiters are destroyed outside the lanes: a waiter's destruction must not find a
    // queue half-cleared. The lanes themselves stay with the state while a call is in flight.
    std::vector<Waiter> queued;
    for (auto& [key, lane] : state_->lanes) {
      std::move(lane.waiters.begin(), lane.waiters.end(), std::back_inserter(queued));
      lane.waiters.clear();
      lane.requests.clear();
    }
  }
  Coalescer(const Coalescer&) = delete;
  Coalescer& operator=(const Coalescer&) = delete;

  // Completes with the reply of `request` (Request values are copied; see Lifetime above).
  template <typename Token>
  auto AsyncSubmit(std::string_view key, const Request& request, Token&& token) {
    return boost::asio::async_initiate<Token, void(base::Result<Reply>)>(
        [state = state_](auto handler, std::string_view key, const Request& request) {
          Submit(*state, key, request, Waiter(Handler(std::move(handler))));
        },
        token, key, request);
  }

  // A snapshot of what this Coalescer has sent; safe to call from any thread.
  CoalescerStats stats() const { return state_->stats.Read(); }
  size_t max_batch() const { return state_->max_batch; }

 private:
  using Handler = boost::asio::any_completion_handler<void(base::Result<Reply>)>;
  // A waiter's handler, move-assignable: Boost 1.81's any_completion_handler move assignment
  // copies its argument as an lvalue, i.e. wraps the handler in another one, endlessly. The
  // vectors of waiters move-assign when they erase the front of the queue.
  struct Waiter {
    explicit Waiter(Handler h) noexcept : handler(std::move(h)) {}
    Waiter(Waiter&& other) noexcept : handler(std::move(other.handler)) {}
    Waiter& operator=(Waiter&& other) noexcept {
      Handler taken(std::move(other.handler));
      handler.swap(taken);
      return *this;
    }
    Handler handler;
  };

  // A call's requests (alive until it completes: the sender may refer to them), its waiters and
  // the replies the sender fills. Cleared after use; the vectors keep their capacity.
  struct Slot {
    std::vector<Request> requests;
    std::vector<Waiter> waiters;
    Replies replies;
  };
  static constexpr int kNoSlot = -1;

  // One key's queue and its two batch slots: at most one call in flight, and at most one
  // completed batch whose waiters are being resumed.
  struct Lane {
    std::string_view key;  // the lanes' map key (a node's, stable)
    std::vector<Request> requests;
    std::vector<Waiter> waiters;
    Slot slots[2];
    int in_flight = kNoSlot;
    int resuming = kNoSlot;
    bool idle() const { return in_flight == kNoSlot && resuming == kNoSlot && waiters.empty(); }
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  using Lanes = std::unordered_map<std::string, Lane, StringHash, std::equal_to<>>;

  // Shared with the calls in flight, which may complete after the Coalescer is gone.
  struct State : std::enable_shared_from_this<State> {
    State(boost::asio::any_io_executor executor, Sender sender, size_t max_batch)
        : executor(std::move(executor)), sender(std::move(sender)), max_batch(max_batch) {}
    boost::asio::any_io_executor executor;
    Sender sender;
    size_t max_batch;
    Lanes lanes;
    CoalescerCounters stats;
    bool closed = false;
  };

  // The posted completion of a call (Done's one queue hop).
  struct Completion {
    std::shared_ptr<State> state;
    Lane* lane;
    int slot;
    base::Status status;
    void operator()() { Complete(state, *lane, slot, std::move(status)); }
  };

  // Lanes of idle keys are kept (one per activity, reused); beyond this many, an idle lane is
  // dropped when its call completes.
  static constexpr size_t kKeptLanes = 256;

  static void Submit(State& state, std::string_view key, const Request& request, Waiter waiter) {
    if (state.closed) return;  // the waiter is destroyed with its handler
    auto it = state.lanes.find(key);
    if (it == state.lanes.end()) {
      it = state.lanes.try_emplace(std::string(key)).first;
      it->second.key = it->first;
    }
    Lane& lane = it->second;
    lane.requests.push_back(request);
    lane.waiters.push_back(std::move(waiter));
    if (lane.in_flight == kNoSlot) SendNext(state, lane);
  }

  // Sends up to max_batch of the lane's queued requests as one call, from the free slot.
  static void SendNext(State& state, Lane& lane) {
    const int index = lane.resuming == 0 ? 1 : 0;
    Slot& slot = lane.slots[index];
    const size_t count = std::min(lane.requests.size(), state.max_batch);
    const auto requests_end = lane.requests.begin() + static_cast<std::ptrdiff_t>(count);
    const auto waiters_end = lane.waiters.begin() + static_cast<std::ptrdiff_t>(count);
    std::move(lane.requests.begin(), requests_end, std::back_inserter(slot.requests));
    std::move(lane.waiters.begin(), waiters_end, std::back_inserter(slot.waiters));
    lane.requests.erase(lane.requests.begin(), requests_end);
    lane.waiters.erase(lane.waiters.begin(), waiters_end);
    slot.replies.clear();
    lane.in_flight = index;
    state.stats.Count(static_cast<int64_t>(count));
    // The Done keeps the state (and with it this lane) alive until the call completes.
    state.sender(lane.key, std::span<const Request>(slot.requests),
                 Done(state.shared_from_this(), &lane, index));
  }

  // Sends what queued up first, then routes each reply to its waiter (or the whole-call error to
  // all), resuming them one by one.
  static void Complete(const std::shared_ptr<State>& state, Lane& lane, int index,
                       base::Status status) {
    Slot& slot = lane.slots[index];
    lane.in_flight = kNoSlot;
    lane.resuming = index;
    if (!state->closed && !lane.requests.empty()) SendNext(*state, lane);
    const size_t count = slot.waiters.size();
    if (status.ok() && slot.replies.size() != count) {
      status = base::MakeError(base::ErrorCode::kInternal, "a batch of {} requests got {} replies",
                               count, slot.replies.size());
    }
    for (size_t i = 0; i < count; ++i) {
      Handler waiter = std::move(slot.waiters[i].handler);
      if (status.ok()) {
        std::move(waiter)(std::move(slot.replies[i]));
      } else {
        std::move(waiter)(base::Result<Reply>(status.error()));
      }
    }
    slot.waiters.clear();
    slot.requests.clear();
    slot.replies.clear();
    lane.resuming = kNoSlot;
    if (!state->closed && lane.idle() && state->lanes.size() > kKeptLanes) {
      state->lanes.erase(state->lanes.find(lane.key));
    }
  }

  std::shared_ptr<State> state_;
};

}  // namespace flashsale::base
