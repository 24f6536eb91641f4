#include "support/sale_drill.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <iostream>
#include <memory>
#include <set>

#include "load/verify.h"
#include "support/http_client.h"

namespace flashsale::testing {

namespace json = boost::json;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

namespace {

json::value Json(const HttpResult& result) {
  boost::system::error_code error;
  json::value value = json::parse(result.body, error);
  if (error) return json::value(result.body);
  return value;
}

int64_t Code(const HttpResult& result) {
  const json::value value = Json(result);
  if (!value.is_object() || !value.as_object().contains("code")) return -1000;
  return value.at("code").as_int64();
}

std::string Field(const HttpResult& result, const char* name) {
  const json::value value = Json(result);
  if (!value.is_object() || !value.as_object().contains(name)) return "";
  const json::value& field = value.at(name);
  return field.is_string() ? std::string(field.as_string()) : json::serialize(field);
}

}  // namespace

SaleLoad::SaleLoad(uint16_t port, int64_t users, int threads, std::string activity)
    : port_(port), users_(users), path_(fmt::format("/api/v1/activities/{}/purchase", activity)) {
  for (int t = 0; t < threads; ++t) {
    workers_.emplace_back([this, t, threads] { Run(t, threads); });
  }
}

SaleLoad::~SaleLoad() { Join(); }

void SaleLoad::MarkKill() {
  std::lock_guard lock(mutex_);
  kill_at_ = SteadyClock::now();
  failed_at_.reset();
  recovered_ms_ = -1;
}

int64_t SaleLoad::reserved() {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(order_ids_.size());
}

bool SaleLoad::Finish(milliseconds timeout) {
  const auto until = SteadyClock::now() + timeout;
  while (finished_ != users_ && SteadyClock::now() < until) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  const bool done = finished_ == users_;
  Join();
  return done;
}

std::vector<std::string> SaleLoad::order_ids() {
  std::lock_guard lock(mutex_);
  return order_ids_;
}

int64_t SaleLoad::recovered_ms() {
  std::lock_guard lock(mutex_);
  return recovered_ms_;
}

void SaleLoad::Join() {
  stop_ = true;
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

void SaleLoad::Run(int first, int step) {
  uint16_t port = port_;
  auto client = std::make_unique<HttpClient>("127.0.0.1", port);
  for (int64_t i = first; i < users_ && !stop_; i += step) {
    const std::string user = fmt::format("u{}", i);
    while (!stop_) {
      if (held_) {
        std::this_thread::sleep_for(milliseconds(5));
        continue;
      }
      if (port_ != port) {
        port = port_;
        client = std::make_unique<HttpClient>("127.0.0.1", port);
      }
      const auto sent = SteadyClock::now();
      const HttpResult result =
          client->Post(path_, "", {{"X-User-Id", user}, {"Idempotency-Key", "k-" + user}});
      if (result.status == 200) {
        const int64_t code = Code(result);
        if (code == 1) {
          std::lock_guard lock(mutex_);
          order_ids_.push_back(Field(result, "order_id"));
          if (kill_at_ && failed_at_ && sent >= *failed_at_ && recovered_ms_ < 0) {
            recovered_ms_ =
                std::chrono::duration_cast<milliseconds>(SteadyClock::now() - *kill_at_).count();
          }
        }
        if (code == 1 || code == 0 || code == -1) break;
      }
      if (result.status != 200) {
        std::lock_guard lock(mutex_);
        if (kill_at_ && !failed_at_) failed_at_ = SteadyClock::now();
      }
      if (result.status == 503) {
        if (!result.headers.contains("retry-after")) ++retry_after_missing_;
        if (Field(result, "status") == "unknown_outcome") ++unknown_;
      }
      if (result.status == 0) client = std::make_unique<HttpClient>("127.0.0.1", port);
      ++retries_;
      std::this_thread::sleep_for(milliseconds(20));
    }
    ++finished_;
  }
}

int64_t SqliteScalar(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  int64_t value = -1;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW) {
      value = sqlite3_column_int64(statement, 0);
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return value;
}

std::vector<std::string> SqliteColumn(const std::string& db_path, const std::string& sql) {
  std::vector<std::string> out;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK) {
      while (sqlite3_step(statement) == SQLITE_ROW) {
        const unsigned char* text = sqlite3_column_text(statement, 0);
        out.emplace_back(text != nullptr ? reinterpret_cast<const char*>(text) : "");
      }
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return out;
}

WholeCheckResult ExpectWholeCheck(const WholeCheckOptions& options) {
  WholeCheckResult result;
  load::VerifyOptions verify;
  verify.redis_url = options.redis_url;
  verify.key_namespace = options.key_namespace;
  verify.db_url = "sqlite:" + options.db_path;
  verify.activity = options.activity;
  verify.drain_timeout_ms = 60000;

  // 1. Drained (the first pass waits for the pipeline), then which acknowledged orders the record
  // lacks: those exist nowhere (an order of the record missing from Redis is applied again by the
  // repair, which the second pass checks unit for unit).
  verify.reserved_replies = static_cast<int64_t>(options.acknowledged.size());
  verify.reserved_order_ids = options.acknowledged;
  auto drained = load::VerifySale(verify);
  if (!drained.ok()) {
    ADD_FAILURE() << drained.error().ToString();
    return result;
  }
  std::vector<std::string> kept;
  result.lost = 0;
  for (size_t i = 0; i < options.acknowledged.size(); ++i) {
    const std::string& id = options.acknowledged[i];
    const int64_t rows = SqliteScalar(
        options.db_path, fmt::format("SELECT COUNT(*) FROM orders WHERE order_id = '{}'", id));
    EXPECT_LE(rows, 1) << id << " recorded twice";
    if (rows == 1) {
      kept.push_back(id);
    } else {
      ++result.lost;
      result.lost_at.push_back(i);
    }
  }

  // 2. Every other part of the check, exactly, on the acknowledged orders that were kept.
  verify.reserved_replies = static_cast<int64_t>(kept.size());
  verify.reserved_order_ids = kept;
  verify.drain_timeout_ms = 10000;
  auto verified = load::VerifySale(verify);
  if (!verified.ok()) {
    ADD_FAILURE() << verified.error().ToString();
    return result;
  }
  EXPECT_TRUE(verified->ok()) << load::FormatVerification(*verified);

  result.sold = SqliteScalar(
      options.db_path,
      fmt::format("SELECT COALESCE(SUM(quantity), 0) FROM orders WHERE activity_id = '{}' AND "
                  "state <> 'cancelled'",
                  options.activity));
  EXPECT_LE(result.sold, options.stock) << "oversold";
  EXPECT_LE(static_cast<int64_t>(kept.size()), options.stock);
  EXPECT_EQ(std::set<std::string>(options.acknowledged.begin(), options.acknowledged.end()).size(),
            options.acknowledged.size())
      << "one order id acknowledged twice";
  std::cout << fmt::format(
      "whole check: {} acknowledged, {} units in the record of {}, {} acknowledged and lost\n",
      options.acknowledged.size(), result.sold, options.stock, result.lost);
  return result;
}

}  // namespace flashsale::testing
