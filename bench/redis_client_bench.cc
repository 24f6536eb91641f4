// Throughput of the client's pipelined EVALSHA of the reserve script, every call reserving (the
// hot phase of a sale): one I/O thread, one connection, a fixed number of calls in flight.
//
//   redis_client_bench [google-benchmark flags]   against $FLASHSALE_BENCH_REDIS_URL, or a
//                                                 private redis-server if it is not set
//   redis_client_bench --setup                    creates the bench activity at that URL and
//                                                 prints the reserve call as redis-benchmark
//                                                 arguments, one a line (some are empty: read
//                                                 them with mapfile; bench/redis_ratio.sh)
//   redis_client_bench --setup-batch N            the same, one call deciding a batch of N
//                                                 reservations (sale_reserve.lua takes
//                                                 batches; a single call is a batch of one)
//   redis_client_bench --setup-sold-out           the same for an activity with no stock left:
//                                                 every call answers sold out (the sold-out
//                                                 phase of bench/side_by_side.sh)
//   redis_client_bench --setup-<other>            exits 2: bench/hot_path.sh asks for
//                                                 --setup-batch N (one call deciding N
//                                                 reservations) and prints n/a without it
//
// Items per second is the number to compare with redis-benchmark running the same script.

#include <benchmark/benchmark.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/random.h"
#include "keyspace/activity_scripts.h"
#include "keyspace/embedded_scripts.h"
#include "support/redis_server.h"

namespace flashsale::bench {
namespace {

namespace asio = boost::asio;

constexpr std::string_view kNamespace = "bench";
constexpr std::string_view kActivity = "hot";
constexpr int64_t kNowMs = 1'800'000'000'000;

// Stock and limit so large that every call in the run reserves.
core::Activity HotActivity() {
  core::Activity activity;
  activity.id = std::string(kActivity);
  activity.start_ms = 0;
  activity.end_ms = 4'000'000'000'000;
  activity.per_user_limit = 1'000'000'000;
  activity.stock = 1'000'000'000'000;
  return activity;
}

// No stock: every call finds it gone.
core::Activity SoldOutActivity() {
  core::Activity activity = HotActivity();
  activity.id = "gone";
  activity.stock = 0;
  return activity;
}

std::optional<testing::RedisServer> own_server;

std::string RedisUrl() {
  if (const char* url = std::getenv("FLASHSALE_BENCH_REDIS_URL"); url != nullptr && *url) {
    return url;
  }
  if (!own_server) own_server.emplace();
  return own_server->unix_url();
}

struct Client {
  asio::io_context io;
  std::shared_ptr<redis::Connection> connection;
  std::unique_ptr<redis::ScriptRunner> runner;
  std::unique_ptr<keyspace::ActivityScripts> scripts;

  explicit Client(const std::string& url) {
    redis::ConnectionOptions options;
    options.endpoint = *redis::ParseUrl(url);
    options.command_timeout = std::chrono::seconds(10);
    connection = redis::Connection::Create(io.get_executor(), options);
    connection->Start();
    runner = std::make_unique<redis::ScriptRunner>(connection, keyspace::Scripts());
    scripts = std::make_unique<keyspace::ActivityScripts>(*runner, std::string(kNamespace));
  }

  // Runs the io_context until `done` says so.
  template <typename Done>
  void RunUntil(Done done) {
    while (!done()) io.run_one();
  }

  // Loads every script (redis-benchmark's EVALSHA needs them cached) and the activity.
  base::Status Setup(const core::Activity& activity = HotActivity()) {
    std::optional<base::Status> loaded;
    runner->LoadAll(connection->DefaultDeadline(),
                    asio::any_completion_handler<void(base::Status)>(
                        [&](base::Status status) { loaded = std::move(status); }));
    RunUntil([&] { return loaded.has_value(); });
    if (!loaded->ok()) return *loaded;
    std::optional<base::Status> status;
    scripts->Setup(
        activity, keyspace::SetupMode::kLoadIfMissing,
        keyspace::Handler<keyspace::SetupResult>([&](base::Result<keyspace::SetupResult> result) {
          status = result.ok() ? base::Status() : base::Status(result.error());
        }));
    RunUntil([&] { return status.has_value(); });
    return *status;
  }
};

void BM_PipelinedReserve(benchmark::State& state) {
  const int64_t in_flight = state.range(0);
  constexpr int64_t kBatch = 20000;
  Client client(RedisUrl());
  if (auto setup = client.Setup(); !setup.ok()) {
    state.SkipWithError(setup.error().ToString().c_str());
    return;
  }
  base::SeededRandom random(static_cast<uint64_t>(in_flight));
  base::ManualClock clock(kNowMs);
  base::OrderIdGenerator ids(clock, random);
  int64_t errors = 0, not_reserved = 0, total = 0;

  for (auto _ : state) {
    int64_t issued = 0, completed = 0;
    // A closed loop of `in_flight` calls: each completion issues the next.
    std::function<void()> issue = [&] {
      ++issued;
      // Reserve copies the request into the command before it returns.
      const std::string order = ids.Next();
      const std::string user = "u" + std::to_string(random.Uniform(100'000'000));
      keyspace::ReserveRequest request{
          .order_id = order, .user_id = user, .quantity = 1, .now_ms = kNowMs};
      client.scripts->Reserve(
          kActivity, request,
          keyspace::Handler<keyspace::Reservation>([&](base::Result<keyspace::Reservation> result) {
            ++completed;
            if (!result.ok()) {
              ++errors;
            } else if (result->outcome != core::Outcome::kReserved) {
              ++not_reserved;
            }
            if (issued < kBatch) issue();
          }));
    };
    for (int64_t i = 0; i < in_flight && issued < kBatch; ++i) issue();
    client.RunUntil([&] { return completed == kBatch; });
    total += kBatch;
  }
  state.SetItemsProcessed(total);
  state.counters["errors"] = static_cast<double>(errors);
  state.counters["not_reserved"] = static_cast<double>(not_reserved);
  const auto& stats = client.connection->stats();
  state.counters["cmds_per_write"] =
      stats.writes.value() == 0
          ? 0.0
          : static_cast<double>(stats.commands.value()) / static_cast<double>(stats.writes.value());
  client.connection->Stop();
  client.io.run();
}
BENCHMARK(BM_PipelinedReserve)->Arg(1)->Arg(16)->Arg(256)->Arg(1024)->UseRealTime()->MinTime(2.0);

// Prints the reserve call for redis-benchmark: its __rand_int__ placeholders make a fresh order
// id and user for every request, as our benchmark does.
int PrintSetup(const core::Activity& activity, int batch = 1) {
  Client client(RedisUrl());
  if (auto setup = client.Setup(activity); !setup.ok()) {
    std::cerr << "setup failed: " << setup.error().ToString() << "\n";
    return 1;
  }
  // The binding's own call: the same KEYS and ARGV as a purchase, whatever the script declares.
  keyspace::ReserveRequest request;
  request.order_id = "o__rand_int__";
  request.user_id = "u__rand_int__";
  request.quantity = 1;
  request.now_ms = kNowMs;
  // redis-benchmark replaces every __rand_int__ on its own: each request of a batch is fresh.
  const std::vector<keyspace::ReserveRequest> requests(static_cast<size_t>(batch), request);
  auto argv = client.scripts->ReserveBatchArgv(activity.id, requests);
  if (!argv.ok()) {
    std::cerr << argv.error().ToString() << "\n";
    return 1;
  }
  // One argument a line: a request's options are empty (sale_reserve.lua), which a line split
  // at spaces would drop.
  for (std::string_view arg : *argv) std::cout << arg << "\n";
  client.connection->Stop();
  client.io.run();
  return 0;
}

}  // namespace
}  // namespace flashsale::bench

int main(int argc, char** argv) {
  using flashsale::bench::PrintSetup;
  if (argc > 1 && std::string_view(argv[1]) == "--setup") {
    return PrintSetup(flashsale::bench::HotActivity());
  }
  if (argc > 2 && std::string_view(argv[1]) == "--setup-batch") {
    const int batch = std::atoi(argv[2]);
    if (batch < 1 || batch > 10000) {
      std::cerr << "--setup-batch takes a batch size of 1 to 10000\n";
      return 2;
    }
    return PrintSetup(flashsale::bench::HotActivity(), batch);
  }
  if (argc > 1 && std::string_view(argv[1]) == "--setup-sold-out") {
    return PrintSetup(flashsale::bench::SoldOutActivity());
  }
  // Any other --setup-... (e.g. --setup-batch, which bench/hot_path.sh asks for) is not one this
  // build can print: say so rather than run the benchmarks.
  if (argc > 1 && std::string_view(argv[1]).starts_with("--setup")) {
    std::cerr << argv[1] << ": not known to this build (it knows --setup, --setup-sold-out)\n";
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  flashsale::bench::own_server.reset();
  return 0;
}
