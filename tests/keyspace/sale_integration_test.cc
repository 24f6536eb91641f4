// The sale scripts on a real redis-server: every outcome code, the window's edges, per-user
// limits above 1, itemised stock, setup idempotence, release-once and the replay of an order id.

#include <set>

#include "keyspace/activity_fixture.h"
#include "keyspace/inspect.h"

namespace flashsale::keyspace {
namespace {

using core::Outcome;
using testing::ActivityFixture;

class SaleTest : public ActivityFixture {
 protected:
  // The stream's intents as field maps, oldest first.
  std::vector<std::map<std::string, std::string>> StreamEntries(const std::string& activity) {
    auto reply = server_->Command({"XRANGE", Keys(activity).stream(), "-", "+"});
    return testing::StreamIntents(reply.get());
  }
  base::Result<std::vector<RecordedOrder>> UserOrders(const std::string& activity,
                                                      const std::string& user,
                                                      const PersistedOrders& persisted = {}) {
    return io_.Run(
        scripts_->AsyncUserOrders(activity, user, persisted, boost::asio::use_awaitable));
  }
  // XREVRANGE calls the server has run since its statistics were last reset.
  int64_t StreamReads() {
    const std::string info = server_->String({"INFO", "commandstats"});
    const std::string name = "cmdstat_xrevrange:calls=";
    const size_t at = info.find(name);
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + name.size()));
  }
};

TEST_F(SaleTest, SetupLoadsStockOnceAndNeverResetsARunningSale) {
  auto first = SetUpActivity(Activity("phone", 5));
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_TRUE(first->loaded);
  EXPECT_EQ(first->version, 1);
  ASSERT_EQ(Reserve("phone", "o1", "alice")->outcome, Outcome::kReserved);
  ASSERT_EQ(Reserve("phone", "o2", "bob")->outcome, Outcome::kReserved);

  // A prewarm rerun with a different definition: the window and limit change, stock does not.
  auto changed = Activity("phone", 100, 2);
  changed.end_ms = 3000;
  auto again = SetUpActivity(changed);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->loaded);
  EXPECT_EQ(again->version, 2);
  const auto status = Status("phone");
  EXPECT_EQ(status.remaining, 3);
  EXPECT_EQ(status.total, 5);
  EXPECT_EQ(status.reserved, 2);
  EXPECT_EQ(status.end_ms, 3000);
  EXPECT_EQ(status.per_user_limit, 2);
  EXPECT_EQ(Reserve("phone", "o3", "alice", 1, 2500)->outcome, Outcome::kReserved);

  // The stock kind of a loaded activity cannot change.
  auto itemised = Activity("phone", 0);
  itemised.kind = core::StockKind::kItemised;
  itemised.items = {"A"};
  auto refused = SetUpActivity(itemised);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, base::ErrorCode::kRemote);
  EXPECT_NE(refused.error().message.find("kind"), std::string::npos);
  EXPECT_EQ(Status("phone").remaining, 2);
}

TEST_F(SaleTest, DefinitionOnlySetupNeverLoadsStock) {
  // An activity Redis does not have (never loaded, or lost): a definition update must not load
  // its full stock, since units may have been sold before Redis lost it.
  auto result = io_.Run(scripts_->AsyncSetup(Activity("lost", 10), SetupMode::kDefinitionOnly,
                                             boost::asio::use_awaitable));
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_FALSE(result->found);
  EXPECT_FALSE(Status("lost").found);
  EXPECT_EQ(server_->Integer({"EXISTS", Keys("lost").stock()}), 0);
  // Loaded ones get the new definition.
  ASSERT_TRUE(SetUpActivity(Activity("lost", 10)).ok());
  auto closed = Activity("lost", 999);
  closed.open = false;
  auto update =
      io_.Run(scripts_->AsyncSetup(closed, SetupMode::kDefinitionOnly, boost::asio::use_awaitable));
  ASSERT_TRUE(update.ok());
  EXPECT_TRUE(update->found);
  EXPECT_EQ(Status("lost").state, "closed");
  EXPECT_EQ(Status("lost").remaining, 10);
}

TEST_F(SaleTest, EveryOutcomeCode) {
  ASSERT_TRUE(SetUpActivity(Activity("a", 1)).ok());
  auto reserved = Reserve("a", "o1", "alice");
  ASSERT_TRUE(reserved.ok()) << reserved.error().ToString();
  EXPECT_EQ(reserved->outcome, Outcome::kReserved);
  EXPECT_FALSE(reserved->replayed);
  EXPECT_EQ(reserved->remaining, 0);

  auto limit = Reserve("a", "o2", "alice");
  EXPECT_EQ(limit->outcome, Outcome::kLimitReached);
  EXPECT_EQ(limit->bought, 1);
  EXPECT_EQ(Reserve("a", "o3", "bob")->outcome, Outcome::kSoldOut);
  EXPECT_EQ(Reserve("a", "o4", "bob", 1, 999)->outcome, Outcome::kNotStarted);
  EXPECT_EQ(Reserve("a", "o5", "bob", 1, 2000)->outcome, Outcome::kEnded);
  EXPECT_EQ(Reserve("nope", "o6", "bob")->outcome, Outcome::kUnknownActivity);
  EXPECT_EQ(Reserve("a", "o1", "mallory")->outcome, Outcome::kConflict);

  auto closed = Activity("b", 10);
  closed.open = false;
  ASSERT_TRUE(SetUpActivity(closed).ok());
  EXPECT_EQ(Reserve("b", "o7", "bob")->outcome, Outcome::kClosed);
  EXPECT_EQ(Status("b").remaining, 10);

  // Only the one reservation left a trace.
  EXPECT_EQ(StreamEntries("a").size(), 1u);
  EXPECT_EQ(StreamEntries("b").size(), 0u);
}

TEST_F(SaleTest, WindowEdges) {
  ASSERT_TRUE(SetUpActivity(Activity("w", 10)).ok());
  EXPECT_EQ(Reserve("w", "o1", "u1", 1, 999)->outcome, Outcome::kNotStarted);
  EXPECT_EQ(Reserve("w", "o2", "u2", 1, 1000)->outcome, Outcome::kReserved);
  EXPECT_EQ(Reserve("w", "o3", "u3", 1, 1999)->outcome, Outcome::kReserved);
  EXPECT_EQ(Reserve("w", "o4", "u4", 1, 2000)->outcome, Outcome::kEnded);
  EXPECT_EQ(Status("w").remaining, 8);
}

TEST_F(SaleTest, PerUserLimitAboveOne) {
  ASSERT_TRUE(SetUpActivity(Activity("l", 100, 3)).ok());
  EXPECT_EQ(Reserve("l", "o1", "alice", 1)->outcome, Outcome::kReserved);
  EXPECT_EQ(Reserve("l", "o2", "alice", 2)->outcome, Outcome::kReserved);
  auto over = Reserve("l", "o3", "alice", 1);
  EXPECT_EQ(over->outcome, Outcome::kLimitReached);
  EXPECT_EQ(over->bought, 3);
  EXPECT_EQ(Reserve("l", "o4", "bob", 4)->outcome, Outcome::kLimitReached);
  EXPECT_EQ(Reserve("l", "o5", "bob", 3)->outcome, Outcome::kReserved);
  EXPECT_EQ(server_->Integer({"HGET", Keys("l").buyers(), "alice"}), 3);
  EXPECT_EQ(server_->Integer({"HGET", Keys("l").buyers(), "bob"}), 3);
  EXPECT_EQ(Status("l").remaining, 94);
}

TEST_F(SaleTest, NotEnoughStockForTheQuantityIsSoldOut) {
  ASSERT_TRUE(SetUpActivity(Activity("q", 2, 5)).ok());
  EXPECT_EQ(Reserve("q", "o1", "alice", 3)->outcome, Outcome::kSoldOut);
  EXPECT_EQ(Reserve("q", "o2", "alice", 2)->outcome, Outcome::kReserved);
  EXPECT_EQ(Status("q").remaining, 0);
}

TEST_F(SaleTest, ItemisedStockHandsOutEachItemOnceAndRecordsIt) {
  auto coupons = Activity("coupons", 0, 2);
  coupons.kind = core::StockKind::kItemised;
  coupons.items = {"C1", "C2", "C3", "C4", "C5", "C6"};
  ASSERT_TRUE(SetUpActivity(coupons).ok());

  auto two = Reserve("coupons", "o1", "alice", 2);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->outcome, Outcome::kReserved);
  EXPECT_EQ(two->items, (std::vector<std::string>{"C1", "C2"}));
  EXPECT_EQ(two->remaining, 4);
  auto entries = StreamEntries("coupons");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0]["order_id"], "o1");
  EXPECT_EQ(entries[0]["user_id"], "alice");
  EXPECT_EQ(entries[0]["quantity"], "2");
  EXPECT_EQ(entries[0]["items"], "C1 C2");
  EXPECT_EQ(entries[0]["ts"], "1500");
  EXPECT_EQ(entries[0]["limit"], "2");
  EXPECT_FALSE(entries[0].contains("draw"));
  // As written: the call's write sequence, then one packed field (keyspace/order_stream.h).
  auto raw = server_->Command({"XRANGE", Keys("coupons").stream(), "-", "+"});
  ASSERT_EQ(raw->element[0]->element[1]->elements, 4u);
  EXPECT_STREQ(raw->element[0]->element[1]->element[0]->str, "s");
  EXPECT_STREQ(raw->element[0]->element[1]->element[1]->str, "0.1");
  EXPECT_STREQ(raw->element[0]->element[1]->element[2]->str, "o");
  EXPECT_STREQ(raw->element[0]->element[1]->element[3]->str, "o1|alice|2|1500|2||C1 C2");

  std::multiset<std::string> handed(two->items.begin(), two->items.end());
  for (const char* user : {"bob", "carol", "dave"}) {
    auto one = Reserve("coupons", std::string("o-") + user, user);
    ASSERT_EQ(one->outcome, Outcome::kReserved);
    ASSERT_EQ(one->items.size(), 1u);
    handed.insert(one->items[0]);
  }
  EXPECT_EQ(Reserve("coupons", "o-erin", "erin", 2)->outcome, Outcome::kSoldOut);
  handed.insert(Reserve("coupons", "o-erin2", "erin", 1)->items.at(0));
  EXPECT_EQ(Reserve("coupons", "o-frank", "frank")->outcome, Outcome::kSoldOut);
  // Every coupon handed out exactly once: none lost, none twice (S0-1).
  EXPECT_EQ(handed, (std::multiset<std::string>{"C1", "C2", "C3", "C4", "C5", "C6"}));

  // Released coupons go back to the list and can be sold again.
  auto released = Release("coupons", "o1");
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released->outcome, ReleaseOutcome::kReleased);
  EXPECT_EQ(released->quantity, 2);
  EXPECT_EQ(Status("coupons").remaining, 2);
  auto resold = Reserve("coupons", "o-frank2", "frank", 2);
  EXPECT_EQ(resold->items, (std::vector<std::string>{"C1", "C2"}));
}

TEST_F(SaleTest, ReleaseReturnsUnitsExactlyOnce) {
  ASSERT_TRUE(SetUpActivity(Activity("r", 3)).ok());
  ASSERT_EQ(Reserve("r", "o1", "alice")->outcome, Outcome::kReserved);
  EXPECT_EQ(Status("r").remaining, 2);

  auto first = Release("r", "o1");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->outcome, ReleaseOutcome::kReleased);
  EXPECT_EQ(Status("r").remaining, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Release("r", "o1")->outcome, ReleaseOutcome::kAlreadyReleased);
  }
  EXPECT_EQ(Status("r").remaining, 3);
  EXPECT_EQ(Release("r", "never")->outcome, ReleaseOutcome::kUnknownOrder);

  const auto status = Status("r");
  EXPECT_EQ(status.released, 1);
  EXPECT_EQ(status.total, status.remaining + status.reserved - status.released);
  // The released buyer may buy again.
  EXPECT_EQ(Reserve("r", "o2", "alice")->outcome, Outcome::kReserved);
}

TEST_F(SaleTest, SameOrderIdReplaysTheFirstResult) {
  auto coupons = Activity("rep", 0, 3);
  coupons.kind = core::StockKind::kItemised;
  coupons.items = {"X1", "X2", "X3"};
  ASSERT_TRUE(SetUpActivity(coupons).ok());
  auto first = Reserve("rep", "o1", "alice", 2);
  ASSERT_EQ(first->outcome, Outcome::kReserved);
  for (int i = 0; i < 3; ++i) {
    auto again = Reserve("rep", "o1", "alice", 2);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->outcome, Outcome::kReserved);
    EXPECT_TRUE(again->replayed);
    EXPECT_EQ(again->items, first->items);
  }
  const auto status = Status("rep");
  EXPECT_EQ(status.remaining, 1);
  EXPECT_EQ(status.reserved, 2);
  EXPECT_EQ(status.stream_length, 1);
}

TEST_F(SaleTest, AddStockReopensASoldOutSale) {
  ASSERT_TRUE(SetUpActivity(Activity("add", 1)).ok());
  ASSERT_EQ(Reserve("add", "o1", "alice")->outcome, Outcome::kReserved);
  EXPECT_EQ(Reserve("add", "o2", "bob")->outcome, Outcome::kSoldOut);
  auto added = AddStock("add", 2);
  ASSERT_TRUE(added.ok()) << added.error().ToString();
  EXPECT_TRUE(added->found);
  EXPECT_EQ(added->remaining, 2);
  EXPECT_EQ(added->version, 2);
  EXPECT_EQ(Reserve("add", "o3", "bob")->outcome, Outcome::kReserved);
  EXPECT_EQ(Status("add").total, 3);
  EXPECT_FALSE(AddStock("missing", 1)->found);
  // Counted stock takes no item ids.
  EXPECT_FALSE(AddStock("add", 1, {"Z"}).ok());
}

TEST_F(SaleTest, BadInputIsRefusedBeforeRedis) {
  ASSERT_TRUE(SetUpActivity(Activity("in", 5)).ok());
  const uint64_t sent = io_.Call([&] { return connection_->stats().commands.value(); });
  for (auto result : {Reserve("bad:id", "o1", "alice"), Reserve("in", "o1", "bad user"),
                      Reserve("in", "o1", "alice", 0), Reserve("in", "o 1", "alice"),
                      Reserve("in", "o1", "alice", core::kMaxQuantityPerPurchase + 1)}) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().code, base::ErrorCode::kInvalidArgument) << result.error().message;
  }
  EXPECT_EQ(io_.Call([&] { return connection_->stats().commands.value(); }), sent);
  auto invalid = Activity("in2", 5);
  invalid.end_ms = 0;
  EXPECT_EQ(SetUpActivity(invalid).error().code, base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(Status("in").remaining, 5);
}

TEST_F(SaleTest, StatusOfUnknownActivity) { EXPECT_FALSE(Status("ghost").found); }

TEST_F(SaleTest, ReservationCarriesItsOrderIdAndCounts) {
  ASSERT_TRUE(SetUpActivity(Activity("ids", 5, 5)).ok());
  auto r = Reserve("ids", "order-1", "alice", 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->order_id, "order-1");
  EXPECT_EQ(r->bought, 2);
  EXPECT_EQ(r->remaining, 3);
  auto sold_out = Reserve("ids", "order-2", "bob", 4);
  EXPECT_EQ(sold_out->outcome, Outcome::kSoldOut);
  EXPECT_EQ(sold_out->remaining, 3);
  EXPECT_EQ(sold_out->order_id, "order-2");
}

TEST_F(SaleTest, IdempotencyKeyReturnsTheFirstOutcomeAndOrderId) {
  ASSERT_TRUE(SetUpActivity(Activity("idem", 2)).ok());
  auto first = Reserve("idem", "first-order", "alice", 1, 1500, "tokenA");
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  ASSERT_EQ(first->outcome, Outcome::kReserved);
  EXPECT_FALSE(first->replayed);
  // The retry comes with a new order id (a new request); it gets the first one back.
  auto retry = Reserve("idem", "second-order", "alice", 1, 1500, "tokenA");
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->outcome, Outcome::kReserved);
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->order_id, "first-order");
  EXPECT_EQ(Status("idem").reserved, 1);

  // A refusal is not kept (it took nothing; fresh keys must not fill Redis): the retry of a
  // refused request is decided again, as what Redis decides now.
  ASSERT_EQ(Reserve("idem", "o-b", "bob")->outcome, Outcome::kReserved);
  auto refused = Reserve("idem", "o-c1", "carol", 1, 1500, "tokenC");
  EXPECT_EQ(refused->outcome, Outcome::kSoldOut);
  EXPECT_EQ(server_->Integer({"EXISTS", Keys("idem").Idempotency("tokenC")}), 0);
  EXPECT_EQ(Reserve("idem", "o-c2", "carol", 1, 1500, "tokenC")->outcome, Outcome::kSoldOut);
  ASSERT_TRUE(AddStock("idem", 5).ok());
  auto decided_again = Reserve("idem", "o-c3", "carol", 1, 1500, "tokenC");
  EXPECT_EQ(decided_again->outcome, Outcome::kReserved);
  EXPECT_FALSE(decided_again->replayed);
  EXPECT_EQ(decided_again->order_id, "o-c3");
  // Now kept: the next retry replays that reservation.
  EXPECT_EQ(Reserve("idem", "o-c4", "carol", 1, 1500, "tokenC")->order_id, "o-c3");
  // A new key is a new request.
  EXPECT_EQ(Reserve("idem", "o-d1", "dave", 1, 1500, "tokenD")->outcome, Outcome::kReserved);
  // The record expires with its TTL.
  const auto ttl = server_->Integer({"PTTL", Keys("idem").Idempotency("tokenA")});
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 60000);
}

TEST_F(SaleTest, UserOrdersReadBackWhatWasReserved) {
  auto coupons = Activity("uo", 0, 3);
  coupons.kind = core::StockKind::kItemised;
  coupons.items = {"K1", "K2", "K3", "K4"};
  ASSERT_TRUE(SetUpActivity(coupons).ok());
  ASSERT_EQ(Reserve("uo", "o1", "alice", 2, 1500)->outcome, Outcome::kReserved);
  ASSERT_EQ(Reserve("uo", "o2", "bob", 1, 1600)->outcome, Outcome::kReserved);
  ASSERT_EQ(Reserve("uo", "o3", "alice", 1, 1700)->outcome, Outcome::kReserved);
  ASSERT_EQ(Release("uo", "o3")->outcome, ReleaseOutcome::kReleased);

  auto orders = UserOrders("uo", "alice");
  ASSERT_TRUE(orders.ok()) << orders.error().ToString();
  ASSERT_EQ(orders->size(), 2u);
  EXPECT_EQ((*orders)[0].order_id, "o1");
  EXPECT_EQ((*orders)[0].quantity, 2);
  EXPECT_EQ((*orders)[0].created_ms, 1500);
  EXPECT_EQ((*orders)[0].items, (std::vector<std::string>{"K1", "K2"}));
  EXPECT_FALSE((*orders)[0].released);
  EXPECT_EQ((*orders)[1].order_id, "o3");
  EXPECT_TRUE((*orders)[1].released);
  auto none = UserOrders("uo", "nobody");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// A batch's intents are one stream entry: a user's orders in it are found, in their order, before
// and after entries of single calls.
TEST_F(SaleTest, UserOrdersFindTheOrdersOfABatchEntryInTheirOrder) {
  ASSERT_TRUE(SetUpActivity(Activity("ub", 100, 5)).ok());
  ASSERT_EQ(Reserve("ub", "first", "alice", 1, 1400)->outcome, Outcome::kReserved);
  const std::vector<ReserveRequest> batch = {
      {.order_id = "b1", .user_id = "alice", .quantity = 1, .now_ms = 1500},
      {.order_id = "b2", .user_id = "bob", .quantity = 1, .now_ms = 1500},
      {.order_id = "b3", .user_id = "alice", .quantity = 2, .now_ms = 1500}};
  auto results = io_.Run(scripts_->AsyncReserveBatch("ub", std::span<const ReserveRequest>(batch),
                                                     boost::asio::use_awaitable));
  ASSERT_TRUE(results.ok()) << results.error().ToString();
  ASSERT_EQ(server_->Integer({"XLEN", Keys("ub").stream()}), 2);
  ASSERT_EQ(Reserve("ub", "last", "alice", 1, 1600)->outcome, Outcome::kReserved);

  auto orders = UserOrders("ub", "alice");
  ASSERT_TRUE(orders.ok()) << orders.error().ToString();
  std::vector<std::string> ids;
  for (const auto& order : *orders) ids.push_back(order.order_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"first", "b1", "b3", "last"}));
  // The record has the batch's alice orders already: the rest is found and nothing twice.
  PersistedOrders persisted;
  persisted.live_units = 3;
  persisted.order_ids = {"b1", "b3"};
  auto rest = UserOrders("ub", "alice", persisted);
  ASSERT_TRUE(rest.ok()) << rest.error().ToString();
  ids.clear();
  for (const auto& order : *rest) ids.push_back(order.order_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"first", "last"}));
  auto bob = UserOrders("ub", "bob");
  ASSERT_TRUE(bob.ok());
  ASSERT_EQ(bob->size(), 1u);
  EXPECT_EQ((*bob)[0].order_id, "b2");
}

// GET /api/v1/orders reads a user's orders from the stream for every activity, and the stream is
// the pipeline's whole backlog: it is read only as far as the user's unpersisted units need.
TEST_F(SaleTest, UserOrdersReadOnlyAsMuchOfTheStreamAsNeeded) {
  ASSERT_TRUE(SetUpActivity(Activity("scan", 5000)).ok());
  for (int i = 0; i < 600; ++i) {
    ASSERT_EQ(Reserve("scan", "old" + std::to_string(i), "u" + std::to_string(i))->outcome,
              Outcome::kReserved);
  }
  ASSERT_EQ(Reserve("scan", "mine", "alice")->outcome, Outcome::kReserved);
  for (int i = 0; i < 600; ++i) {
    ASSERT_EQ(Reserve("scan", "new" + std::to_string(i), "v" + std::to_string(i))->outcome,
              Outcome::kReserved);
  }
  ASSERT_EQ(server_->String({"CONFIG", "RESETSTAT"}), "OK");

  // Someone who bought nothing: the stream is not read.
  auto nobody = UserOrders("scan", "nobody");
  ASSERT_TRUE(nobody.ok()) << nobody.error().ToString();
  EXPECT_TRUE(nobody->empty());
  EXPECT_EQ(StreamReads(), 0);

  // A buyer: read from the newest entry back until the order is found (600 newer entries, in
  // chunks of 256: three reads), not through the 600 older ones.
  auto alice = UserOrders("scan", "alice");
  ASSERT_TRUE(alice.ok()) << alice.error().ToString();
  ASSERT_EQ(alice->size(), 1u);
  EXPECT_EQ((*alice)[0].order_id, "mine");
  EXPECT_EQ(StreamReads(), 3);

  // The record has it: nothing is pending, nothing read, nothing reported twice.
  auto persisted = UserOrders("scan", "alice", {.live_units = 1, .order_ids = {"mine"}});
  ASSERT_TRUE(persisted.ok());
  EXPECT_TRUE(persisted->empty());
  EXPECT_EQ(StreamReads(), 3);

  // A record that has the order as cancelled (its unit not yet back in Redis): the stream is
  // read, and the order, which the record reports, is skipped.
  auto cancelled = UserOrders("scan", "alice", {.live_units = 0, .order_ids = {"mine"}});
  ASSERT_TRUE(cancelled.ok());
  EXPECT_TRUE(cancelled->empty());
  EXPECT_GT(StreamReads(), 3);
}

// The idempotency records of an activity that name an order, on a single server (the server is
// its own one "primary": Connection::Primaries), over several SCAN pages; other activities'
// records are not reported.
TEST_F(SaleTest, IdempotentOrderIdsOnASingleServer) {
  std::set<std::string> expected;
  std::vector<std::string> set = {"MSET"};
  for (int i = 0; i < 2500; ++i) {
    const std::string order_id = fmt::format("o{}", i);
    set.push_back(Keys("told").Idempotency(fmt::format("t{}", i)));
    set.push_back(i % 4 == 3 ? "0|busy" : "1|0|" + order_id);
    if (i % 4 != 3) expected.insert(order_id);
  }
  set.push_back(Keys("other").Idempotency("t1"));
  set.push_back("1|0|not-mine");
  server_->Command(set);
  auto nodes = io_.Run(
      connection_->AsyncPrimaries(connection_->DefaultDeadline(), boost::asio::use_awaitable));
  ASSERT_TRUE(nodes.ok()) << nodes.error().ToString();
  ASSERT_EQ(nodes->size(), 1u);
  ActivityInspector inspector(*runner_, ns_);
  auto found = io_.Run(inspector.IdempotentOrderIds("told"));
  ASSERT_TRUE(found.ok()) << found.error().ToString();
  EXPECT_EQ(std::set<std::string>(found->begin(), found->end()), expected);
  EXPECT_EQ(found->size(), expected.size());
}

TEST(OrderRecordTest, ParsesAndRejects) {
  auto order = ParseOrderRecord("o1", "R|alice|2|1500|A B");
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(order->quantity, 2);
  EXPECT_EQ(order->items, (std::vector<std::string>{"A", "B"}));
  EXPECT_TRUE(ParseOrderRecord("o2", "X|bob|1|9|")->released);
  for (const char* bad : {"", "R|a", "Q|a|1|2|", "R|a|x|2|", "R|a|1|y|"}) {
    EXPECT_FALSE(ParseOrderRecord("o", bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace flashsale::keyspace
