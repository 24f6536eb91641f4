// The coalescer alone, with no server: an io_context run on the test's thread and a sender the
// test holds, so every call the coalescer makes is seen and completed by the test.

#include "base/coalescer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace flashsale::base {
namespace {

namespace asio = boost::asio;

struct Ask {
  std::string user;
  int number = 0;
};
using TestCoalescer = Coalescer<Ask, int>;

// One call the coalescer made: its key, a copy of its requests, and its completion.
struct Call {
  std::string key;
  std::vector<Ask> requests;
  std::optional<TestCoalescer::Done> done;

  std::vector<int> Numbers() const {
    std::vector<int> numbers;
    for (const Ask& ask : requests) numbers.push_back(ask.number);
    return numbers;
  }
  // Answers every request with its number times ten.
  void Answer() {
    TestCoalescer::Replies replies;
    for (const Ask& ask : requests) replies.emplace_back(ask.number * 10);
    Finish(std::move(replies));
  }
  void Finish(Result<TestCoalescer::Replies> replies) {
    ASSERT_TRUE(done.has_value()) << "a call completed twice";
    auto handler = std::move(*done);
    done.reset();
    std::move(handler)(std::move(replies));
  }
};

class CoalescerTest : public ::testing::Test {
 protected:
  // A sender that records each call in calls_.
  TestCoalescer::Sender Recorder() {
    return [this](std::string_view key, std::span<const Ask> requests, TestCoalescer::Done done) {
      calls_.push_back(Call{std::string(key), {requests.begin(), requests.end()}, std::move(done)});
    };
  }
  TestCoalescer Make(size_t max_batch = kDefaultMaxBatch) {
    return TestCoalescer(io_.get_executor(), Recorder(), max_batch);
  }

  // Submits with a plain callback token; the reply lands in replies_[number].
  void Submit(TestCoalescer& coalescer, std::string_view key, int number) {
    coalescer.AsyncSubmit(key, Ask{"u" + std::to_string(number), number},
                          [this, number](Result<int> reply) {
                            order_.push_back(number);
                            replies_.insert_or_assign(number, std::move(reply));
                          });
  }

  void Run() {
    io_.restart();
    io_.poll();
  }

  asio::io_context io_;
  std::vector<Call> calls_;
  std::map<int, Result<int>> replies_;
  std::vector<int> order_;  // numbers in the order their replies arrived
};

TEST_F(CoalescerTest, ALoneRequestIsSentAtOnce) {
  TestCoalescer coalescer = Make();
  Submit(coalescer, "sale", 1);
  // Sent inside the submit itself: nothing ran on the io_context, no timer.
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].key, "sale");
  EXPECT_EQ(calls_[0].Numbers(), std::vector<int>{1});
  EXPECT_EQ(calls_[0].requests[0].user, "u1");
  calls_[0].Answer();
  Run();
  ASSERT_EQ(replies_.count(1), 1u);
  ASSERT_TRUE(replies_.at(1).ok());
  EXPECT_EQ(*replies_.at(1), 10);
  EXPECT_EQ(coalescer.stats().calls, 1);
  EXPECT_EQ(coalescer.stats().batched_calls, 0);

  // Idle again: the next lone request goes at once too.
  Submit(coalescer, "sale", 2);
  EXPECT_EQ(calls_.size(), 2u);
}

TEST_F(CoalescerTest, RequestsArrivingDuringACallFormOneBatchInArrivalOrder) {
  TestCoalescer coalescer = Make();
  Submit(coalescer, "sale", 1);
  for (int number : {2, 3, 4, 5}) Submit(coalescer, "sale", number);
  Run();
  ASSERT_EQ(calls_.size(), 1u) << "nothing is sent while the key's call is in flight";
  calls_[0].Answer();
  Run();
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[1].Numbers(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(replies_.size(), 1u);
  calls_[1].Answer();
  Run();
  ASSERT_EQ(replies_.size(), 5u);
  for (int number = 1; number <= 5; ++number) {
    ASSERT_TRUE(replies_.at(number).ok());
    EXPECT_EQ(*replies_.at(number), number * 10) << "the reply of request " << number;
  }
  EXPECT_EQ(order_, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(coalescer.stats().calls, 2);
  EXPECT_EQ(coalescer.stats().requests, 5);
  EXPECT_EQ(coalescer.stats().batched_calls, 1);
  EXPECT_EQ(coalescer.stats().largest_batch, 4);
}

TEST_F(CoalescerTest, EachReplyReachesItsOwnWaiter) {
  TestCoalescer coalescer = Make();
  Submit(coalescer, "sale", 1);
  for (int number : {2, 3, 4}) Submit(coalescer, "sale", number);
  calls_[0].Answer();
  Run();
  ASSERT_EQ(calls_.size(), 2u);
  // Distinct replies per slot, one of them a request's own failure.
  TestCoalescer::Replies replies;
  replies.emplace_back(200);
  replies.emplace_back(base::MakeError(ErrorCode::kInvalidArgument, "three is refused"));
  replies.emplace_back(400);
  calls_[1].Finish(std::move(replies));
  Run();
  ASSERT_EQ(replies_.size(), 4u);
  EXPECT_EQ(*replies_.at(2), 200);
  ASSERT_FALSE(replies_.at(3).ok());
  EXPECT_EQ(replies_.at(3).error().message, "three is refused");
  EXPECT_EQ(*replies_.at(4), 400);
}

TEST_F(CoalescerTest, ABatchHoldsAtMostMaxBatchTheRestGoNext) {
  TestCoalescer coalescer = Make(3);
  Submit(coalescer, "sale", 0);
  for (int number = 1; number <= 7; ++number) Submit(coalescer, "sale", number);
  std::vector<std::vector<int>> sent;
  for (size_t i = 0; i < calls_.size() && i < 10; ++i) {
    sent.push_back(calls_[i].Numbers());
    calls_[i].Answer();
    Run();
  }
  EXPECT_EQ(sent, (std::vector<std::vector<int>>{{0}, {1, 2, 3}, {4, 5, 6}, {7}}));
  EXPECT_EQ(replies_.size(), 8u);
  EXPECT_EQ(coalescer.stats().largest_batch, 3);
  EXPECT_EQ(coalescer.stats().batched_calls, 2);
}

TEST_F(CoalescerTest, AWholeBatchErrorReachesEveryWaiterOfThatBatch) {
  TestCoalescer coalescer = Make();
  Submit(coalescer, "sale", 1);
  for (int number : {2, 3, 4}) Submit(coalescer, "sale", number);
  calls_[0].Answer();
  Run();
  Submit(coalescer, "sale", 5);  // queued behind the batch {2, 3, 4}
  ASSERT_EQ(calls_.size(), 2u);
  calls_[1].Finish(base::MakeError(ErrorCode::kUnknownOutcome, "no reply within 1000 ms"));
  Run();
  for (int number : {2, 3, 4}) {
    ASSERT_EQ(replies_.count(number), 1u);
    ASSERT_FALSE(replies_.at(number).ok());
    EXPECT_EQ(replies_.at(number).error().code, ErrorCode::kUnknownOutcome);
    EXPECT_EQ(replies_.at(number).error().message, "no reply within 1000 ms");
  }
  // The next batch is sent all the same, and answered on its own.
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].Numbers(), std::vector<int>{5});
  calls_[2].Answer();
  Run();
  ASSERT_TRUE(replies_.at(5).ok());
  EXPECT_EQ(*replies_.at(5), 50);
}

TEST_F(CoalescerTest, ARepliesCountThatDoesNotMatchIsAnErrorForEveryWaiter) {
  TestCoalescer coalescer = Make();
  Submit(coalescer, "sale", 1);
  Submit(coalescer, "sale", 2);
  Submit(coalescer, "sale", 3);
  calls_[0].Answer();
  Run();
  TestCoalescer::Replies one;
  one.emplace_back(20);
  calls_[1].Finish(std::move(one));
  Run();
  for (int number : {2, 3}) {
    ASSERT_FALSE(replies_.at(number).ok());
    EXPECT_EQ(replies_.at(number).error().code, ErrorCode::kInternal);
  }
}

TEST_F(CoalescerTest, KeysDoNotWaitForEachOther) {
  TestCoalescer coalescer = Make();
  Submit(coalescer, "spring", 1);
  Submit(coalescer, "autumn", 2);
  Submit(coalescer, "spring", 3);
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[0].key, "spring");
  EXPECT_EQ(calls_[1].key, "autumn");
  calls_[1].Answer();
  Run();
  EXPECT_EQ(calls_.size(), 2u) << "autumn's reply sends nothing of spring";
  calls_[0].Answer();
  Run();
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].key, "spring");
  EXPECT_EQ(calls_[2].Numbers(), std::vector<int>{3});
}

TEST_F(CoalescerTest, ABatchCompletesInOneQueueHop) {
  TestCoalescer coalescer = Make();
  Submit(coalescer, "sale", 1);
  for (int number : {2, 3, 4}) Submit(coalescer, "sale", number);
  calls_[0].Answer();
  Run();
  ASSERT_EQ(calls_.size(), 2u);
  calls_[1].Answer();
  // One handler ran: the posted completion, which resumed every waiter of the batch itself.
  io_.restart();
  EXPECT_EQ(io_.poll_one(), 1u);
  EXPECT_EQ(order_, (std::vector<int>{1, 2, 3, 4})) << "replies in slot order";
  EXPECT_EQ(io_.poll(), 0u) << "no reply was posted again";
}

TEST_F(CoalescerTest, TheNextBatchIsSentBeforeTheWaitersRun) {
  TestCoalescer coalescer = Make();
  std::vector<size_t> calls_seen;  // calls made when each waiter of the first batch ran
  coalescer.AsyncSubmit("sale", Ask{"u1", 1},
                        [&](Result<int>) { calls_seen.push_back(calls_.size()); });
  Submit(coalescer, "sale", 2);
  Submit(coalescer, "sale", 3);
  calls_[0].Answer();
  Run();
  ASSERT_EQ(calls_seen.size(), 1u);
  EXPECT_EQ(calls_seen[0], 2u) << "the batch {2, 3} was sent before the waiter of 1 resumed";
  EXPECT_EQ(calls_[1].Numbers(), (std::vector<int>{2, 3}));
}

TEST_F(CoalescerTest, AWaiterThatSubmitsAgainQueuesBehindTheBatchInFlight) {
  TestCoalescer coalescer = Make();
  // 1's waiter submits 10 when resumed; 2 and 3 were queued, so {2, 3} is already in flight.
  coalescer.AsyncSubmit("sale", Ask{"u1", 1}, [&](Result<int> reply) {
    order_.push_back(1);
    replies_.insert_or_assign(1, std::move(reply));
    Submit(coalescer, "sale", 10);
  });
  Submit(coalescer, "sale", 2);
  Submit(coalescer, "sale", 3);
  calls_[0].Answer();
  Run();
  ASSERT_EQ(calls_.size(), 2u) << "10 waits for the batch in flight";
  EXPECT_EQ(calls_[1].Numbers(), (std::vector<int>{2, 3}));
  calls_[1].Answer();
  Run();
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].Numbers(), std::vector<int>{10});
  calls_[2].Answer();
  Run();
  EXPECT_EQ(order_, (std::vector<int>{1, 2, 3, 10}));
  EXPECT_EQ(*replies_.at(10), 100);
}

TEST_F(CoalescerTest, AWaiterThatSubmitsAgainOnAnIdleLaneIsSentAtOnce) {
  TestCoalescer coalescer = Make();
  // A lone request whose waiter submits twice when resumed: nothing was queued, so the lane is
  // idle and 11 goes at once; 12 queues behind it.
  coalescer.AsyncSubmit("sale", Ask{"u1", 1}, [&](Result<int> reply) {
    order_.push_back(1);
    replies_.insert_or_assign(1, std::move(reply));
    Submit(coalescer, "sale", 11);
    Submit(coalescer, "sale", 12);
  });
  calls_[0].Answer();
  Run();
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[1].Numbers(), std::vector<int>{11});
  calls_[1].Answer();
  Run();
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].Numbers(), std::vector<int>{12});
  calls_[2].Answer();
  Run();
  EXPECT_EQ(order_, (std::vector<int>{1, 11, 12}));
  for (int number : {11, 12}) EXPECT_EQ(*replies_.at(number), number * 10);
}

TEST_F(CoalescerTest, EachWaitersHandlerIsReleasedBeforeTheNextRuns) {
  TestCoalescer coalescer = Make();
  std::vector<std::string> log;
  struct Owned {
    std::vector<std::string>* log;
    int number;
    ~Owned() { log->push_back("released " + std::to_string(number)); }
  };
  Submit(coalescer, "sale", 0);
  for (int number : {1, 2}) {
    auto owned = std::make_shared<Owned>(Owned{&log, number});
    coalescer.AsyncSubmit("sale", Ask{"u", number}, [&log, owned = std::move(owned)](Result<int>) {
      log.push_back("reply " + std::to_string(owned->number));
    });
  }
  calls_[0].Answer();
  Run();
  log.clear();  // the temporaries' destructors above logged too
  calls_[1].Answer();
  Run();
  EXPECT_EQ(log, (std::vector<std::string>{"reply 1", "released 1", "reply 2", "released 2"}));
}

TEST_F(CoalescerTest, AWaiterMayDestroyTheCoalescer) {
  std::optional<TestCoalescer> coalescer;
  coalescer.emplace(io_.get_executor(), Recorder());
  Submit(*coalescer, "sale", 0);
  coalescer->AsyncSubmit("sale", Ask{"u1", 1}, [&](Result<int> reply) {
    order_.push_back(1);
    replies_.insert_or_assign(1, std::move(reply));
    coalescer.reset();  // its last owner goes while its batch is being resumed
  });
  Submit(*coalescer, "sale", 2);
  calls_[0].Answer();
  Run();
  ASSERT_EQ(calls_.size(), 2u);
  Submit(*coalescer, "sale", 3);  // queued behind {1, 2}
  Submit(*coalescer, "sale", 4);
  calls_[1].Answer();
  Run();
  EXPECT_FALSE(coalescer.has_value());
  EXPECT_EQ(order_, (std::vector<int>{0, 1, 2})) << "2 shares 1's batch: still answered";
  EXPECT_EQ(*replies_.at(2), 20);
  // {3, 4} was sent before 1's waiter ran: in flight, it completes its waiters all the same.
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].Numbers(), (std::vector<int>{3, 4}));
  calls_[2].Answer();
  Run();
  EXPECT_EQ(order_, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(calls_.size(), 3u);
}

TEST_F(CoalescerTest, AWaiterThatDestroysTheCoalescerDestroysTheQueuedWaiters) {
  std::optional<TestCoalescer> coalescer;
  coalescer.emplace(io_.get_executor(), Recorder(), 1);
  coalescer->AsyncSubmit("sale", Ask{"u1", 1}, [&](Result<int> reply) {
    order_.push_back(1);
    replies_.insert_or_assign(1, std::move(reply));
    coalescer.reset();
  });
  Submit(*coalescer, "sale", 2);  // max_batch 1: 2 goes next, 3 stays queued
  Submit(*coalescer, "sale", 3);
  calls_[0].Answer();
  Run();
  EXPECT_FALSE(coalescer.has_value());
  ASSERT_EQ(calls_.size(), 2u) << "{2} was sent before 1's waiter ran, {3} never";
  calls_[1].Answer();
  Run();
  EXPECT_EQ(order_, (std::vector<int>{1, 2}));
  EXPECT_EQ(replies_.count(3), 0u) << "queued when the coalescer went: destroyed, not answered";
  EXPECT_EQ(calls_.size(), 2u);
}

TEST_F(CoalescerTest, ASenderThatCompletesAtOnceDoesNotReenter) {
  int depth = 0;
  int deepest = 0;
  TestCoalescer coalescer(
      io_.get_executor(),
      [&](std::string_view, std::span<const Ask> requests, TestCoalescer::Done done) {
        deepest = std::max(deepest, ++depth);
        TestCoalescer::Replies replies;
        for (const Ask& ask : requests) replies.emplace_back(ask.number + 1);
        std::move(done)(std::move(replies));
        --depth;
      },
      2);
  for (int number = 0; number < 5; ++number) Submit(coalescer, "sale", number);
  Run();
  ASSERT_EQ(replies_.size(), 5u);
  for (int number = 0; number < 5; ++number) EXPECT_EQ(*replies_.at(number), number + 1);
  EXPECT_EQ(deepest, 1);
}

// Coroutines co_await their slots, as the purchase does; the sender answers asynchronously.
TEST_F(CoalescerTest, CoroutinesEachGetTheirOwnReply) {
  TestCoalescer coalescer(
      io_.get_executor(),
      [this](std::string_view, std::span<const Ask> requests, TestCoalescer::Done done) {
        TestCoalescer::Replies replies;
        for (const Ask& ask : requests) replies.emplace_back(ask.number * 10);
        asio::post(io_, [done = std::move(done), replies = std::move(replies)]() mutable {
          std::move(done)(std::move(replies));
        });
      });
  constexpr int kCallers = 64;
  int right = 0;
  for (int number = 0; number < kCallers; ++number) {
    asio::co_spawn(
        io_,
        [&coalescer, &right, number]() -> asio::awaitable<void> {
          // Named: GCC 12 destroys a braced temporary inside a co_await expression twice.
          const Ask ask{"user" + std::to_string(number), number};
          Result<int> reply = co_await coalescer.AsyncSubmit("sale", ask, asio::use_awaitable);
          if (reply.ok() && *reply == number * 10) ++right;
        },
        asio::detached);
  }
  io_.run();
  EXPECT_EQ(right, kCallers);
  EXPECT_EQ(coalescer.stats().requests, kCallers);
  EXPECT_GE(coalescer.stats().batched_calls, 1);
  EXPECT_LT(coalescer.stats().calls, kCallers) << "requests waiting together were batched";
}

TEST_F(CoalescerTest, DestroyedWithWaitersQueuedAndACallInFlight) {
  std::optional<TestCoalescer> coalescer;
  coalescer.emplace(io_.get_executor(), Recorder());
  Submit(*coalescer, "sale", 1);
  Submit(*coalescer, "sale", 2);  // queued
  Submit(*coalescer, "sale", 3);  // queued
  ASSERT_EQ(calls_.size(), 1u);
  coalescer.reset();   // the queued waiters are destroyed, never called
  calls_[0].Answer();  // the call in flight completes after the coalescer is gone
  Run();
  EXPECT_EQ(calls_.size(), 1u) << "nothing is sent once the coalescer is gone";
  ASSERT_EQ(replies_.count(1), 1u);
  EXPECT_EQ(*replies_.at(1), 10);
  EXPECT_EQ(replies_.count(2), 0u);
  EXPECT_EQ(replies_.count(3), 0u);
}

}  // namespace
}  // namespace flashsale::base
