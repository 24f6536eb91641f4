// ActivityRegistry: overlapping reloads publish in the order they read the record (a real SQLite
// file in a temporary directory).
#include "service/registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "store/sqlite_store.h"

namespace flashsale::service {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;

core::Activity Sale(std::string id) {
  core::Activity activity;
  activity.id = std::move(id);
  activity.start_ms = kNow;
  activity.end_ms = kNow + 60'000;
  activity.per_user_limit = 1;
  activity.stock = 10;
  return activity;
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("flashsale-registry-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = store::SqliteStore::Open((dir_ / "flashsale.db").string());
    ASSERT_TRUE(store.ok()) << store.error().ToString();
    store_ = std::move(*store);
    auto migrated = store_->Migrate();
    ASSERT_TRUE(migrated.ok()) << migrated.error().ToString();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  std::unique_ptr<store::SqliteStore> store_;
  ActivityRegistry registry_;
};

TEST_F(RegistryTest, AReloadThatReadBeforeAChangeDoesNotPutTheOlderListBack) {
  ASSERT_TRUE(store_->CreateActivity(Sale("old"), kNow).ok());
  // A poll reads the record; then an activity is created and its own reload reads and publishes;
  // the poll publishes last.
  auto poll = registry_.Read(*store_);
  ASSERT_TRUE(poll.ok()) << poll.error().ToString();
  ASSERT_TRUE(store_->CreateActivity(Sale("new"), kNow).ok());
  auto after_create = registry_.Read(*store_);
  ASSERT_TRUE(after_create.ok()) << after_create.error().ToString();
  EXPECT_GT(after_create->read, poll->read);
  EXPECT_TRUE(registry_.Publish(std::move(*after_create)));
  EXPECT_FALSE(registry_.Publish(std::move(*poll)));

  const SnapshotPtr snapshot = registry_.Current();
  EXPECT_NE(snapshot->Find("new"), nullptr);
  EXPECT_NE(snapshot->Find("old"), nullptr);
  EXPECT_EQ(snapshot->all().size(), 2u);
}

TEST_F(RegistryTest, ReloadsInReadOrderEachReplaceTheSnapshot) {
  auto empty = registry_.Read(*store_);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(registry_.Publish(std::move(*empty)));
  EXPECT_TRUE(registry_.Current()->all().empty());
  ASSERT_TRUE(store_->CreateActivity(Sale("a"), kNow).ok());
  auto one = registry_.Read(*store_);
  ASSERT_TRUE(one.ok());
  SnapshotPtr seen = registry_.Current();
  const uint64_t before = seen->generation();
  EXPECT_TRUE(registry_.Publish(std::move(*one)));
  registry_.Refresh(seen);
  EXPECT_GT(seen->generation(), before);
  EXPECT_NE(seen->Find("a"), nullptr);
  // A list published directly (as tests do) counts as read now: an older read stays out.
  auto stale = registry_.Read(*store_);
  ASSERT_TRUE(stale.ok());
  registry_.Publish(std::vector<store::ActivityRecord>{});
  EXPECT_FALSE(registry_.Publish(std::move(*stale)));
  EXPECT_TRUE(registry_.Current()->all().empty());
}

}  // namespace
}  // namespace flashsale::service
