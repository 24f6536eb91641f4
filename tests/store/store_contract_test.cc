// One contract for every Store backend: each test runs against each backend in the list
// (SQLite in a temporary file; MariaDB joins with the order pipeline).

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>

#include "store/sqlite_store.h"

namespace flashsale::store {
namespace {

using base::ErrorCode;

struct Backend {
  std::string name;
  std::function<std::unique_ptr<Store>(const std::string& dir)> open;
};

std::vector<Backend> Backends() {
  return {{"sqlite", [](const std::string& dir) -> std::unique_ptr<Store> {
             auto store = SqliteStore::Open(dir + "/flashsale.db");
             if (!store) throw std::runtime_error(store.error().ToString());
             return std::move(*store);
           }}};
}

class StoreContractTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    std::string templ =
        (std::filesystem::temp_directory_path() / "flashsale-store-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    store_ = GetParam().open(dir_);
    auto migrated = store_->Migrate();
    ASSERT_TRUE(migrated.ok()) << migrated.error().ToString();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  static core::SeckillActivity Counted(std::string id) {
    core::SeckillActivity a;
    a.id = std::move(id);
    a.title = "A phone";
    a.start_ms = 1000;
    a.end_ms = 2000;
    a.per_user_limit = 2;
    a.stock = 10;
    return a;
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContractTest, MigrateIsIdempotentAndVersioned) {
  auto version = store_->SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_GE(*version, 1);
  ASSERT_TRUE(store_->Migrate().ok());
  EXPECT_EQ(*store_->SchemaVersion(), *version);
  EXPECT_TRUE(store_->Ping().ok());
}

TEST_P(StoreContractTest, CreateGetListRoundTrip) {
  auto a = Counted("phone");
  a.user_rate = {5.5, 3};
  auto created = store_->CreateActivity(a, 42);
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  EXPECT_EQ(created->version, 1);
  EXPECT_EQ(created->total_units, 10);
  EXPECT_EQ(created->created_ms, 42);

  auto got = store_->GetActivity("phone", true);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->activity.title, "A phone");
  EXPECT_EQ(got->activity.start_ms, 1000);
  EXPECT_EQ(got->activity.end_ms, 2000);
  EXPECT_EQ(got->activity.per_user_limit, 2);
  EXPECT_EQ(got->activity.stock, 10);
  EXPECT_TRUE(got->activity.open);
  EXPECT_DOUBLE_EQ(got->activity.user_rate.per_second, 5.5);
  EXPECT_EQ(got->activity.user_rate.burst, 3);
  EXPECT_FALSE(got->activity.address_rate.enabled());

  auto coupons = Counted("coupons");
  coupons.kind = core::StockKind::kItemised;
  coupons.stock = 0;
  coupons.items = {"C1", "C2", "C3"};
  ASSERT_TRUE(store_->CreateActivity(coupons, 43).ok());
  auto with_items = store_->GetActivity("coupons", true);
  ASSERT_TRUE(with_items.ok());
  EXPECT_EQ(with_items->activity.items, (std::vector<std::string>{"C1", "C2", "C3"}));
  EXPECT_EQ(with_items->total_units, 3);
  EXPECT_TRUE(store_->GetActivity("coupons", false)->activity.items.empty());

  auto list = store_->ListActivities();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].activity.id, "phone");
  EXPECT_EQ((*list)[1].activity.id, "coupons");
}

TEST_P(StoreContractTest, ErrorsAreValues) {
  EXPECT_EQ(store_->GetActivity("ghost", false).error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(store_->CreateActivity(Counted("dup"), 1).ok());
  auto again = store_->CreateActivity(Counted("dup"), 2);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  auto invalid = Counted("bad");
  invalid.end_ms = invalid.start_ms;
  EXPECT_EQ(store_->CreateActivity(invalid, 1).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->GetActivity("bad", false).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store_->UpdateActivity("ghost", {}, 1).error().code, ErrorCode::kNotFound);
}

TEST_P(StoreContractTest, UpdateChangesOnlyWhatIsSetAndBumpsTheVersion) {
  ASSERT_TRUE(store_->CreateActivity(Counted("u"), 1).ok());
  ActivityUpdate update;
  update.open = false;
  update.end_ms = 5000;
  auto updated = store_->UpdateActivity("u", update, 7);
  ASSERT_TRUE(updated.ok()) << updated.error().ToString();
  EXPECT_FALSE(updated->activity.open);
  EXPECT_EQ(updated->activity.end_ms, 5000);
  EXPECT_EQ(updated->activity.start_ms, 1000);
  EXPECT_EQ(updated->activity.title, "A phone");
  EXPECT_EQ(updated->version, 2);
  EXPECT_EQ(updated->updated_ms, 7);

  ActivityUpdate invalid;
  invalid.per_user_limit = 0;
  EXPECT_EQ(store_->UpdateActivity("u", invalid, 8).error().code, ErrorCode::kInvalidArgument);
  auto unchanged = store_->GetActivity("u", false);
  EXPECT_EQ(unchanged->activity.per_user_limit, 2);
  EXPECT_EQ(unchanged->version, 2);
}

TEST_P(StoreContractTest, AddStock) {
  ASSERT_TRUE(store_->CreateActivity(Counted("c"), 1).ok());
  auto added = store_->AddStock("c", 5, {}, 2);
  ASSERT_TRUE(added.ok()) << added.error().ToString();
  EXPECT_EQ(added->total_units, 15);
  EXPECT_EQ(added->activity.stock, 15);
  EXPECT_EQ(added->version, 2);
  EXPECT_EQ(store_->AddStock("c", 0, {}, 3).error().code, ErrorCode::kInvalidArgument);
  std::vector<std::string> ids = {"X"};
  EXPECT_EQ(store_->AddStock("c", 1, ids, 3).error().code, ErrorCode::kInvalidArgument);

  auto items = Counted("i");
  items.kind = core::StockKind::kItemised;
  items.stock = 0;
  items.items = {"A", "B"};
  ASSERT_TRUE(store_->CreateActivity(items, 1).ok());
  std::vector<std::string> more = {"C", "D"};
  auto with_more = store_->AddStock("i", 2, more, 2);
  ASSERT_TRUE(with_more.ok()) << with_more.error().ToString();
  EXPECT_EQ(with_more->total_units, 4);
  // An id the activity has already: refused, nothing added.
  std::vector<std::string> clash = {"E", "A"};
  EXPECT_EQ(store_->AddStock("i", 2, clash, 3).error().code, ErrorCode::kAlreadyExists);
  auto after = store_->GetActivity("i", true);
  EXPECT_EQ(after->activity.items, (std::vector<std::string>{"A", "B", "C", "D"}));
  EXPECT_EQ(after->total_units, 4);
}

TEST_P(StoreContractTest, SurvivesReopen) {
  ASSERT_TRUE(store_->CreateActivity(Counted("kept"), 1).ok());
  store_ = GetParam().open(dir_);
  ASSERT_TRUE(store_->Migrate().ok());
  EXPECT_TRUE(store_->GetActivity("kept", false).ok());
}

OrderRecord Order(std::string id, std::string user, bool single_unit = true, int64_t created = 1) {
  OrderRecord order;
  order.order_id = std::move(id);
  order.activity_id = "act";
  order.user_id = std::move(user);
  order.quantity = 1;
  order.single_unit = single_unit;
  order.created_ms = created;
  order.stream_id = "1-" + order.order_id;
  return order;
}

TEST_P(StoreContractTest, InsertOrdersIsIdempotentAndCatchesADoubleSale) {
  std::vector<OrderRecord> batch = {Order("o1", "alice"), Order("o2", "bob")};
  batch[1].items = {"C1", "C2"};
  batch[1].quantity = 2;
  auto first = store_->InsertOrders(batch, 100);
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_EQ(*first,
            (std::vector<InsertOutcome>{InsertOutcome::kInserted, InsertOutcome::kInserted}));

  // A redelivery of the same batch writes nothing new.
  auto again = store_->InsertOrders(batch, 200);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again,
            (std::vector<InsertOutcome>{InsertOutcome::kDuplicate, InsertOutcome::kDuplicate}));

  // Another order of alice in this limit-1 activity: refused, reported, not silently dropped.
  std::vector<OrderRecord> second = {Order("o3", "alice"), Order("o4", "carol", false)};
  auto clash = store_->InsertOrders(second, 300);
  ASSERT_TRUE(clash.ok());
  EXPECT_EQ(*clash,
            (std::vector<InsertOutcome>{InsertOutcome::kConflict, InsertOutcome::kInserted}));
  EXPECT_EQ(store_->GetOrder("o3").error().code, ErrorCode::kNotFound);

  auto o2 = store_->GetOrder("o2");
  ASSERT_TRUE(o2.ok());
  EXPECT_EQ(o2->user_id, "bob");
  EXPECT_EQ(o2->quantity, 2);
  EXPECT_EQ(o2->items, (std::vector<std::string>{"C1", "C2"}));
  EXPECT_EQ(o2->state, OrderState::kReserved);
  EXPECT_EQ(o2->persisted_ms, 100);
  EXPECT_EQ(o2->stream_id, "1-o2");

  auto counts = store_->CountOrders("act");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->orders, 3);
  EXPECT_EQ(counts->units, 4);
  EXPECT_EQ(store_->CountOrders("other")->orders, 0);
}

TEST_P(StoreContractTest, ACancelledOrderFreesTheUsersSlot) {
  auto cancelled = Order("c1", "dave");
  cancelled.state = OrderState::kCancelled;
  ASSERT_TRUE(store_->InsertOrders(std::vector<OrderRecord>{cancelled}, 1).ok());
  auto rebuy = store_->InsertOrders(std::vector<OrderRecord>{Order("c2", "dave")}, 2);
  ASSERT_TRUE(rebuy.ok());
  EXPECT_EQ((*rebuy)[0], InsertOutcome::kInserted);
  auto counts = store_->CountOrders("act");
  EXPECT_EQ(counts->units, 1);
  EXPECT_EQ(counts->cancelled_units, 1);
}

TEST_P(StoreContractTest, OrdersOfUserNewestFirst) {
  std::vector<OrderRecord> batch = {Order("a", "erin", false, 10), Order("b", "erin", false, 30),
                                    Order("c", "erin", false, 20), Order("d", "frank", false, 5)};
  ASSERT_TRUE(store_->InsertOrders(batch, 1).ok());
  auto orders = store_->OrdersOfUser("erin", 10);
  ASSERT_TRUE(orders.ok());
  ASSERT_EQ(orders->size(), 3u);
  EXPECT_EQ((*orders)[0].order_id, "b");
  EXPECT_EQ((*orders)[1].order_id, "c");
  EXPECT_EQ((*orders)[2].order_id, "a");
  EXPECT_EQ(store_->OrdersOfUser("erin", 2)->size(), 2u);
  EXPECT_TRUE(store_->OrdersOfUser("nobody", 10)->empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace flashsale::store
