#include "load/verify.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <thread>
#include <unordered_set>

#include "keyspace/activity_scripts.h"
#include "keyspace/embedded_scripts.h"
#include "keyspace/inspect.h"
#include "keyspace/order_stream.h"
#include "redis/connection.h"
#include "redis/scripts.h"
#include "redis/url.h"
#include "store/store.h"

namespace flashsale::load {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// Redis, reached from this (blocking) thread: one connection on a private io_context that runs
// only while a call is awaited.
class RedisSide {
 public:
  RedisSide(const redis::ConnectionOptions& options, const std::string& key_namespace)
      : connection_(redis::Connection::Create(io_.get_executor(), options)),
        runner_(connection_, keyspace::Scripts()),
        activity_scripts_(runner_, key_namespace),
        stream_(runner_, key_namespace),
        inspector_(runner_, key_namespace) {
    connection_->Start();
  }
  ~RedisSide() {
    connection_->Stop();
    io_.restart();
    io_.poll();
  }
  RedisSide(const RedisSide&) = delete;
  RedisSide& operator=(const RedisSide&) = delete;

  // Runs `call` to completion, or fails with kUnknownOutcome at `deadline` (the connection's
  // own command deadlines end it sooner).
  template <typename T>
  Result<T> Await(asio::awaitable<Result<T>> call, SteadyTime deadline) {
    auto wrapped =
        [](asio::awaitable<Result<T>> inner) -> asio::awaitable<std::optional<Result<T>>> {
      co_return co_await std::move(inner);
    };
    auto future = asio::co_spawn(io_, wrapped(std::move(call)), asio::use_future);
    io_.restart();
    while (future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return MakeError(ErrorCode::kUnknownOutcome, "Redis did not answer in time");
      }
      io_.run_one_for(std::chrono::milliseconds(50));
    }
    return std::move(*future.get());
  }

  asio::awaitable<Result<keyspace::ActivityStatus>> Status(std::string_view activity) {
    co_return co_await activity_scripts_.AsyncStatus(activity, asio::use_awaitable);
  }
  asio::awaitable<Result<keyspace::GroupInfo>> Info(std::string_view activity) {
    co_return co_await stream_.Info(activity);
  }
  // The order records of wins and sales (a lottery's no-prize draws left out).
  asio::awaitable<Result<int64_t>> OrderRecords(std::string_view activity) {
    auto orders = co_await inspector_.Orders(activity);
    if (!orders) co_return std::move(orders).error();
    co_return static_cast<int64_t>(orders->size());
  }

 private:
  asio::io_context io_{1};
  std::shared_ptr<redis::Connection> connection_;
  redis::ScriptRunner runner_;
  keyspace::ActivityScripts activity_scripts_;
  keyspace::OrderStream stream_;
  keyspace::ActivityInspector inspector_;
};

VerifyCheck Check(std::string name, bool passed, std::string detail) {
  return VerifyCheck{std::move(name), passed, std::move(detail)};
}

// The activity's status, retrying what did not run (the connection may still be opening) until
// the call's deadline.
Result<keyspace::ActivityStatus> StatusOf(RedisSide& redis, std::string_view activity,
                                          std::chrono::milliseconds call_timeout) {
  const SteadyTime deadline = std::chrono::steady_clock::now() + call_timeout;
  for (;;) {
    auto status = redis.Await(redis.Status(activity), deadline);
    if (status || status.error().code != ErrorCode::kUnavailable ||
        std::chrono::steady_clock::now() >= deadline) {
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// How many of the activity's order records are draws that won nothing: a lottery records every
// draw in Redis (so that a retry replays it), the database only the wins. 0 for a sale.
Result<int64_t> NoPrizeRecords(RedisSide& redis, const keyspace::ActivityStatus& status,
                               std::string_view activity, std::chrono::milliseconds call_timeout) {
  if (status.kind != "lottery") return int64_t{0};
  auto wins =
      redis.Await(redis.OrderRecords(activity), std::chrono::steady_clock::now() + call_timeout);
  if (!wins) return std::move(wins).error();
  return std::max<int64_t>(0, status.orders - *wins);
}

// Waits for the order pipeline: every intent delivered and acknowledged, or, where Redis cannot
// say the lag (entries trimmed), nothing pending and the database level with Redis. Sets
// facts.pipeline (the last reading) and facts.drained.
base::Status WaitForDrain(RedisSide& redis, store::Store& store, const VerifyOptions& options,
                          std::chrono::milliseconds call_timeout, SaleFacts& facts) {
  const std::string& activity = options.activity;
  const SteadyTime drain_deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.drain_timeout_ms);
  for (;;) {
    auto latest = redis.Await(redis.Info(activity), drain_deadline + call_timeout);
    if (!latest) return std::move(latest).error();
    facts.pipeline = *latest;
    const keyspace::GroupInfo& info = facts.pipeline;
    if (info.pending == 0 && info.lag == 0) facts.drained = true;
    if (!facts.drained && info.pending == 0 && info.lag < 0) {
      auto counts = store.CountOrders(activity);
      if (!counts) return std::move(counts).error();
      auto now_status = StatusOf(redis, activity, call_timeout);
      if (!now_status) return std::move(now_status).error();
      auto no_prize = NoPrizeRecords(redis, *now_status, activity, call_timeout);
      if (!no_prize) return std::move(no_prize).error();
      facts.drained = counts->orders == now_status->orders - *no_prize;
    }
    if (facts.drained || std::chrono::steady_clock::now() >= drain_deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return base::Status();
}

// The facts, read after the drain so that Redis and the database describe the same moment.
base::Status ReadFacts(RedisSide& redis, store::Store& store, const VerifyOptions& options,
                       std::chrono::milliseconds call_timeout, SaleFacts& facts) {
  auto status = StatusOf(redis, options.activity, call_timeout);
  if (!status) return std::move(status).error();
  facts.status = *status;
  auto no_prize = NoPrizeRecords(redis, *status, options.activity, call_timeout);
  if (!no_prize) return std::move(no_prize).error();
  facts.no_prize_records = *no_prize;
  auto counts = store.CountOrders(options.activity);
  if (!counts) return std::move(counts).error();
  facts.counts = *counts;
  auto audit = store.AuditOrders(options.activity, status->per_user_limit);
  if (!audit) return std::move(audit).error();
  facts.audit = std::move(*audit);
  for (const std::string& order_id : options.reserved_order_ids) {
    auto order = store.GetOrder(order_id);
    if (order) continue;
    if (order.error().code != ErrorCode::kNotFound) return std::move(order).error();
    if (facts.missing++ == 0) facts.missing_example = order_id;
  }
  return base::Status();
}

}  // namespace

bool Verification::ok() const {
  for (const VerifyCheck& check : checks) {
    if (!check.passed) return false;
  }
  return true;
}

std::string Verification::Failed() const {
  std::string failed;
  for (const VerifyCheck& check : checks) {
    if (check.passed) continue;
    if (!failed.empty()) failed += ", ";
    failed += check.name;
  }
  return failed;
}

Verification CheckSale(const VerifyOptions& options, const SaleFacts& facts) {
  const keyspace::ActivityStatus& status = facts.status;
  const keyspace::GroupInfo& info = facts.pipeline;
  const store::OrderCounts& counts = facts.counts;
  Verification result;
  const int64_t sold = status.reserved - status.released;
  result.checks.push_back(
      Check("redis stock", sold == status.total - status.remaining,
            fmt::format("{} units loaded, {} remaining, {} sold ({} reserved - {} released)",
                        status.total, status.remaining, sold, status.reserved, status.released)));

  std::unordered_set<std::string_view> distinct(options.reserved_order_ids.begin(),
                                                options.reserved_order_ids.end());
  const bool replies_ok = options.reserved_replies <= status.reserved &&
                          distinct.size() == options.reserved_order_ids.size();
  result.checks.push_back(Check(
      "reserved replies", replies_ok,
      fmt::format("{} replies said reserved, Redis reserved {} units; {} distinct order ids of {}",
                  options.reserved_replies, status.reserved, distinct.size(),
                  options.reserved_order_ids.size())));

  result.checks.push_back(Check("pipeline drained", facts.drained,
                                fmt::format("stream lag {}, pending {} (waited at most {} ms)",
                                            info.lag, info.pending, options.drain_timeout_ms)));
  result.checks.push_back(Check("dead letters", info.dead_letters == 0,
                                fmt::format("{} in the dead-letter stream", info.dead_letters)));

  // Like with like: the database keeps no row for a draw that won nothing.
  const int64_t order_records = status.orders - facts.no_prize_records;
  const bool db_ok = counts.units == sold && counts.cancelled_units == status.released &&
                     counts.orders == order_records;
  const std::string no_prize =
      facts.no_prize_records == 0
          ? ""
          : fmt::format(" (and {} draws that won nothing, which the database does not keep)",
                        facts.no_prize_records);
  result.checks.push_back(Check(
      "db units", db_ok,
      fmt::format("database: {} rows, {} live units, {} cancelled; Redis: {} order records{}, "
                  "{} units sold, {} released",
                  counts.orders, counts.units, counts.cancelled_units, order_records, no_prize,
                  sold, status.released)));

  std::string over;
  for (const auto& [user, units] : facts.audit.users_over_limit) {
    over += fmt::format(" {} holds {};", user, units);
  }
  result.checks.push_back(Check(
      "per-user limit", facts.audit.users_over_limit.empty(),
      fmt::format("limit {}:{}", status.per_user_limit, over.empty() ? " nobody above" : over)));
  result.checks.push_back(Check(
      "duplicate orders", facts.audit.duplicate_intents == 0,
      fmt::format("{} rows repeat another row's order intent", facts.audit.duplicate_intents)));

  const std::string example =
      facts.missing == 0 ? "" : fmt::format(" (e.g. {})", facts.missing_example);
  result.checks.push_back(
      Check("lost intents", facts.missing == 0,
            fmt::format("{} of {} reserved order ids not in the database{}", facts.missing,
                        options.reserved_order_ids.size(), example)));
  return result;
}

Result<Verification> VerifySale(const VerifyOptions& options) {
  auto endpoint = redis::ParseUrl(options.redis_url);
  if (!endpoint) return std::move(endpoint).error();
  redis::ConnectionOptions redis_options;
  redis_options.endpoint = *endpoint;
  redis_options.command_timeout = std::chrono::milliseconds(options.redis_timeout_ms);
  redis_options.connect_timeout = std::chrono::milliseconds(options.redis_timeout_ms);
  auto store = store::OpenStore(options.db_url);
  if (!store) return std::move(store).error();
  RedisSide redis(redis_options, options.key_namespace);
  const auto call_timeout = std::chrono::milliseconds(options.redis_timeout_ms * 3);

  auto status = StatusOf(redis, options.activity, call_timeout);
  if (!status) return std::move(status).error();
  if (!status->found) {
    return MakeError(ErrorCode::kNotFound, "activity '{}' is not in Redis (namespace '{}')",
                     options.activity, options.key_namespace);
  }
  SaleFacts facts;
  auto drained = WaitForDrain(redis, **store, options, call_timeout, facts);
  if (!drained) return std::move(drained).error();
  auto read = ReadFacts(redis, **store, options, call_timeout, facts);
  if (!read) return std::move(read).error();
  return CheckSale(options, facts);
}

std::string FormatVerification(const Verification& verification) {
  std::string out;
  for (const VerifyCheck& check : verification.checks) {
    out +=
        fmt::format("  {}  {:<17} {}\n", check.passed ? "PASS" : "FAIL", check.name, check.detail);
  }
  out += verification.ok() ? "verified: the sale holds together\n"
                           : "verification FAILED: " + verification.Failed() + "\n";
  return out;
}

}  // namespace flashsale::load
