#pragma once
// A redis-server for the suite, a connection and the activity bindings for each test, under a key
// namespace of the test's own.

#include <gtest/gtest.h>

#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <string>

#include "core/activity.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/embedded_scripts.h"
#include "support/redis_helpers.h"
#include "support/redis_server.h"

namespace flashsale::testing {

class ActivityFixture : public ::testing::Test {
 public:
  // An open counted activity over [1000, 2000) unless changed by the caller.
  static core::Activity Activity(std::string id, int64_t stock, int64_t limit = 1) {
    core::Activity activity;
    activity.id = std::move(id);
    activity.start_ms = 1000;
    activity.end_ms = 2000;
    activity.per_user_limit = limit;
    activity.stock = stock;
    return activity;
  }

 protected:
  static void SetUpTestSuite() { server_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    connection_ = Connect(io_, server_->unix_url());
    runner_ = std::make_unique<redis::ScriptRunner>(connection_, keyspace::Scripts());
    scripts_ = std::make_unique<keyspace::ActivityScripts>(*runner_, ns_);
  }
  void TearDown() override { Stop(io_, connection_); }

  base::Result<keyspace::SetupResult> SetUpActivity(const core::Activity& activity) {
    return io_.Run(scripts_->AsyncSetup(activity, boost::asio::use_awaitable));
  }
  base::Result<keyspace::Reservation> Reserve(const std::string& activity, const std::string& order,
                                              const std::string& user, int64_t quantity = 1,
                                              int64_t now_ms = 1500,
                                              const std::string& idempotency_token = "") {
    keyspace::ReserveRequest request{.order_id = order,
                                     .user_id = user,
                                     .quantity = quantity,
                                     .now_ms = now_ms,
                                     .idempotency_token = idempotency_token,
                                     .idempotency_ttl_ms = idempotency_token.empty() ? 0 : 60000};
    return io_.Run(scripts_->AsyncReserve(activity, request, boost::asio::use_awaitable));
  }
  base::Result<keyspace::ReleaseResult> Release(const std::string& activity,
                                                const std::string& order) {
    return io_.Run(scripts_->AsyncRelease(activity, order, boost::asio::use_awaitable));
  }
  base::Result<keyspace::AddStockResult> AddStock(const std::string& activity, int64_t units,
                                                  const std::vector<std::string>& items = {}) {
    return io_.Run(scripts_->AsyncAddStock(activity, units, items, boost::asio::use_awaitable));
  }
  keyspace::ActivityStatus Status(const std::string& activity) {
    auto status = io_.Run(scripts_->AsyncStatus(activity, boost::asio::use_awaitable));
    if (!status.ok()) throw std::runtime_error(status.error().ToString());
    return *status;
  }
  keyspace::ActivityKeys Keys(const std::string& activity) const { return {ns_, activity}; }

  static RedisServer* server_;
  std::string ns_ = UniqueNamespace();
  IoThread io_;
  std::shared_ptr<redis::Connection> connection_;
  std::unique_ptr<redis::ScriptRunner> runner_;
  std::unique_ptr<keyspace::ActivityScripts> scripts_;
};

inline RedisServer* ActivityFixture::server_ = nullptr;

}  // namespace flashsale::testing
