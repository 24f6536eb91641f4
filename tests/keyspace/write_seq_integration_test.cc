// An activity's write sequence (core/write_seq.h) in the scripts, on a real redis-server: advanced
// once per call that records an order and carried by its stream entry; a floor above what Redis
// holds refuses a whole call before anything is written; the repair's re-base is bound to what
// it read.

#include <gtest/gtest.h>

#include <boost/asio/use_awaitable.hpp>
#include <span>
#include <string>
#include <vector>

#include "activity_fixture.h"
#include "keyspace/inspect.h"
#include "keyspace/order_stream.h"

namespace flashsale::testing {
namespace {

using core::Outcome;
using keyspace::WriteSeq;

class WriteSeqTest : public ActivityFixture {
 protected:
  base::Result<keyspace::Reservation> ReserveAt(const std::string& activity,
                                                const std::string& order, const std::string& user,
                                                WriteSeq floor) {
    const keyspace::ReserveRequest request{.order_id = order, .user_id = user, .now_ms = 1500};
    std::vector<base::Result<keyspace::Reservation>> out;
    auto done = io_.Run([&]() -> boost::asio::awaitable<base::Status> {
      co_return co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable),
                                                     void(base::Status)>(
          [&](auto handler) {
            scripts_->ReserveBatch(activity, std::span<const keyspace::ReserveRequest>(&request, 1),
                                   floor, out, keyspace::Handler<void>(std::move(handler)));
          },
          boost::asio::use_awaitable);
    }());
    if (!done.ok()) return std::move(done).error();
    return std::move(out.front());
  }
  // The stream's entries, each as its field/value pairs (raw, not unpacked).
  std::vector<std::vector<std::string>> Entries(const std::string& activity) {
    std::vector<std::vector<std::string>> out;
    auto range = server_->Command({"XRANGE", Keys(activity).stream(), "-", "+"});
    for (size_t i = 0; i < range->elements; ++i) {
      const redisReply* fields = range->element[i]->element[1];
      std::vector<std::string> values;
      for (size_t f = 0; f < fields->elements; ++f) values.emplace_back(fields->element[f]->str);
      out.push_back(std::move(values));
    }
    return out;
  }
  std::string Snapshot(const std::string& activity) {
    const keyspace::ActivityKeys keys = Keys(activity);
    return server_->String({"GET", keys.stock()}) + "/" +
           std::to_string(server_->Integer({"HLEN", keys.buyers()})) + "/" +
           std::to_string(server_->Integer({"HLEN", keys.orders()})) + "/" +
           std::to_string(server_->Integer({"XLEN", keys.stream()}));
  }
};

TEST_F(WriteSeqTest, AdvancesOncePerCallThatRecordsAnOrderAndItsEntryCarriesIt) {
  ASSERT_TRUE(SetUpActivity(Activity("seq", 10)).ok());
  EXPECT_EQ(Status("seq").written, (WriteSeq{0, 0}));
  auto first = Reserve("seq", "o1", "u1");
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  ASSERT_EQ(first->outcome, Outcome::kReserved);
  EXPECT_EQ(first->written, (WriteSeq{0, 1}));
  // A batch of three: one call, one step.
  std::vector<std::string> orders = {"o2", "o3", "o4"}, users = {"u2", "u3", "u4"};
  std::vector<keyspace::ReserveRequest> requests;
  for (size_t i = 0; i < 3; ++i) {
    requests.push_back({.order_id = orders[i], .user_id = users[i], .now_ms = 1500});
  }
  auto batch = io_.Run(scripts_->AsyncReserveBatch(
      "seq", std::span<const keyspace::ReserveRequest>(requests), boost::asio::use_awaitable));
  ASSERT_TRUE(batch.ok());
  for (const auto& r : *batch) {
    ASSERT_EQ(r->outcome, Outcome::kReserved);
    EXPECT_EQ(r->written, (WriteSeq{0, 2}));
  }
  // A refusal records nothing: no step, and it reports where Redis stands.
  auto again = Reserve("seq", "o5", "u1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, Outcome::kLimitReached);
  EXPECT_EQ(again->written, (WriteSeq{0, 2}));
  EXPECT_EQ(Status("seq").written, (WriteSeq{0, 2}));
  // Each entry carries the sequence of the call that wrote it, first.
  const auto entries = Entries("seq");
  ASSERT_EQ(entries.size(), 2u);
  ASSERT_GE(entries[0].size(), 4u);
  EXPECT_EQ(entries[0][0], keyspace::kWriteSeqField);
  EXPECT_EQ(entries[0][1], "0.1");
  EXPECT_EQ(entries[1][0], keyspace::kWriteSeqField);
  EXPECT_EQ(entries[1][1], "0.2");
  EXPECT_EQ(entries[1].size(), 2u + 2u * 3u) << "the sequence, then an o field per intent";
}

TEST_F(WriteSeqTest, AFloorAboveWhatRedisHoldsRefusesTheWholeCallBeforeWritingAnything) {
  ASSERT_TRUE(SetUpActivity(Activity("behind", 10)).ok());
  ASSERT_EQ(Reserve("behind", "o1", "u1")->outcome, Outcome::kReserved);
  ASSERT_EQ(Reserve("behind", "o2", "u2")->outcome, Outcome::kReserved);
  const std::string before = Snapshot("behind");
  for (const WriteSeq floor : {WriteSeq{0, 3}, WriteSeq{1, 0}}) {
    auto refused = ReserveAt("behind", "o3", "u3", floor);
    ASSERT_TRUE(refused.ok()) << refused.error().ToString();
    EXPECT_EQ(refused->outcome, Outcome::kBehind);
    EXPECT_EQ(refused->written, (WriteSeq{0, 2})) << "what Redis holds";
    EXPECT_EQ(Snapshot("behind"), before) << "written while behind";
  }
  // A retry of a recorded order is refused too: a Redis behind answers nothing.
  EXPECT_EQ(ReserveAt("behind", "o1", "u1", {0, 5})->outcome, Outcome::kBehind);
  // At or below: sold.
  auto sold = ReserveAt("behind", "o3", "u3", {0, 2});
  ASSERT_TRUE(sold.ok());
  EXPECT_EQ(sold->outcome, Outcome::kReserved);
  EXPECT_EQ(sold->written, (WriteSeq{0, 3}));
}

TEST_F(WriteSeqTest, AnActivityRedisLostWholeIsBehindAnyFloorAboveZero) {
  EXPECT_EQ(ReserveAt("gone", "o1", "u1", {0, 1})->outcome, Outcome::kBehind);
  EXPECT_EQ(ReserveAt("gone", "o1", "u1", {0, 0})->outcome, Outcome::kUnknownActivity);
  EXPECT_EQ(server_->Integer({"EXISTS", Keys("gone").meta()}), 0);
}

TEST_F(WriteSeqTest, DrawsCheckAndAdvanceItToo) {
  core::Activity lottery = Activity("draws", 0, 5);
  lottery.lottery = core::Lottery{.prizes = {{"mug", "Mug", 10, 1}}, .no_prize_weight = 1};
  lottery.stock = lottery.lottery->TotalStock();
  ASSERT_TRUE(SetUpActivity(lottery).ok());
  const auto draw = [&](const std::string& order, uint64_t pick, WriteSeq floor) {
    const keyspace::DrawRequest request{
        .order_id = order, .user_id = "u1", .now_ms = 1500, .pick = pick};
    return io_.Run(scripts_->AsyncDraw("draws", request, floor, boost::asio::use_awaitable));
  };
  // pick % 2: 0 no prize (weight 1 first), 1 the mug.
  auto none = draw("d1", 0, {});
  ASSERT_TRUE(none.ok()) << none.error().ToString();
  EXPECT_EQ(none->outcome, Outcome::kNoPrize);
  EXPECT_EQ(none->written, (WriteSeq{0, 1})) << "a draw that won nothing is recorded too";
  auto won = draw("d2", 1, {0, 1});
  ASSERT_TRUE(won.ok());
  EXPECT_EQ(won->outcome, Outcome::kReserved);
  EXPECT_EQ(won->written, (WriteSeq{0, 2}));
  const auto entries = Entries("draws");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0][0], keyspace::kWriteSeqField);
  EXPECT_EQ(entries[0][1], "0.2");
  const int64_t buyers = server_->Integer({"HGET", Keys("draws").buyers(), "u1"});
  auto behind = draw("d3", 1, {0, 3});
  ASSERT_TRUE(behind.ok());
  EXPECT_EQ(behind->outcome, Outcome::kBehind);
  EXPECT_EQ(server_->Integer({"HGET", Keys("draws").buyers(), "u1"}), buyers);
  EXPECT_EQ(server_->Integer({"HEXISTS", Keys("draws").orders(), "d3"}), 0);
}

TEST_F(WriteSeqTest, TheRepairsRebaseIsBoundToWhatItRead) {
  ASSERT_TRUE(SetUpActivity(Activity("rebase", 10)).ok());
  for (int i = 0; i < 3; ++i) {
    const std::string id = std::to_string(i);
    ASSERT_EQ(Reserve("rebase", "o" + id, "u" + id)->outcome, Outcome::kReserved);
  }
  keyspace::ActivityInspector inspector(*runner_, ns_);
  const auto rebase = [&](int64_t epoch, WriteSeq seen) {
    auto result = io_.Run(inspector.Rebase("rebase", epoch, seen));
    if (!result.ok()) throw std::runtime_error(result.error().ToString());
    return *result;
  };
  using Outcome = keyspace::RebaseResult::Outcome;
  // Redis lost writes again while the repair ran (it holds less than the repair read): nothing.
  auto lost_again = rebase(4, {0, 5});
  EXPECT_EQ(lost_again.outcome, Outcome::kBehind);
  EXPECT_EQ(lost_again.now, (WriteSeq{0, 3}));
  EXPECT_EQ(Status("rebase").written, (WriteSeq{0, 3}));
  // As read (or more, sold meanwhile): on from the new epoch.
  auto rebased = rebase(4, {0, 2});
  EXPECT_EQ(rebased.outcome, Outcome::kRebased);
  EXPECT_EQ(rebased.now, (WriteSeq{4, 0}));
  // The floors kept from before (0.3, or 0.9 for writes lost for good) no longer refuse.
  auto sold = ReserveAt("rebase", "o9", "u9", {0, 9});
  ASSERT_TRUE(sold.ok());
  EXPECT_EQ(sold->outcome, core::Outcome::kReserved);
  EXPECT_EQ(sold->written, (WriteSeq{4, 1}));
  // Another repair's epoch already there: left alone.
  EXPECT_EQ(rebase(3, {4, 1}).outcome, Outcome::kAlready);
  EXPECT_EQ(rebase(4, {4, 1}).outcome, Outcome::kAlready);
  EXPECT_EQ(Status("rebase").written, (WriteSeq{4, 1}));
  // Not loaded: nothing written.
  auto missing = io_.Run(inspector.Rebase("nothing-here", 5, {}));
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->outcome, Outcome::kNotLoaded);
  EXPECT_EQ(server_->Integer({"EXISTS", Keys("nothing-here").meta()}), 0);
}

}  // namespace
}  // namespace flashsale::testing
