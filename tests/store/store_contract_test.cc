// One contract for every Store backend: each test runs against each backend in the list (SQLite
// in a temporary file; MariaDB in a database of its own on a real mariadbd that the binary shares),
// then tests of what only the MySQL/MariaDB store has: its URL, a server that dies and comes back,
// two processes writing the same orders at once.
//
// Built a second time as galera_store_integration_test (FLASHSALE_STORE_ON_GALERA): the contract on
// a 3-node MariaDB Galera cluster (scripts/galera.sh; each test's store on one of the nodes), and
// the tests of two writers at once with the writers on two different nodes, where a clash is a
// certification conflict instead of a lock wait.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "store/mysql/store.h"
#include "store/records.h"
#include "store/sqlite_store.h"
#include "support/galera_cluster.h"
#include "support/mariadb_server.h"

// Failure messages show a write sequence as {epoch, seq}.
namespace flashsale::core {
void PrintTo(const WriteSeq& written, std::ostream* os) {
  *os << '{' << written.epoch << ", " << written.seq << '}';
}
}  // namespace flashsale::core

namespace flashsale::store {
namespace {

using base::ErrorCode;
using flashsale::testing::MariaDbServer;

#ifndef FLASHSALE_STORE_ON_GALERA
// One MariaDB server for the whole binary: started on first use (a run filtered to SQLite never
// starts one), stopped at exit. A server that fails to start is reported by every test that needs
// it, without trying again.
MariaDbServer& SharedMariaDb() {
  static std::string failure;
  static std::unique_ptr<MariaDbServer> server = []() -> std::unique_ptr<MariaDbServer> {
    try {
      return std::make_unique<MariaDbServer>();
    } catch (const std::exception& e) {
      failure = e.what();
      return nullptr;
    }
  }();
  if (!server) throw std::runtime_error("the shared MariaDB server did not start: " + failure);
  return *server;
}
#endif

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

[[maybe_unused]] bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::unique_ptr<MySqlStore> OpenMySql(const std::string& url) {
  auto store = MySqlStore::Open(url);
  if (!store) throw std::runtime_error(store.error().ToString());
  return std::move(*store);
}

struct Backend {
  std::string name;
  std::function<std::unique_ptr<Store>(const std::string& dir)> open;
};

// Test names and messages show the backend's name (not the bytes of the struct).
void PrintTo(const Backend& backend, std::ostream* os) { *os << backend.name; }

#ifdef FLASHSALE_STORE_ON_GALERA
using flashsale::testing::GaleraCluster;

// One cluster for the whole binary, as SharedMariaDb.
GaleraCluster& SharedGalera() {
  static std::string failure;
  static std::unique_ptr<GaleraCluster> cluster = []() -> std::unique_ptr<GaleraCluster> {
    try {
      return std::make_unique<GaleraCluster>();
    } catch (const std::exception& e) {
      failure = e.what();
      return nullptr;
    }
  }();
  if (!cluster) throw std::runtime_error("the shared Galera cluster did not start: " + failure);
  return *cluster;
}

std::vector<Backend> Backends() {
  return {{"galera", [](const std::string& dir) -> std::unique_ptr<Store> {
             // A database per test, through the nodes in turn; remembered as for "mariadb".
             static int tests = 0;
             const std::string file = dir + "/mariadb-url";
             std::string url = ReadFile(file);
             if (url.empty()) {
               GaleraCluster& cluster = SharedGalera();
               url = cluster.url(tests++ % GaleraCluster::kNodes + 1, cluster.UniqueDatabase());
               std::ofstream(file) << url;
             }
             return OpenMySql(url);
           }}};
}

// Two writers of one database: on two different nodes.
struct TwoWriters {
  std::string first_url;
  std::string second_url;
  std::string database;
  std::string Scalar(const std::string& sql) const {
    return SharedGalera().Scalar(1, sql, database);
  }
  void Exec(const std::string& sql) const { SharedGalera().Query(1, sql, database); }
};
TwoWriters NewTwoWriters() {
  GaleraCluster& cluster = SharedGalera();
  const std::string database = cluster.UniqueDatabase();
  return {cluster.url(1, database), cluster.url(2, database), database};
}
#else
std::vector<Backend> Backends() {
  return {{"sqlite",
           [](const std::string& dir) -> std::unique_ptr<Store> {
             auto store = SqliteStore::Open(dir + "/flashsale.db");
             if (!store) throw std::runtime_error(store.error().ToString());
             return std::move(*store);
           }},
          {"mariadb", [](const std::string& dir) -> std::unique_ptr<Store> {
             // The test's directory remembers its database: opening again (SurvivesReopen) finds
             // the same one.
             const std::string file = dir + "/mariadb-url";
             std::string url = ReadFile(file);
             if (url.empty()) {
               url = SharedMariaDb().UniqueDatabase();
               std::ofstream(file) << url;
             }
             return OpenMySql(url);
           }}};
}

// Two writers of one database: on the one server.
struct TwoWriters {
  std::string first_url;
  std::string second_url;
  std::string database;
  std::string Scalar(const std::string& sql) const { return SharedMariaDb().Scalar(sql, database); }
  void Exec(const std::string& sql) const { SharedMariaDb().Query(sql, database); }
};
TwoWriters NewTwoWriters() {
  const std::string url = SharedMariaDb().UniqueDatabase();
  return {url, url, ParseMySqlUrl(url)->database};
}
#endif

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

  static core::Activity Counted(std::string id) {
    core::Activity a;
    a.id = std::move(id);
    a.title = "A phone";
    a.start_ms = 1000;
    a.end_ms = 2000;
    a.per_user_limit = 2;
    a.stock = 10;
    return a;
  }

  // Runs one SQL statement on the test's database behind the store's back (as an operator would).
  void ExecRaw(const std::string& sql) {
    if (GetParam().name == "sqlite") {
      sqlite3* db = nullptr;
      ASSERT_EQ(sqlite3_open((dir_ + "/flashsale.db").c_str(), &db), SQLITE_OK);
      char* message = nullptr;
      const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
      const std::string text = message ? message : "";
      sqlite3_free(message);
      sqlite3_close(db);
      ASSERT_EQ(rc, SQLITE_OK) << text;
      return;
    }
    const std::string database = ParseMySqlUrl(ReadFile(dir_ + "/mariadb-url"))->database;
#ifdef FLASHSALE_STORE_ON_GALERA
    SharedGalera().Query(1, sql, database);
#else
    SharedMariaDb().Query(sql, database);
#endif
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
  a.payment_window_ms = 900'000;
  a.webhook_urls = {"http://127.0.0.1:9000/hook", "http://pay.internal/events?x=1"};
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
  EXPECT_EQ(got->activity.payment_window_ms, 900'000);
  EXPECT_EQ(got->activity.webhook_urls, a.webhook_urls);
  EXPECT_FALSE(got->activity.address_rate.enabled());
  // An update replaces them; none is an empty list.
  auto changed = store_->UpdateActivity(
      "phone", {.webhook_urls = std::vector<std::string>{"http://other/hook"}}, 43);
  ASSERT_TRUE(changed.ok()) << changed.error().ToString();
  EXPECT_EQ(changed->activity.webhook_urls, (std::vector<std::string>{"http://other/hook"}));
  auto cleared = store_->UpdateActivity("phone", {.webhook_urls = std::vector<std::string>{}}, 44);
  ASSERT_TRUE(cleared.ok());
  EXPECT_TRUE(store_->GetActivity("phone", false)->activity.webhook_urls.empty());
  // The waiting room (issue 37): none by default, set, changed and turned off by an update.
  EXPECT_FALSE(store_->GetActivity("phone", false)->activity.waiting_room.has_value());
  const core::WaitingRoom room{600'000, 50, 120'000, 10'000};
  auto roomed =
      store_->UpdateActivity("phone", {.waiting_room = std::optional<core::WaitingRoom>(room)}, 45);
  ASSERT_TRUE(roomed.ok()) << roomed.error().ToString();
  ASSERT_TRUE(store_->GetActivity("phone", false)->activity.waiting_room.has_value());
  EXPECT_EQ(*store_->GetActivity("phone", false)->activity.waiting_room, room);
  auto unroomed =
      store_->UpdateActivity("phone", {.waiting_room = std::optional<core::WaitingRoom>()}, 46);
  ASSERT_TRUE(unroomed.ok()) << unroomed.error().ToString();
  EXPECT_FALSE(store_->GetActivity("phone", false)->activity.waiting_room.has_value());
  auto with_room = Counted("roomed");
  with_room.waiting_room = core::WaitingRoom{0, 7, 1'000, 1};
  ASSERT_TRUE(store_->CreateActivity(with_room, 47).ok());
  EXPECT_EQ(*store_->GetActivity("roomed", false)->activity.waiting_room, *with_room.waiting_room);

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
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].activity.id, "phone");
  EXPECT_EQ((*list)[1].activity.id, "coupons");
  EXPECT_EQ((*list)[2].activity.id, "roomed");
  ASSERT_TRUE((*list)[2].activity.waiting_room.has_value());  // as the list reads it too
  EXPECT_EQ((*list)[2].activity.waiting_room->admit_per_s, 7);
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

// One batch holding an intent twice (claimed and read again), a double sale and new orders, in
// batches one after another on the same connection: each row written once, with its own values.
TEST_P(StoreContractTest, InsertOrdersDecidesEveryRowOfConsecutiveBatches) {
  std::vector<OrderRecord> first = {Order("o1", "alice"), Order("o1", "alice"),
                                    Order("o2", "alice"), Order("o3", "bob", false, 7)};
  first[3].items = {"X9"};
  auto written = store_->InsertOrders(first, 10);
  ASSERT_TRUE(written.ok()) << written.error().ToString();
  EXPECT_EQ(*written,
            (std::vector<InsertOutcome>{InsertOutcome::kInserted, InsertOutcome::kDuplicate,
                                        InsertOutcome::kConflict, InsertOutcome::kInserted}));
  std::vector<OrderRecord> second = {Order("o4", "carol", true, 8), Order("o3", "bob", false, 7)};
  auto next = store_->InsertOrders(second, 20);
  ASSERT_TRUE(next.ok()) << next.error().ToString();
  EXPECT_EQ(*next,
            (std::vector<InsertOutcome>{InsertOutcome::kInserted, InsertOutcome::kDuplicate}));
  auto o3 = store_->GetOrder("o3");
  ASSERT_TRUE(o3.ok());
  EXPECT_EQ(o3->user_id, "bob");
  EXPECT_EQ(o3->items, (std::vector<std::string>{"X9"}));
  EXPECT_EQ(o3->persisted_ms, 10);
  auto o4 = store_->GetOrder("o4");
  ASSERT_TRUE(o4.ok());
  EXPECT_EQ(o4->user_id, "carol");
  EXPECT_TRUE(o4->items.empty());
  EXPECT_EQ(o4->created_ms, 8);
  EXPECT_EQ(o4->persisted_ms, 20);
  EXPECT_EQ(o4->stream_id, "1-o4");
  EXPECT_EQ(store_->GetOrder("o2").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store_->CountOrders("act")->orders, 3);
}

TEST_P(StoreContractTest, DeleteRemovesOnlyAnActivityThatSoldNothing) {
  auto items = Counted("empty");
  items.kind = core::StockKind::kItemised;
  items.stock = 0;
  items.items = {"A", "B"};
  ASSERT_TRUE(store_->CreateActivity(items, 1).ok());
  ASSERT_TRUE(store_->CreateActivity(Counted("act"), 1).ok());
  const std::vector<OrderRecord> sold = {Order("o1", "alice")};
  ASSERT_TRUE(store_->InsertOrders(sold, 2).ok());

  auto deleted = store_->DeleteActivity("empty");
  ASSERT_TRUE(deleted.ok()) << deleted.error().ToString();
  EXPECT_EQ(store_->GetActivity("empty", true).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store_->DeleteActivity("empty").error().code, ErrorCode::kNotFound);
  // Its items went with it: the same id can be created again with the same item ids.
  ASSERT_TRUE(store_->CreateActivity(items, 3).ok());

  auto refused = store_->DeleteActivity("act");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("1 order"), std::string::npos) << refused.error().message;
  EXPECT_TRUE(store_->GetActivity("act", false).ok());
  EXPECT_EQ(store_->ListActivities()->size(), 2u);
}

// The fence of the lost-write repair: a batch read under an older epoch is refused inside the
// insert's transaction, nothing of it written; under the current epoch it goes in.
TEST_P(StoreContractTest, AFencedBatchIsRefusedAfterTheFenceAdvanced) {
  auto before = store_->AdvanceFence();
  ASSERT_TRUE(before.ok()) << before.error().ToString();
  const std::vector<OrderRecord> early = {Order("f1", "alice")};
  auto written = store_->InsertOrders(early, 100, *before);
  ASSERT_TRUE(written.ok()) << written.error().ToString();
  EXPECT_EQ(*written, std::vector<InsertOutcome>{InsertOutcome::kInserted});

  auto after = store_->AdvanceFence();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *before + 1);
  EXPECT_EQ(*store_->ReadFence(), *after);
  const std::vector<OrderRecord> held = {Order("f2", "bob"), Order("f3", "carol")};
  auto stale = store_->InsertOrders(held, 200, *before);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, ErrorCode::kFailedPrecondition) << stale.error().ToString();
  EXPECT_EQ(stale.error().detail, base::ErrorDetail::kFenced) << "what the order consumer reads";
  EXPECT_EQ(store_->GetOrder("f2").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store_->GetOrder("f3").error().code, ErrorCode::kNotFound);

  auto current = store_->InsertOrders(held, 300, *after);
  ASSERT_TRUE(current.ok()) << current.error().ToString();
  EXPECT_EQ(store_->CountOrders("act")->orders, 3);
  // Without a fence (tests, tools): no check.
  EXPECT_TRUE(store_->InsertOrders(std::vector<OrderRecord>{Order("f4", "dave")}, 400).ok());
}

// ---- Write marks: the highest write sequence persisted per activity (Store::WrittenSeqs) ----

OrderRecord Written(OrderRecord order, int64_t epoch, int64_t seq) {
  order.written = {epoch, seq};
  return order;
}

using Marks = std::vector<std::pair<std::string, core::WriteSeq>>;

Marks MarksOf(Store& store) {
  auto marks = store.WrittenSeqs();
  if (!marks) throw std::runtime_error(marks.error().ToString());
  return std::move(*marks);
}

// A batch raises its activity's mark to the highest sequence among its orders, whatever their
// outcome; a batch with lower sequences, or none known, leaves it; the epoch counts before seq.
TEST_P(StoreContractTest, InsertOrdersRaisesTheWriteMarkAndNeverLowersIt) {
  EXPECT_TRUE(MarksOf(*store_).empty());
  const std::vector<OrderRecord> first = {Written(Order("w1", "alice"), 1, 3),
                                          Written(Order("w2", "bob"), 1, 7),
                                          Written(Order("w3", "carol"), 1, 5)};
  auto inserted = store_->InsertOrders(first, 1);
  ASSERT_TRUE(inserted.ok()) << inserted.error().ToString();
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {1, 7}}}));

  // Lower sequences, a redelivery with a lower one, and orders of unknown sequence: left as is.
  const std::vector<OrderRecord> lower = {Written(Order("w4", "dave"), 1, 2),
                                          Written(Order("w1", "alice"), 1, 6), Order("w5", "erin")};
  ASSERT_TRUE(store_->InsertOrders(lower, 2).ok());
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {1, 7}}}));
  ASSERT_TRUE(store_->InsertOrders(std::vector<OrderRecord>{Order("w6", "fay")}, 3).ok());
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {1, 7}}}));

  // A higher epoch with a lower seq is higher.
  ASSERT_TRUE(
      store_->InsertOrders(std::vector<OrderRecord>{Written(Order("w7", "gina"), 2, 1)}, 4).ok());
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {2, 1}}}));
  // A lower epoch with a higher seq is lower.
  ASSERT_TRUE(
      store_->InsertOrders(std::vector<OrderRecord>{Written(Order("w8", "hank"), 1, 100)}, 5).ok());
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {2, 1}}}));

  // A duplicate and a conflict raise it too: each was read from Redis, which held that sequence.
  auto duplicate =
      store_->InsertOrders(std::vector<OrderRecord>{Written(Order("w2", "bob"), 2, 4)}, 6);
  ASSERT_TRUE(duplicate.ok()) << duplicate.error().ToString();
  EXPECT_EQ(*duplicate, std::vector<InsertOutcome>{InsertOutcome::kDuplicate});
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {2, 4}}}));
  auto conflict =
      store_->InsertOrders(std::vector<OrderRecord>{Written(Order("w9", "alice"), 2, 9)}, 7);
  ASSERT_TRUE(conflict.ok()) << conflict.error().ToString();
  EXPECT_EQ(*conflict, std::vector<InsertOutcome>{InsertOutcome::kConflict});
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {2, 9}}}));

  // A negative sequence is refused, nothing of the batch written.
  const std::vector<OrderRecord> negative = {Written(Order("w10", "ivan"), 3, 1),
                                             Written(Order("w11", "jack"), 3, -1)};
  auto refused = store_->InsertOrders(negative, 8);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument) << refused.error().ToString();
  EXPECT_EQ(store_->GetOrder("w10").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {2, 9}}}));

  // Kept across a reopen.
  store_ = GetParam().open(dir_);
  ASSERT_TRUE(store_->Migrate().ok());
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {2, 9}}}));
}

// A batch refused by the fence raises nothing: the mark is written in the insert's transaction.
TEST_P(StoreContractTest, AFencedBatchLeavesTheWriteMark) {
  auto before = store_->AdvanceFence();
  ASSERT_TRUE(before.ok()) << before.error().ToString();
  ASSERT_TRUE(
      store_
          ->InsertOrders(std::vector<OrderRecord>{Written(Order("f1", "alice"), 1, 5)}, 1, *before)
          .ok());
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {1, 5}}}));
  ASSERT_TRUE(store_->AdvanceFence().ok());
  auto stale = store_->InsertOrders(
      std::vector<OrderRecord>{Written(Order("f2", "bob"), 1, 9), Written(Order("f3", "x"), 2, 1)},
      2, *before);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, ErrorCode::kFailedPrecondition) << stale.error().ToString();
  EXPECT_EQ(stale.error().detail, base::ErrorDetail::kFenced);
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {1, 5}}}));
}

// A batch of several activities raises each one's mark to its own orders' highest; an activity
// whose orders carry no sequence gets none. WrittenSeqs lists exactly the activities with a mark.
TEST_P(StoreContractTest, WrittenSeqsListsEachActivityWithAMark) {
  auto of = [](std::string activity, std::string id, int64_t epoch, int64_t seq) {
    const std::string user = "u-" + id;
    OrderRecord order = Written(Order(std::move(id), user, false), epoch, seq);
    order.activity_id = std::move(activity);
    return order;
  };
  const std::vector<OrderRecord> mixed = {of("b", "m1", 1, 9), of("a", "m2", 1, 2),
                                          of("c", "m3", 0, 0), of("a", "m4", 1, 4),
                                          of("b", "m5", 1, 3)};
  auto inserted = store_->InsertOrders(mixed, 1);
  ASSERT_TRUE(inserted.ok()) << inserted.error().ToString();
  EXPECT_EQ(MarksOf(*store_), (Marks{{"a", {1, 4}}, {"b", {1, 9}}}));
  ASSERT_TRUE(store_->InsertOrders(std::vector<OrderRecord>{of("c", "m6", 4, 0)}, 2).ok());
  EXPECT_EQ(MarksOf(*store_), (Marks{{"a", {1, 4}}, {"b", {1, 9}}, {"c", {4, 0}}}));
}

// Deleting an activity deletes its mark (an id created again starts without one), no other.
TEST_P(StoreContractTest, DeleteActivityRemovesItsWriteMark) {
  ASSERT_TRUE(store_->CreateActivity(Counted("gone"), 1).ok());
  ASSERT_TRUE(
      store_->InsertOrders(std::vector<OrderRecord>{Written(Order("d1", "alice"), 1, 1)}, 2).ok());
  // An order id the record holds under another activity is a duplicate: it raises the mark of
  // "gone", which sold nothing and so can be deleted.
  OrderRecord elsewhere = Written(Order("d1", "alice"), 3, 4);
  elsewhere.activity_id = "gone";
  auto duplicate = store_->InsertOrders(std::vector<OrderRecord>{elsewhere}, 3);
  ASSERT_TRUE(duplicate.ok()) << duplicate.error().ToString();
  EXPECT_EQ(*duplicate, std::vector<InsertOutcome>{InsertOutcome::kDuplicate});
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {1, 1}}, {"gone", {3, 4}}}));

  auto deleted = store_->DeleteActivity("gone");
  ASSERT_TRUE(deleted.ok()) << deleted.error().ToString();
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {1, 1}}}));
  ASSERT_TRUE(store_->CreateActivity(Counted("gone"), 4).ok());
  EXPECT_EQ(MarksOf(*store_), (Marks{{"act", {1, 1}}}));
}

TEST_P(StoreContractTest, OrdersAreFlaggedForCompensationNeverDeleted) {
  ASSERT_TRUE(
      store_->InsertOrders(std::vector<OrderRecord>{Order("c1", "alice"), Order("c2", "bob")}, 100)
          .ok());
  const std::vector<std::string> ids = {"c2", "unknown"};
  auto flagged = store_->FlagCompensation(ids, 300);
  ASSERT_TRUE(flagged.ok()) << flagged.error().ToString();
  EXPECT_FALSE(store_->GetOrder("c1")->compensation_due);
  EXPECT_TRUE(store_->GetOrder("c2")->compensation_due);
  EXPECT_EQ(store_->GetOrder("c2")->state, OrderState::kReserved);
  EXPECT_EQ(store_->CountOrders("act")->orders, 2);
}

TEST_P(StoreContractTest, ALotteryKeepsItsPrizeTable) {
  auto a = Counted("spring-draw");
  a.per_user_limit = 3;
  a.lottery =
      core::Lottery{.prizes = {{"gold", "A gold coin", 1, 2}, {"mug", "A mug \"tea\"", 9, 5}},
                    .no_prize_weight = 90,
                    .admission = core::Admission::kFifo,
                    .queue_capacity = 500};
  a.stock = 7;
  auto created = store_->CreateActivity(a, 1);
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  for (const auto& record : {*created, *store_->GetActivity("spring-draw", false)}) {
    ASSERT_TRUE(record.activity.is_lottery());
    const core::Lottery& lottery = *record.activity.lottery;
    ASSERT_EQ(lottery.prizes.size(), 2u);
    EXPECT_EQ(lottery.prizes[1].id, "mug");
    EXPECT_EQ(lottery.prizes[1].name, "A mug \"tea\"");
    EXPECT_EQ(lottery.prizes[1].weight, 9);
    EXPECT_EQ(lottery.prizes[0].stock, 2);
    EXPECT_EQ(lottery.no_prize_weight, 90);
    EXPECT_EQ(lottery.admission, core::Admission::kFifo);
    EXPECT_EQ(lottery.queue_capacity, 500);
    EXPECT_EQ(record.total_units, 7);
  }
  ASSERT_TRUE(store_->CreateActivity(Counted("sale"), 1).ok());
  EXPECT_FALSE(store_->GetActivity("sale", false)->activity.is_lottery());
}

TEST_P(StoreContractTest, OneWinPerUserAndDraw) {
  auto win = [](std::string id, std::string user, int64_t draw) {
    OrderRecord order = Order(std::move(id), std::move(user), false);
    order.items = {"gold"};
    order.draw_no = draw;
    return order;
  };
  std::vector<OrderRecord> batch = {win("w1", "alice", 1), win("w2", "alice", 2),
                                    win("w3", "bob", 1)};
  auto first = store_->InsertOrders(batch, 1);
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_EQ(*first, std::vector<InsertOutcome>(3, InsertOutcome::kInserted));
  // The same draw under another order id (a win recorded twice): refused, not a second prize.
  std::vector<OrderRecord> again = {win("w4", "alice", 2), win("w1", "alice", 1),
                                    win("w5", "alice", 3)};
  auto second = store_->InsertOrders(again, 2);
  ASSERT_TRUE(second.ok()) << second.error().ToString();
  EXPECT_EQ(*second,
            (std::vector<InsertOutcome>{InsertOutcome::kConflict, InsertOutcome::kDuplicate,
                                        InsertOutcome::kInserted}));
  EXPECT_EQ(store_->GetOrder("w5")->draw_no, 3);
  EXPECT_EQ(store_->GetOrder("w5")->items, std::vector<std::string>{"gold"});
  EXPECT_EQ(store_->CountOrders("act")->units, 4);
}

TEST_P(StoreContractTest, UnpaidOrdersExpireOnceAndLatePaymentsAreFlaggedForARefund) {
  std::vector<OrderRecord> batch = {Order("old1", "u1", true, 100), Order("old2", "u2", true, 200),
                                    Order("new1", "u3", true, 900)};
  ASSERT_TRUE(store_->InsertOrders(batch, 1000).ok());
  ASSERT_EQ(*store_->PayOrder("old2", 1100), PayOutcome::kPaid);
  EXPECT_EQ(*store_->PayOrder("old2", 1150), PayOutcome::kAlreadyPaid);

  // Created before 500 and still reserved: only old1 (old2 is paid, new1 is recent).
  auto expired = store_->CancelUnpaid("act", 500, 100, 1200);
  ASSERT_TRUE(expired.ok()) << expired.error().ToString();
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ((*expired)[0].order_id, "old1");
  EXPECT_EQ((*expired)[0].state, OrderState::kCancelled);
  EXPECT_TRUE(store_->CancelUnpaid("act", 500, 100, 1300)->empty()) << "cancelled once";
  auto old1 = store_->GetOrder("old1");
  EXPECT_EQ(old1->state, OrderState::kCancelled);
  EXPECT_EQ(old1->state_ms, 1200);

  // The payment came too late: refused, flagged for a refund, still cancelled.
  EXPECT_EQ(*store_->PayOrder("old1", 1400), PayOutcome::kRefused);
  EXPECT_TRUE(store_->GetOrder("old1")->refund_due);
  EXPECT_EQ(store_->GetOrder("old1")->state, OrderState::kCancelled);
  EXPECT_EQ(store_->PayOrder("nope", 1400).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store_->GetOrder("old2")->state, OrderState::kPaid);
  EXPECT_EQ(store_->CountOrders("act")->units, 2);
  EXPECT_EQ(store_->CountOrders("act")->cancelled_units, 1);
  // The limit: at most `limit` per call.
  ASSERT_EQ(store_->CancelUnpaid("act", 1000, 1, 1500)->size(), 1u);
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

// The report after the sale (issue 35, point 4): orders per second of their created time, totals
// by state, first and last, flags, refusals, counted by the database for this activity only.
TEST_P(StoreContractTest, ReportOrdersCountsBucketsAndTotalsOfTheActivity) {
  auto empty = store_->ReportOrders("act");
  ASSERT_TRUE(empty.ok()) << empty.error().ToString();
  EXPECT_EQ(empty->orders, 0);
  EXPECT_TRUE(empty->buckets.empty());
  EXPECT_TRUE(empty->states.empty());

  std::vector<OrderRecord> batch = {
      Order("a1", "u1", false, 1000500), Order("a2", "u2", false, 1000999),
      Order("a3", "u3", false, 1002000), Order("a4", "u4", false, 1002999),
      Order("a5", "u5", false, 1002100), Order("a6", "u6", false, 1005001)};
  batch[2].quantity = 3;
  batch[3].state = OrderState::kCancelled;
  auto other = Order("x1", "u1", false, 1000100);
  other.activity_id = "other";
  batch.push_back(other);
  ASSERT_TRUE(store_->InsertOrders(batch, 2000000).ok());
  ASSERT_EQ(*store_->PayOrder("a1", 2000001), PayOutcome::kPaid);
  ASSERT_TRUE(store_->FlagCompensation(std::vector<std::string>{"a5"}, 2000002).ok());
  const std::vector<RefusedOrder> refused = {{"r1", "act"}, {"r2", "act"}, {"r3", "other"}};
  ASSERT_TRUE(store_->RecordRefused(refused, 2000003).ok());

  auto report = store_->ReportOrders("act");
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->orders, 6);
  EXPECT_EQ(report->first_ms, 1000500);
  EXPECT_EQ(report->last_ms, 1005001);
  EXPECT_EQ(report->step_s, 1);
  ASSERT_EQ(report->buckets.size(), 3u);
  EXPECT_EQ(report->buckets[0].second, 1000);
  EXPECT_EQ(report->buckets[0].orders, 2);
  EXPECT_EQ(report->buckets[0].units, 2);
  EXPECT_EQ(report->buckets[1].second, 1002);
  EXPECT_EQ(report->buckets[1].orders, 3);
  EXPECT_EQ(report->buckets[1].units, 5);
  EXPECT_EQ(report->buckets[2].second, 1005);
  EXPECT_EQ(report->buckets[2].orders, 1);
  ASSERT_EQ(report->states.size(), 3u);
  EXPECT_EQ(report->states[0].state, "cancelled");
  EXPECT_EQ(report->states[0].orders, 1);
  EXPECT_EQ(report->states[1].state, "paid");
  EXPECT_EQ(report->states[1].units, 1);
  EXPECT_EQ(report->states[2].state, "reserved");
  EXPECT_EQ(report->states[2].orders, 4);
  EXPECT_EQ(report->states[2].units, 6);
  EXPECT_EQ(report->compensation_due, 1);
  EXPECT_EQ(report->refund_due, 0);
  EXPECT_EQ(report->refused, 2);
  EXPECT_TRUE(report->prizes.empty());
}

// A sale longer than kMaxReportBuckets seconds is bucketed by a wider step, never more buckets.
TEST_P(StoreContractTest, ReportOrdersBoundsTheBucketsOfALongSale) {
  std::vector<OrderRecord> batch = {
      Order("b1", "u1", false, 10000), Order("b2", "u2", false, 11999),
      Order("b3", "u3", false, 12000), Order("b4", "u4", false, 10000 + 7200 * 1000)};
  ASSERT_TRUE(store_->InsertOrders(batch, 1).ok());
  auto report = store_->ReportOrders("act");
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->step_s, 3);  // 7201 seconds in at most 3600 buckets
  ASSERT_EQ(report->buckets.size(), 2u);
  EXPECT_EQ(report->buckets[0].second, 10);
  EXPECT_EQ(report->buckets[0].orders, 3);
  EXPECT_EQ(report->buckets[1].second, 10 + 7200);
  EXPECT_EQ(report->buckets[1].orders, 1);
}

// A lottery's wins per prize; a cancelled win is not counted.
TEST_P(StoreContractTest, ReportOrdersCountsPrizesWon) {
  auto win = [](std::string id, std::string user, std::string prize, int64_t draw) {
    OrderRecord order = Order(std::move(id), std::move(user), false, 5000);
    order.items = {std::move(prize)};
    order.draw_no = draw;
    return order;
  };
  std::vector<OrderRecord> batch = {win("w1", "alice", "mug", 1), win("w2", "bob", "gold", 1),
                                    win("w3", "carol", "mug", 1), win("w4", "dave", "mug", 1)};
  batch[3].state = OrderState::kCancelled;
  ASSERT_TRUE(store_->InsertOrders(batch, 1).ok());
  auto report = store_->ReportOrders("act");
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->prizes,
            (std::vector<std::pair<std::string, int64_t>>{{"gold", 1}, {"mug", 2}}));
}

// The answers the service gave: each instance adds its counts; the report reads the sums by word,
// most first, per activity; a bad count writes nothing of its batch.
TEST_P(StoreContractTest, AddAnswersSumsTheCountsOfEveryCallPerActivityAndWord) {
  using Answers = std::vector<std::pair<std::string, int64_t>>;
  auto empty = store_->ReportOrders("act");
  ASSERT_TRUE(empty.ok()) << empty.error().ToString();
  EXPECT_TRUE(empty->answers.empty());

  const std::vector<store::AnswerCount> first = {
      {"act", "sold_out", 40}, {"act", "reserved", 10}, {"other", "sold_out", 7}};
  ASSERT_TRUE(store_->AddAnswers(first).ok());
  const std::vector<store::AnswerCount> second = {{"act", "sold_out", 2},
                                                  {"act", "rate_limited", 10}};
  ASSERT_TRUE(store_->AddAnswers(second).ok());
  auto report = store_->ReportOrders("act");
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->answers, (Answers{{"sold_out", 42}, {"rate_limited", 10}, {"reserved", 10}}));
  EXPECT_EQ(store_->ReportOrders("other")->answers, (Answers{{"sold_out", 7}}));

  const std::vector<store::AnswerCount> bad = {{"act", "sold_out", 5}, {"act", "", 1}};
  auto refused = store_->AddAnswers(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, base::ErrorCode::kInvalidArgument);
  const std::vector<store::AnswerCount> zero = {{"act", "sold_out", 0}};
  EXPECT_FALSE(store_->AddAnswers(zero).ok());
  EXPECT_EQ(store_->ReportOrders("act")->answers.front(),
            (std::pair<std::string, int64_t>{"sold_out", 42}));
}

TEST_P(StoreContractTest, AuditOrdersFindsUsersOverTheLimitAndIntentsRecordedTwice) {
  auto clean = store_->AuditOrders("act", 2);
  ASSERT_TRUE(clean.ok()) << clean.error().ToString();
  EXPECT_TRUE(clean->users_over_limit.empty());
  EXPECT_EQ(clean->duplicate_intents, 0);

  // gina: 2 units, within the limit of 2; hank: 3 units; ivan: one intent written under two
  // order ids; a cancelled order does not count towards the limit.
  std::vector<OrderRecord> batch = {Order("g1", "gina", false), Order("g2", "gina", false),
                                    Order("h1", "hank", false), Order("h2", "hank", false),
                                    Order("i1", "ivan", false), Order("i2", "ivan", false)};
  batch[3].quantity = 2;
  batch[5].stream_id = batch[4].stream_id;
  auto cancelled = Order("g3", "gina", false);
  cancelled.state = OrderState::kCancelled;
  batch.push_back(cancelled);
  ASSERT_TRUE(store_->InsertOrders(batch, 1).ok());

  auto audit = store_->AuditOrders("act", 2);
  ASSERT_TRUE(audit.ok()) << audit.error().ToString();
  EXPECT_EQ(audit->users_over_limit, (std::vector<std::pair<std::string, int64_t>>{{"hank", 3}}));
  EXPECT_EQ(audit->duplicate_intents, 1);
  EXPECT_EQ(store_->AuditOrders("act", 1)->users_over_limit.size(), 3u);
  EXPECT_TRUE(store_->AuditOrders("other", 1)->users_over_limit.empty());
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

// MariaDB's default utf8mb4 collation ignores case; ids must not.
TEST_P(StoreContractTest, IdsCompareByteForByte) {
  ASSERT_TRUE(store_->CreateActivity(Counted("Phone"), 1).ok());
  auto lower = store_->CreateActivity(Counted("phone"), 1);
  ASSERT_TRUE(lower.ok()) << lower.error().ToString();
  EXPECT_EQ(store_->GetActivity("PHONE", false).error().code, ErrorCode::kNotFound);

  std::vector<OrderRecord> batch = {Order("x1", "Alice"), Order("X1", "alice")};
  auto inserted = store_->InsertOrders(batch, 1);
  ASSERT_TRUE(inserted.ok()) << inserted.error().ToString();
  EXPECT_EQ(*inserted,
            (std::vector<InsertOutcome>{InsertOutcome::kInserted, InsertOutcome::kInserted}));
  EXPECT_EQ(store_->GetOrder("X1")->user_id, "alice");
  EXPECT_EQ(store_->OrdersOfUser("Alice", 10)->size(), 1u);
}

// ---- The outbox (order_events) ----

// (event id, activity, state, at_ms) of every event, in cursor order; the cursor strictly rises.
using EventRow = std::tuple<std::string, std::string, std::string, int64_t>;
std::vector<EventRow> EventsOf(Store& store) {
  std::vector<EventRow> rows;
  int64_t cursor = 0;
  for (;;) {
    auto page = store.EventsAfter(cursor, 3);  // small pages: the cursor is exercised
    if (!page.ok()) throw std::runtime_error(page.error().ToString());
    if (page->empty()) return rows;
    for (const OrderEvent& event : *page) {
      if (event.seq <= cursor) throw std::runtime_error("the cursor went back");
      cursor = event.seq;
      if (event.event_id != event.order_id + "/" + event.state) {
        throw std::runtime_error("unstable event id " + event.event_id);
      }
      rows.emplace_back(event.event_id, event.activity_id, event.state, event.at_ms);
    }
  }
}

TEST_P(StoreContractTest, EveryOrderStateChangeWritesExactlyOneEvent) {
  EXPECT_TRUE(EventsOf(*store_).empty());
  OrderRecord win = Order("w1", "wendy", false);
  win.activity_id = "draw";
  win.draw_no = 1;
  std::vector<OrderRecord> batch = {Order("o1", "alice"), Order("o2", "bob", true, 50), win};
  ASSERT_TRUE(store_->InsertOrders(batch, 100).ok());
  // A redelivery and a double sale the record refuses change nothing: no event.
  ASSERT_TRUE(store_->InsertOrders(batch, 110).ok());
  ASSERT_EQ((*store_->InsertOrders(std::vector<OrderRecord>{Order("o9", "alice")}, 120))[0],
            InsertOutcome::kConflict);
  ASSERT_EQ(*store_->PayOrder("o1", 200), PayOutcome::kPaid);
  ASSERT_EQ(*store_->PayOrder("o1", 210), PayOutcome::kAlreadyPaid);
  ASSERT_EQ(store_->CancelUnpaid("act", 60, 10, 300)->size(), 1u);  // o2
  EXPECT_TRUE(store_->CancelUnpaid("act", 60, 10, 310)->empty());
  ASSERT_EQ(*store_->PayOrder("o2", 400), PayOutcome::kRefused);
  ASSERT_EQ(*store_->PayOrder("o2", 410), PayOutcome::kRefused);  // flagged already
  const std::vector<std::string> sold_twice = {"o1", "nobody"};
  ASSERT_TRUE(store_->FlagCompensation(sold_twice, 500).ok());
  ASSERT_TRUE(store_->FlagCompensation(sold_twice, 510).ok());  // flagged already
  const std::vector<RefusedOrder> refused = {{"o9", "act"}};
  ASSERT_TRUE(store_->RecordRefused(refused, 600).ok());
  ASSERT_TRUE(store_->RecordRefused(refused, 610).ok());  // refused before: its event is there

  EXPECT_EQ(EventsOf(*store_), (std::vector<EventRow>{
                                   {"o1/reserved", "act", "reserved", 100},
                                   {"o2/reserved", "act", "reserved", 100},
                                   {"w1/won", "draw", "won", 100},
                                   {"o1/paid", "act", "paid", 200},
                                   {"o2/cancelled", "act", "cancelled", 300},
                                   {"o2/refund_due", "act", "refund_due", 400},
                                   {"o1/compensation_due", "act", "compensation_due", 500},
                                   {"o9/refused", "act", "refused", 600},
                               }));
  // Reading after the last cursor: nothing; a bad limit or cursor: an error, not a crash.
  auto all = store_->EventsAfter(0, 100);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(store_->EventsAfter(all->back().seq, 100)->empty());
  EXPECT_EQ(store_->EventsAfter(0, 0).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->EventsAfter(-1, 10).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->EventsAfter(0, 10001).error().code, ErrorCode::kInvalidArgument);
  const std::vector<RefusedOrder> bad = {{"", "act"}};
  EXPECT_EQ(store_->RecordRefused(bad, 1).error().code, ErrorCode::kInvalidArgument);
}

// A transaction that fails after its changes were made writes neither the changes nor their
// events: here the event's number is taken (a row planted behind the store's back), so the
// event's insert fails last in the transaction.
TEST_P(StoreContractTest, AChangeThatRollsBackLeavesNoEvent) {
  ExecRaw(
      "INSERT INTO order_events (seq, event_id, order_id, activity_id, state, at_ms) VALUES "
      "(1, 'planted', 'p', 'act', 'reserved', 1)");
  auto failed = store_->InsertOrders(std::vector<OrderRecord>{Order("r1", "rita")}, 100);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(store_->GetOrder("r1").error().code, ErrorCode::kNotFound) << "rolled back";
  ASSERT_EQ(store_->EventsAfter(0, 10)->size(), 1u) << "only the planted row";

  ExecRaw("DELETE FROM order_events WHERE event_id = 'planted'");
  // The number was not taken either (its counter rolled back with it): the next change gets 1.
  ASSERT_TRUE(store_->InsertOrders(std::vector<OrderRecord>{Order("r1", "rita")}, 200).ok());
  auto events = store_->EventsAfter(0, 10);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].seq, 1);
  EXPECT_EQ((*events)[0].event_id, "r1/reserved");

  // A fenced batch is refused whole: no order, no event.
  ASSERT_TRUE(store_->AdvanceFence().ok());
  auto fenced = store_->InsertOrders(std::vector<OrderRecord>{Order("r2", "ron")}, 300, 0);
  ASSERT_FALSE(fenced.ok());
  EXPECT_EQ(store_->EventsAfter(0, 10)->size(), 1u);
}

// Writers on two connections at once (two activities, each its orders inserted, then paid) and a
// reader following the cursor while they write: the reader sees every event exactly once (a
// cursor never passes an event that becomes visible later), and per order "reserved" comes
// before "paid".
TEST_P(StoreContractTest, AReaderFollowingTheCursorMissesNothingWhileTwoWritersCommit) {
  constexpr int kBatches = 15;
  constexpr int kPerBatch = 8;
  std::unique_ptr<Store> second = GetParam().open(dir_);
  std::atomic<int> writers_done = 0;
  std::atomic<bool> failed = false;
  const auto write = [&](Store& store, std::string activity) {
    for (int b = 0; b < kBatches && !failed; ++b) {
      std::vector<OrderRecord> batch;
      for (int i = 0; i < kPerBatch; ++i) {
        OrderRecord order =
            Order(fmt::format("{}-{}-{}", activity, b, i), fmt::format("u{}-{}", b, i), false);
        order.activity_id = activity;
        batch.push_back(std::move(order));
      }
      if (!store.InsertOrders(batch, b).ok()) failed = true;
      for (const OrderRecord& order : batch) {
        if (!store.PayOrder(order.order_id, b).ok()) failed = true;
      }
    }
    ++writers_done;
  };
  std::thread first_writer(write, std::ref(*store_), "east");
  std::thread second_writer(write, std::ref(*second), "west");
  auto reader = GetParam().open(dir_);
  std::vector<OrderEvent> seen;
  int64_t cursor = 0;
  for (;;) {
    const bool last_pass = writers_done == 2;
    auto page = reader->EventsAfter(cursor, 7);
    if (!page.ok()) {
      ADD_FAILURE() << page.error().ToString();
      failed = true;  // the writers stop; joined below
      break;
    }
    for (OrderEvent& event : *page) {
      EXPECT_GT(event.seq, cursor);
      cursor = event.seq;
      seen.push_back(std::move(event));
    }
    if (last_pass && page->empty()) break;
  }
  first_writer.join();
  second_writer.join();
  ASSERT_FALSE(failed);
  ASSERT_EQ(seen.size(), static_cast<size_t>(2 * 2 * kBatches * kPerBatch));
  std::set<std::string> ids;
  std::set<std::string> reserved;
  for (const OrderEvent& event : seen) {
    EXPECT_TRUE(ids.insert(event.event_id).second) << "twice: " << event.event_id;
    if (event.state == "reserved") reserved.insert(event.order_id);
    if (event.state == "paid") {
      EXPECT_TRUE(reserved.contains(event.order_id)) << "paid before reserved: " << event.order_id;
    }
  }
}

// The webhook relay's state: a cursor per receiver that never goes back, parked events kept with
// their event, retried on demand, gone once delivered.
TEST_P(StoreContractTest, WebhookDeliveriesKeepACursorAndParkedEvents) {
  ASSERT_TRUE(
      store_->InsertOrders(std::vector<OrderRecord>{Order("d1", "dan"), Order("d2", "eve")}, 100)
          .ok());
  auto events = store_->EventsAfter(0, 10);
  ASSERT_EQ(events->size(), 2u);
  const std::string a = "http://127.0.0.1:1/a";
  const std::string b = "http://127.0.0.1:1/b";
  EXPECT_EQ(*store_->DeliveryCursor(a), 0);

  DeliveryUpdate first{.receiver = a, .cursor = (*events)[1].seq};
  ParkedEvent parked;
  parked.event = (*events)[0];
  parked.attempts = 3;
  parked.last_error = "503 Service Unavailable";
  first.parked.push_back(parked);
  ASSERT_TRUE(store_->SaveDelivery(first, 200).ok());
  ASSERT_TRUE(store_->SaveDelivery({.receiver = b, .cursor = (*events)[0].seq}, 210).ok());
  ASSERT_TRUE(store_->SaveDelivery({.receiver = a, .cursor = 0}, 220).ok());  // never lowered
  EXPECT_EQ(*store_->DeliveryCursor(a), (*events)[1].seq);
  EXPECT_EQ(*store_->DeliveryCursor(b), (*events)[0].seq);

  auto listed = store_->ParkedEvents("", 10);
  ASSERT_TRUE(listed.ok()) << listed.error().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].receiver, a);
  EXPECT_EQ((*listed)[0].event.event_id, "d1/reserved");
  EXPECT_EQ((*listed)[0].event.activity_id, "act");
  EXPECT_EQ((*listed)[0].attempts, 3);
  EXPECT_EQ((*listed)[0].last_error, "503 Service Unavailable");
  EXPECT_EQ((*listed)[0].parked_ms, 200);
  EXPECT_FALSE((*listed)[0].retry);
  EXPECT_TRUE(store_->ParkedEvents(b, 10)->empty());

  EXPECT_EQ(*store_->RequestRetry(b), 0);
  EXPECT_EQ(*store_->RequestRetry(""), 1);
  EXPECT_EQ(*store_->RequestRetry(a), 0) << "asked for already";
  EXPECT_TRUE((*store_->ParkedEvents(a, 10))[0].retry);
  // Failing again: attempts add up, the retry request is done.
  parked.attempts = 2;
  parked.last_error = "timed out";
  ASSERT_TRUE(store_->SaveDelivery({.receiver = a, .cursor = 0, .parked = {parked}}, 300).ok());
  auto again = store_->ParkedEvents(a, 10);
  EXPECT_EQ((*again)[0].attempts, 5);
  EXPECT_EQ((*again)[0].last_error, "timed out");
  EXPECT_FALSE((*again)[0].retry);
  // Delivered at last: no longer parked.
  ASSERT_TRUE(
      store_->SaveDelivery({.receiver = a, .cursor = 0, .delivered = {(*events)[0].seq}}, 400)
          .ok());
  EXPECT_TRUE(store_->ParkedEvents("", 10)->empty());
}

// ---- The export (OrdersPage) ----

// Every order id of `activity` in `states`, walking the pages of `limit`; `between` runs after each
// page. Fails the test on an error; the ids in the order the pages gave them.
std::vector<OrderRecord> WalkPages(Store& store, std::string_view activity, int64_t limit,
                                   OrderStates states = {},
                                   const std::function<void(int page)>& between = nullptr) {
  std::vector<OrderRecord> seen;
  std::string cursor;
  for (int page = 0;; ++page) {
    auto read = store.OrdersPage(activity, cursor, limit, states);
    if (!read.ok()) {
      ADD_FAILURE() << read.error().ToString();
      return seen;
    }
    EXPECT_LE(static_cast<int64_t>(read->orders.size()), limit);
    if (!read->next.empty()) {
      EXPECT_EQ(static_cast<int64_t>(read->orders.size()), limit);
    }
    for (OrderRecord& order : read->orders) seen.push_back(std::move(order));
    if (read->next.empty()) return seen;
    cursor = read->next;
    if (between) between(page);
    if (page > 10000) {
      ADD_FAILURE() << "the pages never end";
      return seen;
    }
  }
}

std::vector<std::string> IdsOf(const std::vector<OrderRecord>& orders) {
  std::vector<std::string> ids;
  for (const OrderRecord& order : orders) ids.push_back(order.order_id);
  return ids;
}

TEST_P(StoreContractTest, OrdersPageWalksEveryOrderOnceByIdWhileOrdersArriveAndChange) {
  std::vector<OrderRecord> batch;
  std::vector<std::string> before;
  for (int i = 0; i < 20; ++i) {
    batch.push_back(Order(fmt::format("k{:02}", i), fmt::format("user{}", i), false, 100 + i));
    before.push_back(batch.back().order_id);
  }
  batch[3].items = {"C1", "C2"};
  batch[3].quantity = 2;
  OrderRecord elsewhere = Order("k05x", "other-user", false);
  elsewhere.activity_id = "other";
  batch.push_back(elsewhere);
  ASSERT_TRUE(store_->InsertOrders(batch, 500).ok());

  // 8 per page: 20 orders are three pages, the last one short.
  const auto orders = WalkPages(*store_, "act", 8, {}, [&](int page) {
    if (page != 0) return;
    // Between pages: orders before the cursor (k01a) and after it (k15a, zz), one read already
    // paid, one not read yet cancelled.
    std::vector<OrderRecord> late = {Order("k01a", "late1", false, 200),
                                     Order("k15a", "late2", false, 200),
                                     Order("zz", "late3", false, 200)};
    ASSERT_TRUE(store_->InsertOrders(late, 600).ok());
    ASSERT_EQ(*store_->PayOrder("k02", 700), PayOutcome::kPaid);
    ASSERT_EQ(store_->CancelUnpaid("act", 112, 100, 800)->size(), 11u);  // k00..k11 but k02
  });
  std::vector<std::string> expected = before;
  expected.insert(expected.begin() + 16, "k15a");
  expected.push_back("zz");
  EXPECT_EQ(IdsOf(orders), expected)
      << "each order once, by id; k01a (written behind the cursor) on no page";
  ASSERT_EQ(orders.size(), expected.size());
  EXPECT_EQ(orders[3].items, (std::vector<std::string>{"C1", "C2"}));
  EXPECT_EQ(orders[3].quantity, 2);
  EXPECT_EQ(orders[3].created_ms, 103);
  EXPECT_EQ(orders[3].persisted_ms, 500);
  EXPECT_EQ(orders[3].user_id, "user3");
  EXPECT_EQ(orders[10].state, OrderState::kCancelled) << "read after it was cancelled";
  EXPECT_EQ(orders[10].state_ms, 800);
  EXPECT_EQ(orders[2].state, OrderState::kReserved) << "read before it was paid";

  // A page that holds the last order ends the walk: no empty page after it.
  auto first = store_->OrdersPage("other", "", 1, {});
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_EQ(IdsOf(first->orders), (std::vector<std::string>{"k05x"}));
  EXPECT_TRUE(first->next.empty()) << "one order, one page";
  auto none = store_->OrdersPage("nothing-here", "", 10, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->orders.empty());
  EXPECT_TRUE(none->next.empty());
  EXPECT_EQ(WalkPages(*store_, "act", 11).size(), expected.size() + 1) << "k01a, now";
  EXPECT_EQ(WalkPages(*store_, "act", 23).size(), expected.size() + 1);
  EXPECT_EQ(WalkPages(*store_, "act", 22).size(), expected.size() + 1);
}

TEST_P(StoreContractTest, OrdersPageFiltersByState) {
  std::vector<OrderRecord> batch;
  for (int i = 0; i < 12; ++i) batch.push_back(Order(fmt::format("s{:02}", i), "u", false, i));
  ASSERT_TRUE(store_->InsertOrders(batch, 100).ok());
  for (const char* id : {"s01", "s05", "s09"}) ASSERT_TRUE(store_->PayOrder(id, 200).ok());
  ASSERT_EQ(store_->CancelUnpaid("act", 1, 10, 300)->size(), 1u);  // s00
  ASSERT_EQ(*store_->PayOrder("s00", 400), PayOutcome::kRefused);

  const OrderStates paid{.reserved = false, .paid = true, .cancelled = false};
  const auto only_paid = WalkPages(*store_, "act", 1, paid);  // one per page: sparse matches
  EXPECT_EQ(IdsOf(only_paid), (std::vector<std::string>{"s01", "s05", "s09"}));
  EXPECT_EQ(only_paid[0].state_ms, 200);
  const OrderStates done{.reserved = false, .paid = true, .cancelled = true};
  const auto finished = WalkPages(*store_, "act", 2, done);
  EXPECT_EQ(IdsOf(finished), (std::vector<std::string>{"s00", "s01", "s05", "s09"}));
  EXPECT_TRUE(finished[0].refund_due);
  EXPECT_EQ(finished[0].state, OrderState::kCancelled);
  const OrderStates reserved{.reserved = true, .paid = false, .cancelled = false};
  EXPECT_EQ(WalkPages(*store_, "act", 5, reserved).size(), 8u);
  EXPECT_EQ(WalkPages(*store_, "act", 5).size(), 12u);
}

TEST_P(StoreContractTest, OrdersPageRefusesACursorItDidNotGive) {
  std::vector<OrderRecord> batch = {Order("t1", "a", false), Order("t2", "b", false),
                                    Order("t3", "c", false)};
  OrderRecord other = Order("t1x", "d", false);
  other.activity_id = "other";
  batch.push_back(other);
  batch.push_back(Order("t1y", "e", false));
  batch.back().activity_id = "other";
  ASSERT_TRUE(store_->InsertOrders(batch, 100).ok());
  auto page = store_->OrdersPage("act", "", 1, {});
  ASSERT_TRUE(page.ok());
  const std::string cursor = page->next;
  ASSERT_FALSE(cursor.empty());
  EXPECT_EQ(IdsOf(store_->OrdersPage("act", cursor, 5, {})->orders),
            (std::vector<std::string>{"t2", "t3"}));
  auto other_page = store_->OrdersPage("other", "", 1, {});
  ASSERT_FALSE(other_page->next.empty());

  std::string flipped = cursor;
  flipped[flipped.size() / 2] = flipped[flipped.size() / 2] == 'A' ? 'B' : 'A';
  for (const std::string& bad :
       {std::string("!!not-base64!!"), std::string("bm9wZQ"), cursor.substr(0, cursor.size() - 2),
        cursor + "AA", flipped, other_page->next, std::string(600, 'A'), std::string("MQo")}) {
    auto read = store_->OrdersPage("act", bad, 5, {});
    ASSERT_FALSE(read.ok()) << "cursor '" << bad << "' was followed";
    EXPECT_EQ(read.error().code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_TRUE(Contains(read.error().message, "cursor")) << read.error().message;
  }
  for (int64_t limit : {int64_t{0}, int64_t{-1}, kMaxOrdersPerPage + 1}) {
    auto read = store_->OrdersPage("act", "", limit, {});
    ASSERT_FALSE(read.ok()) << limit;
    EXPECT_EQ(read.error().code, ErrorCode::kInvalidArgument);
  }
  auto no_state = store_->OrdersPage("act", "", 5, {false, false, false});
  ASSERT_FALSE(no_state.ok());
  EXPECT_EQ(no_state.error().code, ErrorCode::kInvalidArgument);
}

// A reader walking the pages while a writer inserts, pays and cancels: every order there before
// it began is on exactly one page, no order twice, the ids strictly rising.
TEST_P(StoreContractTest, OrdersPagesMissNothingWhileAWriterCommits) {
  std::vector<OrderRecord> batch;
  for (int i = 0; i < 300; ++i) batch.push_back(Order(fmt::format("m{:03}", i), "u", false, i));
  ASSERT_TRUE(store_->InsertOrders(batch, 1).ok());
  std::unique_ptr<Store> writer_store = GetParam().open(dir_);
  std::atomic<bool> stop = false;
  std::atomic<bool> failed = false;
  std::atomic<int> rounds = 0;
  std::atomic<bool> written = false;
  std::thread writer([&] {
    for (int round = 0; !stop && round < 200; ++round, ++rounds) {
      std::vector<OrderRecord> late = {Order(fmt::format("a{:03}", round), "v", false),
                                       Order(fmt::format("m{:03}x", round), "v", false),
                                       Order(fmt::format("z{:03}", round), "v", false)};
      if (!writer_store->InsertOrders(late, 2).ok()) failed = true;
      if (!writer_store->PayOrder(fmt::format("m{:03}", (round * 7) % 300), 3).ok()) failed = true;
    }
    written = true;
  });
  // Between pages, the reader waits (bounded) for the writer to commit a round more, until it is
  // done.
  const auto seen = WalkPages(*store_, "act", 7, {}, [&](int) {
    const int before = rounds;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (rounds == before && !written && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  stop = true;
  writer.join();
  ASSERT_FALSE(failed);
  std::set<std::string> ids;
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_TRUE(ids.insert(seen[i].order_id).second) << "twice: " << seen[i].order_id;
    if (i > 0) {
      EXPECT_LT(seen[i - 1].order_id, seen[i].order_id);
    }
  }
  for (const OrderRecord& order : batch) {
    EXPECT_TRUE(ids.contains(order.order_id)) << "missed: " << order.order_id;
  }
}

// A page is a range read of orders_by_activity_id in its order: no sort of the activity's orders
// for each page (what keeps a page's cost flat over a 1,000,000-order export).
TEST_P(StoreContractTest, OrdersPageReadsItsIndexInOrder) {
  std::vector<OrderRecord> batch;
  for (int i = 0; i < 200; ++i) {
    batch.push_back(Order(fmt::format("p{:03}", i), "u", false, i));
    if (i % 2 == 0) batch.back().activity_id = "other";
  }
  ASSERT_TRUE(store_->InsertOrders(batch, 1).ok());
  const std::string sql =
      std::string(records::kSelectOrder) + std::string(records::kWhereActivityPage);
  if (GetParam().name == "sqlite") {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ + "/flashsale.db").c_str(), &db), SQLITE_OK);
    sqlite3_stmt* plan = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, ("EXPLAIN QUERY PLAN " + sql).c_str(), -1, &plan, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    std::string steps;
    while (sqlite3_step(plan) == SQLITE_ROW) {
      steps += reinterpret_cast<const char*>(sqlite3_column_text(plan, 3));
      steps += "\n";
    }
    sqlite3_finalize(plan);
    sqlite3_close(db);
    EXPECT_TRUE(Contains(steps, "USING INDEX orders_by_activity_id (activity_id=? AND order_id>?)"))
        << steps;
    EXPECT_FALSE(Contains(steps, "TEMP B-TREE")) << steps;
    return;
  }
#ifndef FLASHSALE_STORE_ON_GALERA
  std::string explain = "EXPLAIN " + sql;
  for (const char* value : {"'act'", "'p100'", "7", "11"}) {
    explain.replace(explain.find('?'), 1, value);
  }
  const std::string database = ParseMySqlUrl(ReadFile(dir_ + "/mariadb-url"))->database;
  SharedMariaDb().Query("ANALYZE TABLE orders", database);
  const auto result = SharedMariaDb().Query(explain, database);
  ASSERT_EQ(result.rows.size(), 1u);
  const auto& row = result.rows[0];  // id, select_type, table, type, possible_keys, key, ...
  ASSERT_GE(row.size(), 10u);
  EXPECT_EQ(row[5].value_or(""), "orders_by_activity_id");
  EXPECT_FALSE(Contains(row[9].value_or(""), "filesort")) << row[9].value_or("");
#endif
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return info.param.name; });

// ---- MySQL/MariaDB only ----

#ifndef FLASHSALE_STORE_ON_GALERA

TEST(MariaDbStoreTest, DescribesWithoutThePasswordAndOpensOverTheSocket) {
  MariaDbServer& server = SharedMariaDb();
  const std::string url = server.UniqueDatabase();
  const std::string database = ParseMySqlUrl(url)->database;
  auto tcp = OpenMySql(url);
  EXPECT_EQ(tcp->Describe(), fmt::format("mysql://{}@127.0.0.1:{}/{}", MariaDbServer::kUser,
                                         server.port(), database));

  auto socket = OpenMySql(server.socket_url(database));
  EXPECT_EQ(socket->Describe(), fmt::format("mysql://{}@localhost/{}?socket={}",
                                            MariaDbServer::kUser, database, server.socket_path()));
  ASSERT_TRUE(socket->Migrate().ok());
  ASSERT_TRUE(socket->CreateActivity(core::Activity{.id = "s", .end_ms = 10}, 1).ok());
  // Both connections see one database.
  EXPECT_TRUE(tcp->GetActivity("s", false).ok());
  EXPECT_EQ(*tcp->SchemaVersion(), 11);

  // A wrong password or an unknown database: unavailable, and the message keeps the secret.
  auto wrong = MySqlStore::Open(fmt::format("mysql://{}:not-it@127.0.0.1:{}/{}",
                                            MariaDbServer::kUser, server.port(), database));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, ErrorCode::kUnavailable);
  EXPECT_FALSE(Contains(wrong.error().message, "not-it")) << wrong.error().message;
  auto unknown = MySqlStore::Open(server.url("no_such_database"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(Contains(unknown.error().message, "no_such_database")) << unknown.error().message;
  EXPECT_FALSE(Contains(unknown.error().message, MariaDbServer::kPassword));
}

// INSERT IGNORE turns errors into warnings; the store must not take them for a conflict.
TEST(MariaDbStoreTest, InsertOrdersRefusesWhatTheSchemaCannotHoldAndWritesNothing) {
  auto store = OpenMySql(SharedMariaDb().UniqueDatabase());
  ASSERT_TRUE(store->Migrate().ok());

  std::vector<OrderRecord> too_long = {Order("ok1", "u1"), Order("bad1", std::string(65, 'u'))};
  auto refused = store->InsertOrders(too_long, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store->GetOrder("ok1").error().code, ErrorCode::kNotFound);

  // Not UTF-8: passes the length check, and the server refuses it (a warning under IGNORE).
  // (The row-by-row way refuses it, after it raised the write mark: rolled back with the rest.)
  std::vector<OrderRecord> not_utf8 = {Written(Order("ok2", "u2"), 1, 1),
                                       Written(Order("bad2", "\xff\xfe"), 1, 2)};
  auto rejected = store->InsertOrders(not_utf8, 1);
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.error().code, ErrorCode::kInvalidArgument) << rejected.error().ToString();
  EXPECT_EQ(store->GetOrder("ok2").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store->CountOrders("act")->orders, 0);
  EXPECT_TRUE(MarksOf(*store).empty());
}

#endif  // FLASHSALE_STORE_ON_GALERA

// ---- Two writers at once: on one server, or on two Galera nodes ----

// Two processes starting against one new database: both succeed, and the migrations ran once.
// (On Galera GET_LOCK would let both in: schema.cc takes a lease row instead.)
TEST(MariaDbStoreTest, ConcurrentMigrationsOfOneDatabaseBothSucceed) {
  const TwoWriters writers = NewTwoWriters();
  auto first = OpenMySql(writers.first_url);
  auto second = OpenMySql(writers.second_url);
  std::optional<base::Status> a, b;
  std::latch start(2);
  std::thread one([&] {
    start.arrive_and_wait();
    a.emplace(first->Migrate());
  });
  std::thread two([&] {
    start.arrive_and_wait();
    b.emplace(second->Migrate());
  });
  one.join();
  two.join();
  ASSERT_TRUE(a->ok()) << a->error().ToString();
  ASSERT_TRUE(b->ok()) << b->error().ToString();
  EXPECT_EQ(*first->SchemaVersion(), 11);
  EXPECT_EQ(*second->SchemaVersion(), 11);
  EXPECT_EQ(writers.Scalar("SELECT COUNT(*) FROM schema_migrations"), "11");
}

// A migrator that died holding the migration lease (schema.cc) keeps the next one waiting only
// until the lease runs out; the next one then migrates and gives the lease back.
TEST(MariaDbStoreTest, ALeaseLeftByADeadMigratorRunsOutAndTheNextOneMigrates) {
  const TwoWriters writers = NewTwoWriters();
  auto first = OpenMySql(writers.first_url);
  ASSERT_TRUE(first->Migrate().ok());
  writers.Exec(
      "UPDATE schema_lock SET holder = 'dead', until_ms = "
      "CAST(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) "
      "* 1000 AS SIGNED) + 2000 WHERE id = 1");
  auto second = OpenMySql(writers.second_url);
  auto migrated = second->Migrate();
  ASSERT_TRUE(migrated.ok()) << migrated.error().ToString();
  EXPECT_EQ(*second->SchemaVersion(), 11);
  EXPECT_EQ(writers.Scalar("SELECT CONCAT('[', holder, ']') FROM schema_lock"), "[]");
}

// What one writer committed, the other reads at once (on Galera: through another node, which the
// store asks to read causally).
TEST(MariaDbStoreTest, WhatOneWriterCommittedTheOtherReadsAtOnce) {
  const TwoWriters writers = NewTwoWriters();
  auto first = OpenMySql(writers.first_url);
  auto second = OpenMySql(writers.second_url);
  ASSERT_TRUE(first->Migrate().ok());
  for (int i = 0; i < 100; ++i) {
    const std::string id = fmt::format("o{}", i);
    auto inserted =
        first->InsertOrders(std::vector<OrderRecord>{Order(id, fmt::format("u{}", i))}, 1);
    ASSERT_TRUE(inserted.ok()) << inserted.error().ToString();
    auto read = second->GetOrder(id);
    ASSERT_TRUE(read.ok()) << "order " << id << ": " << read.error().ToString();
  }
}

using Outcomes = base::Result<std::vector<InsertOutcome>>;

// Both stores insert `batch` at the same moment, on two threads.
std::pair<Outcomes, Outcomes> InsertConcurrently(Store& first, Store& second,
                                                 const std::vector<OrderRecord>& batch) {
  std::optional<Outcomes> a, b;
  std::latch start(2);
  std::thread one([&] {
    start.arrive_and_wait();
    a.emplace(first.InsertOrders(batch, 1));
  });
  std::thread two([&] {
    start.arrive_and_wait();
    b.emplace(second.InsertOrders(batch, 2));
  });
  one.join();
  two.join();
  return {std::move(*a), std::move(*b)};
}

// Two processes draining the same stream: each order is written once, and exactly one of them
// reports it inserted.
TEST(MariaDbStoreTest, ConcurrentInsertsOfOneBatchInsertEachOrderOnce) {
  const TwoWriters writers = NewTwoWriters();
  auto first = OpenMySql(writers.first_url);
  auto second = OpenMySql(writers.second_url);
  ASSERT_TRUE(first->Migrate().ok());
  constexpr int kRounds = 5;
  constexpr int kOrders = 200;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<OrderRecord> batch;
    for (int i = 0; i < kOrders; ++i) {
      batch.push_back(Written(
          Order(fmt::format("r{}-o{}", round, i), fmt::format("r{}-u{}", round, i), i % 2 == 0), 1,
          round * kOrders + i + 1));
    }
    auto [a, b] = InsertConcurrently(*first, *second, batch);
    ASSERT_TRUE(a.ok()) << a.error().ToString();
    ASSERT_TRUE(b.ok()) << b.error().ToString();
    ASSERT_EQ(a->size(), batch.size());
    ASSERT_EQ(b->size(), batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const InsertOutcome x = (*a)[i];
      const InsertOutcome y = (*b)[i];
      const bool one_inserted = (x == InsertOutcome::kInserted && y == InsertOutcome::kDuplicate) ||
                                (x == InsertOutcome::kDuplicate && y == InsertOutcome::kInserted);
      EXPECT_TRUE(one_inserted) << "round " << round << " order " << i << ": "
                                << static_cast<int>(x) << " and " << static_cast<int>(y);
    }
  }
  EXPECT_EQ(writers.Scalar("SELECT COUNT(*) FROM orders"), std::to_string(kRounds * kOrders));
  EXPECT_EQ(writers.Scalar("SELECT COUNT(DISTINCT order_id) FROM orders"),
            std::to_string(kRounds * kOrders));
  // Both raised the one mark, to the highest sequence of all.
  EXPECT_EQ(MarksOf(*second), (Marks{{"act", {1, kRounds * kOrders}}}));
}

// The same race when half the orders clash with a live order of their user (a double sale; the
// other half are of activities without a per-user limit): both writers report those as conflicts.
// (Were the clash found by the insert, InnoDB's locks on the unique key would deadlock the two
// almost every time; the store finds a committed clash with a read first.)
TEST(MariaDbStoreTest, ConcurrentInsertsAgreeOnConflicts) {
  const TwoWriters writers = NewTwoWriters();
  auto first = OpenMySql(writers.first_url);
  auto second = OpenMySql(writers.second_url);
  ASSERT_TRUE(first->Migrate().ok());
  constexpr int kRounds = 5;
  constexpr int kOrders = 100;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<OrderRecord> live, batch;
    for (int i = 0; i < kOrders; ++i) {
      const std::string user = fmt::format("r{}-u{}", round, i);
      if (i % 2 == 0) live.push_back(Order(fmt::format("r{}-live{}", round, i), user));
      batch.push_back(Order(fmt::format("r{}-o{}", round, i), user, i % 2 == 0));
    }
    ASSERT_TRUE(first->InsertOrders(live, 1).ok());
    auto [a, b] = InsertConcurrently(*first, *second, batch);
    ASSERT_TRUE(a.ok()) << a.error().ToString();
    ASSERT_TRUE(b.ok()) << b.error().ToString();
    for (size_t i = 0; i < batch.size(); ++i) {
      const InsertOutcome x = (*a)[i];
      const InsertOutcome y = (*b)[i];
      if (i % 2 == 0) {
        EXPECT_TRUE(x == InsertOutcome::kConflict && y == InsertOutcome::kConflict)
            << "round " << round << " order " << i;
      } else {
        EXPECT_TRUE((x == InsertOutcome::kInserted && y == InsertOutcome::kDuplicate) ||
                    (x == InsertOutcome::kDuplicate && y == InsertOutcome::kInserted))
            << "round " << round << " order " << i;
      }
    }
  }
  EXPECT_EQ(first->CountOrders("act")->orders, kRounds * kOrders);
}

#ifndef FLASHSALE_STORE_ON_GALERA
// A server of its own: this test kills it.
TEST(MariaDbStoreTest, UnavailableWhileTheServerIsDownAndBackAfterARestart) {
  MariaDbServer server;
  auto store = OpenMySql(server.url());
  ASSERT_TRUE(store->Migrate().ok());
  ASSERT_TRUE(store->CreateActivity(core::Activity{.id = "kept", .end_ms = 10}, 1).ok());
  ASSERT_TRUE(store->InsertOrders(std::vector<OrderRecord>{Order("o1", "alice")}, 1).ok());

  server.Kill();
  const std::string where = fmt::format("127.0.0.1:{}", server.port());
  auto expect_unavailable = [&](const base::Error& error) {
    EXPECT_EQ(error.code, ErrorCode::kUnavailable) << error.ToString();
    EXPECT_TRUE(Contains(error.message, where)) << error.message;
    EXPECT_FALSE(Contains(error.message, MariaDbServer::kPassword)) << error.message;
  };
  expect_unavailable(store->Ping().error());
  expect_unavailable(store->GetActivity("kept", false).error());
  expect_unavailable(store->CreateActivity(core::Activity{.id = "lost", .end_ms = 10}, 2).error());
  expect_unavailable(store->InsertOrders(std::vector<OrderRecord>{Order("o2", "bob")}, 2).error());
  expect_unavailable(store->CountOrders("act").error());
  auto fresh = MySqlStore::Open(server.url());
  ASSERT_FALSE(fresh.ok());
  expect_unavailable(fresh.error());

  server.Start();  // InnoDB recovers what was committed before the crash
  EXPECT_TRUE(store->Ping().ok());
  EXPECT_TRUE(store->GetActivity("kept", false).ok());
  EXPECT_EQ(store->GetActivity("lost", false).error().code, ErrorCode::kNotFound);
  auto redelivered =
      store->InsertOrders(std::vector<OrderRecord>{Order("o1", "alice"), Order("o2", "bob")}, 3);
  ASSERT_TRUE(redelivered.ok()) << redelivered.error().ToString();
  EXPECT_EQ(*redelivered,
            (std::vector<InsertOutcome>{InsertOutcome::kDuplicate, InsertOutcome::kInserted}));

  // A restart between two calls does not show: the stale connection is replaced and the call,
  // which did nothing on it, runs once more. Reads and writes alike.
  server.Stop();
  server.Start();
  auto read = store->GetActivity("kept", false);
  EXPECT_TRUE(read.ok()) << read.error().ToString();
  server.Kill();
  server.Start();
  auto write = store->InsertOrders(std::vector<OrderRecord>{Order("o3", "carol")}, 4);
  ASSERT_TRUE(write.ok()) << write.error().ToString();
  EXPECT_EQ((*write)[0], InsertOutcome::kInserted);
  server.Kill();
  server.Start();
  auto created = store->CreateActivity(core::Activity{.id = "after", .end_ms = 10}, 5);
  EXPECT_TRUE(created.ok()) << created.error().ToString();
  EXPECT_EQ(store->CountOrders("act")->orders, 3);
}

#endif  // FLASHSALE_STORE_ON_GALERA

}  // namespace
}  // namespace flashsale::store
