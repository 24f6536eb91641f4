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
// Every wait is bounded by the sender's own: a waiter waits for at most the batch it is queued
// behind and its own, and each is one call with the Redis client's command timeout.
//
// What a batch means is the sender's business (service/script_batches.h: one script call that
// decides the requests in order). The sender must call `done` exactly once, with one reply per
// request in order, or one error for the whole batch.
//
// Threading: one Coalescer per I/O thread (ServiceContext); every member function must be called
// on its executor. Not thread-safe, by design.
//
// Lifetime: as with any Asio operation, what a Request refers to (string views) must stay alive
// until the operation completes; a coroutine that co_awaits the reply keeps it so. Cancellation
// is not supported: a waiter whose coroutine is cancelled waits for its reply all the same (a
// bounded wait; the request may already be in Redis). Destroying the Coalescer destroys the
// waiters still queued (their coroutines are destroyed, never resumed: what happens to any
// pending Asio operation when its io_context goes) and sends nothing more; a batch in flight
// completes its waiters when its reply comes.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"

namespace flashsale::service {

// What a Coalescer has sent so far (for metrics and tests).
struct CoalescerStats {
  int64_t calls = 0;          // sender calls made
  int64_t requests = 0;       // requests sent in them
  int64_t batched_calls = 0;  // calls that carried more than one request
  int64_t largest_batch = 0;  // most requests in one call
};

inline constexpr size_t kDefaultMaxBatch = 64;

template <typename Request, typename Reply>
class Coalescer {
 public:
  using Replies = std::vector<base::Result<Reply>>;
  using Done = boost::asio::any_completion_handler<void(base::Result<Replies>)>;
  // Sends `requests` (all of `key`, in arrival order) as one call; calls `done` once.
  using Sender =
      std::function<void(std::string_view key, std::span<const Request> requests, Done done)>;

  Coalescer(boost::asio::any_io_executor executor, Sender sender,
            size_t max_batch = kDefaultMaxBatch)
      : state_(std::make_shared<State>(std::move(executor), std::move(sender),
                                       max_batch == 0 ? 1 : max_batch)) {}
  ~Coalescer() {
    state_->closed = true;
    // Destroyed outside the map: a waiter's destruction must not find the map half-cleared.
    Lanes lanes = std::move(state_->lanes);
    state_->lanes.clear();
  }
  Coalescer(const Coalescer&) = delete;
  Coalescer& operator=(const Coalescer&) = delete;

  // Completes with the reply of `request` (Request values are copied; see Lifetime above).
  template <typename Token>
  auto AsyncSubmit(std::string_view key, const Request& request, Token&& token) {
    return boost::asio::async_initiate<Token, void(base::Result<Reply>)>(
        [state = state_](auto handler, std::string_view key, const Request& request) {
          Submit(state, key, request, Waiter(std::move(handler)));
        },
        token, key, request);
  }

  const CoalescerStats& stats() const { return state_->stats; }
  size_t max_batch() const { return state_->max_batch; }

 private:
  using Waiter = boost::asio::any_completion_handler<void(base::Result<Reply>)>;

  // One key's queue: the requests waiting for the call in flight to complete.
  struct Lane {
    bool in_flight = false;
    std::deque<Request> requests;
    std::deque<Waiter> waiters;
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  using Lanes = std::unordered_map<std::string, Lane, StringHash, std::equal_to<>>;

  // A call in flight: its requests stay alive (the sender may refer to them) until it completes.
  struct Batch {
    std::string key;
    std::vector<Request> requests;
    std::vector<Waiter> waiters;
  };

  // Shared with the calls in flight, which may complete after the Coalescer is gone.
  struct State {
    State(boost::asio::any_io_executor executor, Sender sender, size_t max_batch)
        : executor(std::move(executor)), sender(std::move(sender)), max_batch(max_batch) {}
    boost::asio::any_io_executor executor;
    Sender sender;
    size_t max_batch;
    Lanes lanes;
    CoalescerStats stats;
    bool closed = false;
  };

  // Lanes of idle keys are kept (one per activity, reused); beyond this many, an idle lane is
  // dropped when its call completes.
  static constexpr size_t kKeptLanes = 256;

  static void Submit(const std::shared_ptr<State>& state, std::string_view key,
                     const Request& request, Waiter waiter) {
    if (state->closed) return;  // the waiter is destroyed with its handler
    auto it = state->lanes.find(key);
    if (it == state->lanes.end()) it = state->lanes.try_emplace(std::string(key)).first;
    Lane& lane = it->second;
    lane.requests.push_back(request);
    lane.waiters.push_back(std::move(waiter));
    if (!lane.in_flight) SendNext(state, it->first, lane);
  }

  // Sends up to max_batch of the lane's queued requests as one call.
  static void SendNext(const std::shared_ptr<State>& state, const std::string& key, Lane& lane) {
    const size_t count = std::min(lane.requests.size(), state->max_batch);
    auto batch = std::make_shared<Batch>();
    batch->key = key;
    batch->requests.reserve(count);
    batch->waiters.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      batch->requests.push_back(std::move(lane.requests.front()));
      lane.requests.pop_front();
      batch->waiters.push_back(std::move(lane.waiters.front()));
      lane.waiters.pop_front();
    }
    lane.in_flight = true;
    CoalescerStats& stats = state->stats;
    ++stats.calls;
    stats.requests += static_cast<int64_t>(count);
    if (count > 1) ++stats.batched_calls;
    stats.largest_batch = std::max(stats.largest_batch, static_cast<int64_t>(count));
    // The completion is always handled from the executor's queue, never inside the sender's
    // call: a sender that completes at once does not re-enter the lane being sent.
    Done done([state, batch](base::Result<Replies> replies) mutable {
      boost::asio::post(state->executor, [state = std::move(state), batch = std::move(batch),
                                          replies = std::move(replies)]() mutable {
        Complete(state, std::move(*batch), std::move(replies));
      });
    });
    const std::span<const Request> requests(batch->requests);
    state->sender(batch->key, requests, std::move(done));
  }

  // Routes each reply to its waiter (or the whole-call error to all), then sends what queued up.
  static void Complete(const std::shared_ptr<State>& state, Batch batch,
                       base::Result<Replies> replies) {
    const size_t count = batch.waiters.size();
    if (replies.ok() && replies->size() != count) {
      replies = base::MakeError(base::ErrorCode::kInternal, "a batch of {} requests got {} replies",
                                count, replies->size());
    }
    for (size_t i = 0; i < count; ++i) {
      base::Result<Reply> reply =
          replies.ok() ? std::move((*replies)[i]) : base::Result<Reply>(replies.error());
      // Posted (then run on the waiter's own executor, if it has one): a waiter resumed here
      // could submit again while this loop runs.
      boost::asio::post(state->executor,
                        boost::asio::append(std::move(batch.waiters[i]), std::move(reply)));
    }
    if (state->closed) return;
    auto it = state->lanes.find(batch.key);
    if (it == state->lanes.end()) return;
    Lane& lane = it->second;
    lane.in_flight = false;
    if (!lane.requests.empty()) {
      SendNext(state, it->first, lane);
    } else if (state->lanes.size() > kKeptLanes) {
      state->lanes.erase(it);
    }
  }

  std::shared_ptr<State> state_;
};

}  // namespace flashsale::service
