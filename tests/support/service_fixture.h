#pragma once
// The service layer in-process on real servers: a redis-server for the test suite, a record
// (a SQLite file of the test's own, or a MariaDB database given by URL), one Redis connection on
// an I/O thread, a database thread, and the ServiceContext over them, with a manual clock and a
// seeded random source. What the order pipeline, dead-letter and coalescing tests share.
//
// A fixture derives from ServiceFixture<> (or ServiceFixture<::testing::TestWithParam<P>>),
// adjusts settings_ in its SetUp if it needs to, then calls StartService:
//
//   void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartService()); }

#include <gtest/gtest.h>

#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "base/clock.h"
#include "base/random.h"
#include "keyspace/embedded_scripts.h"
#include "redis/connection.h"
#include "redis/scripts.h"
#include "service/context.h"
#include "service/registry.h"
#include "store/store.h"
#include "support/io_thread.h"
#include "support/redis_helpers.h"
#include "support/redis_server.h"

namespace flashsale::testing {

template <typename Base = ::testing::Test>
class ServiceFixture : public Base {
 protected:
  ServiceFixture() {
    settings_.secret = "secret";
    settings_.db_timeout = std::chrono::seconds(20);
  }

  static void SetUpTestSuite() { redis_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }

  // A temporary directory, the record at `store_url` (empty: a SQLite file in that directory,
  // sqlite_path()), migrated; a fresh key namespace; the connection and the context.
  void StartService(std::string store_url = {}, redis::ConnectionOptions options = {}) {
    std::string templ =
        (std::filesystem::temp_directory_path() / "flashsale-service-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    store_url_ = store_url.empty() ? "sqlite:" + sqlite_path() : std::move(store_url);
    auto store = store::OpenStore(store_url_);
    ASSERT_TRUE(store.ok()) << store.error().ToString();
    store_ = std::move(*store);
    ASSERT_TRUE(store_->Migrate().ok());
    settings_.key_namespace = UniqueNamespace();
    connection_ = Connect(io_, redis_->unix_url(), options);
    runner_ = std::make_unique<redis::ScriptRunner>(connection_, keyspace::Scripts());
    context_ = std::make_unique<service::ServiceContext>(
        settings_, *runner_, *store_, db_.get_executor(), registry_, clock_, random_);
  }

  void TearDown() override {
    context_.reset();
    if (connection_) Stop(io_, connection_);
    db_.join();
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string sqlite_path() const { return dir_ + "/flashsale.db"; }

  static inline RedisServer* redis_ = nullptr;
  std::string dir_;
  std::string store_url_;
  std::unique_ptr<store::Store> store_;
  service::ServiceSettings settings_;
  base::ManualClock clock_{1'800'000'000'000};
  base::SeededRandom random_{11};
  boost::asio::thread_pool db_{1};
  service::ActivityRegistry registry_;
  IoThread io_;
  std::shared_ptr<redis::Connection> connection_;
  std::unique_ptr<redis::ScriptRunner> runner_;
  std::unique_ptr<service::ServiceContext> context_;
};

}  // namespace flashsale::testing
