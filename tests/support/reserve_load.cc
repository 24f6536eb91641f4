#include "support/reserve_load.h"

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <mutex>
#include <thread>

#include "base/clock.h"
#include "base/ids.h"
#include "base/random.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/embedded_scripts.h"
#include "support/io_thread.h"
#include "support/redis_helpers.h"

namespace flashsale::testing {

namespace asio = boost::asio;
using namespace std::chrono_literals;

int64_t ReserveLoadReport::Count(core::Outcome outcome) const {
  int64_t n = 0;
  for (const auto& attempt : attempts) n += attempt.resolved && attempt.outcome == outcome;
  return n;
}

int64_t ReserveLoadReport::Unresolved() const {
  int64_t n = 0;
  for (const auto& attempt : attempts) n += !attempt.resolved;
  return n;
}

namespace {

struct Shared {
  const ReserveLoadOptions* options;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> finished{0};
  std::mutex mutex;  // guards the report's error fields
  ReserveLoadReport* report;
};

struct Worker {
  std::unique_ptr<IoThread> io;
  std::shared_ptr<redis::Connection> connection;
  std::unique_ptr<redis::ScriptRunner> runner;
  std::unique_ptr<keyspace::ActivityScripts> scripts;
};

asio::awaitable<void> Caller(Shared& shared, keyspace::ActivityScripts& scripts, uint64_t seed) {
  const auto& options = *shared.options;
  base::SeededRandom random(seed);
  base::ManualClock id_clock(options.now_ms);
  base::OrderIdGenerator ids(id_clock, random);
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (;;) {
    const int64_t index = shared.next.fetch_add(1);
    if (index >= options.attempts) break;
    AttemptRecord& record = shared.report->attempts[static_cast<size_t>(index)];
    record.order_id = ids.Next();
    record.user_id = "u" + std::to_string(random.Uniform(static_cast<uint64_t>(options.users)));
    const uint64_t pick = random.Uniform(keyspace::kDrawRandomBound);
    const uint64_t fallback = random.Uniform(keyspace::kDrawRandomBound);
    const auto give_up = std::chrono::steady_clock::now() + options.retry_for;
    while (!record.resolved && std::chrono::steady_clock::now() < give_up) {
      ++record.calls;
      base::Status failed;
      if (options.draw) {
        const keyspace::DrawRequest request{.order_id = record.order_id,
                                            .user_id = record.user_id,
                                            .now_ms = options.now_ms,
                                            .pick = pick,
                                            .fallback = fallback};
        auto result = co_await scripts.AsyncDraw(options.activity_id, request, asio::use_awaitable);
        if (result.ok()) {
          record.resolved = true;
          record.outcome = result->outcome;
          record.replayed = result->replayed;
          record.draws = result->draws;
          if (!result->prize_id.empty()) record.items = {result->prize_id};
          break;
        }
        failed = std::move(result).error();
      } else {
        const keyspace::ReserveRequest request{.order_id = record.order_id,
                                               .user_id = record.user_id,
                                               .quantity = options.quantity,
                                               .now_ms = options.now_ms};
        auto result =
            co_await scripts.AsyncReserve(options.activity_id, request, asio::use_awaitable);
        if (result.ok()) {
          record.resolved = true;
          record.outcome = result->outcome;
          record.replayed = result->replayed;
          record.items = std::move(result->items);
          break;
        }
        failed = std::move(result).error();
      }
      {
        std::lock_guard lock(shared.mutex);
        ++shared.report->failed_calls;
        ++shared.report->error_codes[failed.error().code];
        if (shared.report->sample_errors.size() < 20) {
          shared.report->sample_errors.push_back(failed.error().ToString());
        }
      }
      // Not resolved: the same order id again after a short pause. Safe whatever the error
      // meant, because a second reserve with this id cannot take a second unit.
      pause.expires_after(5ms);
      co_await pause.async_wait(asio::use_awaitable);
    }
    shared.finished.fetch_add(1);
  }
}

}  // namespace

ReserveLoadReport RunReserveLoad(const ReserveLoadOptions& options) {
  ReserveLoadReport report;
  report.attempts.resize(static_cast<size_t>(options.attempts));
  Shared shared{.options = &options, .report = &report};

  std::vector<Worker> workers(static_cast<size_t>(options.connections));
  redis::ConnectionOptions connection_options;
  connection_options.command_timeout = options.call_timeout;
  for (auto& worker : workers) {
    worker.io = std::make_unique<IoThread>();
    worker.connection = Connect(*worker.io, options.url, connection_options);
    worker.runner = std::make_unique<redis::ScriptRunner>(worker.connection, keyspace::Scripts());
    worker.scripts =
        std::make_unique<keyspace::ActivityScripts>(*worker.runner, options.key_namespace);
  }

  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> callers_left = options.connections * options.callers_per_connection;
  std::atomic<int> exceptions = 0;
  uint64_t seed = options.seed;
  for (auto& worker : workers) {
    for (int i = 0; i < options.callers_per_connection; ++i) {
      asio::co_spawn(worker.io->context(), Caller(shared, *worker.scripts, seed++),
                     [&callers_left, &exceptions](std::exception_ptr error) {
                       if (error) ++exceptions;
                       --callers_left;
                     });
    }
  }
  bool midway_done = options.midway == nullptr;
  const auto deadline = start + options.retry_for + 120s;
  while (callers_left.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    if (!midway_done && shared.finished.load() >= options.midway_at) {
      options.midway();
      midway_done = true;
    }
    std::this_thread::sleep_for(1ms);
  }
  report.elapsed = std::chrono::steady_clock::now() - start;
  report.caller_exceptions = exceptions.load();
  for (auto& worker : workers) {
    worker.io->Call([&] {
      report.script_reloads += worker.runner->reloads();
      worker.connection->Stop();
    });
  }
  return report;
}

}  // namespace flashsale::testing
