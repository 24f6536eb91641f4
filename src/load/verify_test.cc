#include "load/verify.h"

#include <gtest/gtest.h>

namespace flashsale::load {
namespace {

// A sale of 10 units: 4 reserved, 1 of them released; the database level with Redis.
SaleFacts Consistent() {
  SaleFacts facts;
  facts.status.found = true;
  facts.status.total = 10;
  facts.status.remaining = 7;
  facts.status.reserved = 4;
  facts.status.released = 1;
  facts.status.orders = 4;
  facts.status.per_user_limit = 1;
  facts.drained = true;
  facts.counts = {.orders = 4, .units = 3, .cancelled_units = 1};
  return facts;
}

VerifyOptions Options() {
  VerifyOptions options;
  options.activity = "a";
  options.reserved_replies = 4;
  options.reserved_order_ids = {"o1", "o2", "o3", "o4"};
  return options;
}

const VerifyCheck& Named(const Verification& v, std::string_view name) {
  for (const auto& check : v.checks) {
    if (check.name == name) return check;
  }
  throw std::out_of_range(std::string(name));
}

TEST(CheckSaleTest, AConsistentSalePassesEveryCheck) {
  const Verification v = CheckSale(Options(), Consistent());
  EXPECT_EQ(v.checks.size(), 8u);
  EXPECT_TRUE(v.ok()) << v.Failed();
  EXPECT_EQ(Named(v, "redis stock").detail,
            "10 units loaded, 7 remaining, 3 sold (4 reserved - 1 released)");
  EXPECT_EQ(Named(v, "per-user limit").detail, "limit 1: nobody above");
}

TEST(CheckSaleTest, EachFindingFailsItsOwnCheck) {
  SaleFacts facts = Consistent();
  facts.counts.units = 2;  // one unit sold in Redis is not in the database
  facts.audit.users_over_limit = {{"bob", 2}};
  facts.audit.duplicate_intents = 1;
  facts.pipeline.dead_letters = 1;
  facts.missing = 2;
  facts.missing_example = "o3";
  VerifyOptions options = Options();
  options.reserved_order_ids.push_back("o1");  // an order id told twice
  const Verification v = CheckSale(options, facts);
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.Failed(),
            "reserved replies, dead letters, db units, per-user limit, duplicate orders, lost "
            "intents");
  EXPECT_EQ(Named(v, "per-user limit").detail, "limit 1: bob holds 2;");
  EXPECT_EQ(Named(v, "lost intents").detail,
            "2 of 5 reserved order ids not in the database (e.g. o3)");
}

TEST(CheckSaleTest, MoreReservedRepliesThanRedisSoldFail) {
  VerifyOptions options = Options();
  options.reserved_replies = 5;
  SaleFacts facts = Consistent();
  facts.drained = false;
  const Verification v = CheckSale(options, facts);
  EXPECT_EQ(v.Failed(), "reserved replies, pipeline drained");
}

// A lottery with a no-prize weight: Redis records every draw (a draw that won nothing too, so
// that a retry replays it), the database only the wins. 300 draws, 89 of them won a unit.
TEST(CheckSaleTest, ALotterysDrawsThatWonNothingAreNotLookedForInTheDatabase) {
  SaleFacts facts;
  facts.status.found = true;
  facts.status.kind = "lottery";
  facts.status.total = 100;
  facts.status.remaining = 11;
  facts.status.reserved = 89;
  facts.status.orders = 300;
  facts.status.per_user_limit = 1;
  facts.no_prize_records = 211;
  facts.drained = true;
  facts.counts = {.orders = 89, .units = 89, .cancelled_units = 0};
  VerifyOptions options;
  options.activity = "raffle";
  options.reserved_replies = 89;
  const Verification v = CheckSale(options, facts);
  EXPECT_TRUE(v.ok()) << FormatVerification(v);
  EXPECT_EQ(Named(v, "db units").detail,
            "database: 89 rows, 89 live units, 0 cancelled; Redis: 89 order records (and 211 draws "
            "that won nothing, which the database does not keep), 89 units sold, 0 released");

  // A win the database lacks is still a finding.
  facts.counts = {.orders = 88, .units = 88, .cancelled_units = 0};
  EXPECT_EQ(CheckSale(options, facts).Failed(), "db units");
}

}  // namespace
}  // namespace flashsale::load
