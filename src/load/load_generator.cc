#include "load/load_generator.h"

// Boost 1.81's core/string_view needs <ostream> first.
#include <ostream>
// clang-format off
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
// clang-format on
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "core/token.h"

namespace flashsale::load {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using asio::ip::tcp;
using base::ErrorCode;
using base::MakeError;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr int64_t kSweepMs = 100;  // how often deadlines are checked
constexpr int64_t kPauseMs = 100;  // after a connection error, before reconnecting
constexpr int64_t kNoEnd = std::numeric_limits<int64_t>::max();

// What every thread shares: the options, the request counter, the schedule, progress counters.
struct Shared {
  const LoadOptions& options;
  std::vector<tcp::endpoint> endpoints;  // the targets
  UserIds users;
  std::vector<std::string> heads;  // per target: request line and Host header
  std::optional<core::TokenSigner> signer;
  int64_t token_expires_ms = 0;
  int64_t limit = kNoEnd;  // requests
  // Set by the barrier's completion once every connection is open (or failed to open).
  int64_t start_ns = 0;
  std::atomic<int64_t> started_ns{0};  // start_ns, for the progress thread
  int64_t end_ns = kNoEnd;             // no request is sent at or after this
  std::optional<OpenLoopSchedule> schedule;

  std::atomic<int64_t> next{0};
  std::atomic<int64_t> sent{0};
  std::atomic<int64_t> completed{0};
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> reserved{0};
  std::atomic<int64_t> last_done_ns{0};
};

// One connection's state, reachable by the deadline sweeper.
struct Slot {
  explicit Slot(const asio::any_io_executor& executor) : socket(executor), pause(executor) {}
  tcp::socket socket;
  asio::steady_timer pause;
  beast::flat_buffer buffer;
  int64_t deadline_ns = 0;  // 0: no operation in progress
  bool timed_out = false;
  size_t target = 0;  // index into Shared::endpoints
};

class Worker {
 public:
  // `first`: the run-wide number of this worker's first connection (targets go round robin).
  Worker(Shared& shared, int index, int connections, int first)
      : shared_(shared), random_(shared.options.seed + static_cast<uint64_t>(index)) {
    for (int i = 0; i < connections; ++i) {
      slots_.push_back(std::make_unique<Slot>(io_.get_executor()));
      slots_.back()->target = static_cast<size_t>(first + i) % shared.endpoints.size();
    }
  }

  // Opens every connection, waits at `barrier` for the other threads, then sends until the run
  // ends. Runs on its own thread.
  void Run(std::barrier<std::function<void()>>& barrier) {
    Stage([this](Slot& slot) { return Open(slot); });
    barrier.arrive_and_wait();
    Stage([this](Slot& slot) { return Loop(slot); });
    for (auto& slot : slots_) {
      boost::system::error_code ignored;
      slot->socket.close(ignored);
    }
  }

  LoadReport& report() { return report_; }

 private:
  template <typename Start>
  void Stage(Start start) {
    alive_ = static_cast<int>(slots_.size());
    for (auto& slot : slots_) {
      asio::co_spawn(io_, start(*slot), asio::detached);
    }
    asio::co_spawn(io_, Sweep(), asio::detached);
    io_.restart();
    io_.run();
  }

  int64_t Now() const { return shared_.options.clock->NowNs(); }

  void Fail(Slot& slot, const std::string& kind) {
    ++report_.errors[kind];
    shared_.errors.fetch_add(1, std::memory_order_relaxed);
    boost::system::error_code ignored;
    slot.socket.close(ignored);
    slot.buffer.clear();
  }

  // Cancels whatever a slot is doing past its deadline; ends when every connection has.
  asio::awaitable<void> Sweep() {
    asio::steady_timer timer(io_);
    while (alive_ > 0) {
      timer.expires_after(std::chrono::milliseconds(kSweepMs));
      co_await timer.async_wait(kTuple);
      const int64_t now = Now();
      for (auto& slot : slots_) {
        if (slot->deadline_ns != 0 && now >= slot->deadline_ns) {
          slot->timed_out = true;
          slot->deadline_ns = 0;
          boost::system::error_code ignored;
          slot->socket.cancel(ignored);
        }
      }
    }
  }

  // Connects within the connect timeout; false (the error counted) if it could not.
  asio::awaitable<bool> Connect(Slot& slot) {
    slot.timed_out = false;
    slot.deadline_ns = Now() + shared_.options.connect_timeout_ms * 1'000'000;
    auto [error] = co_await slot.socket.async_connect(shared_.endpoints[slot.target], kTuple);
    slot.deadline_ns = 0;
    if (error) {
      Fail(slot, slot.timed_out ? "connect timeout" : "connect");
      co_return false;
    }
    boost::system::error_code ignored;
    slot.socket.set_option(tcp::no_delay(true), ignored);
    co_return true;
  }

  asio::awaitable<void> Open(Slot& slot) {
    co_await Connect(slot);
    --alive_;
  }

  asio::awaitable<void> Pause(Slot& slot) {
    slot.pause.expires_after(std::chrono::milliseconds(kPauseMs));
    co_await slot.pause.async_wait(kTuple);
  }

  void BuildRequest(int64_t index, size_t target, std::string& request) {
    request.assign(shared_.heads[target]);
    const std::string user = shared_.users.For(index, random_);
    if (shared_.signer) {
      request += "Authorization: Bearer ";
      request += shared_.signer->Issue(user, shared_.token_expires_ms);
    } else {
      request += "X-User-Id: ";
      request += user;
    }
    request += "\r\nContent-Length: 0\r\n\r\n";
  }

  void Count(const http::response<http::string_body>& response) {
    ++report_.http_statuses[static_cast<int>(response.result_int())];
    // Replies are small: parsed into a buffer on the stack, no allocation.
    unsigned char scratch[4096];
    json::monotonic_resource memory(scratch, sizeof(scratch));
    boost::system::error_code error;
    const json::value body = json::parse(response.body(), error, &memory);
    const json::object* object = error ? nullptr : body.if_object();
    const json::value* code = object ? object->if_contains("code") : nullptr;
    if (code == nullptr || !code->is_int64()) {
      ++report_.no_code;
      return;
    }
    const int64_t value = code->as_int64();
    ++report_.codes[value];
    if (report_.statuses.find(value) == report_.statuses.end()) {
      const json::value* status = object->if_contains("status");
      report_.statuses[value] =
          status && status->is_string() ? std::string(status->as_string()) : std::string();
    }
    if (value == 1) {
      shared_.reserved.fetch_add(1, std::memory_order_relaxed);
      const json::value* order = object->if_contains("order_id");
      if (shared_.options.keep_order_ids && order && order->is_string()) {
        report_.reserved_order_ids.emplace_back(order->as_string());
      }
    }
  }

  asio::awaitable<void> Loop(Slot& slot) {
    const LoadOptions& options = shared_.options;
    std::string request;
    for (;;) {
      const int64_t index = shared_.next.fetch_add(1, std::memory_order_relaxed);
      if (index >= shared_.limit) break;
      int64_t intended = 0;
      if (shared_.schedule) {
        intended = shared_.schedule->IntendedNs(index);
        if (intended >= shared_.end_ns) break;
        if (const int64_t wait = shared_.schedule->WaitNs(index, Now()); wait > 0) {
          slot.pause.expires_after(std::chrono::nanoseconds(wait));
          co_await slot.pause.async_wait(kTuple);
        }
      } else if (Now() >= shared_.end_ns) {
        break;
      }
      shared_.sent.fetch_add(1, std::memory_order_relaxed);
      ++report_.sent;
      if (!slot.socket.is_open()) {
        const bool connected = co_await Connect(slot);
        if (!connected) {
          co_await Pause(slot);
          continue;
        }
      }
      BuildRequest(index, slot.target, request);
      const int64_t sent_ns = Now();
      slot.timed_out = false;
      slot.deadline_ns = sent_ns + options.request_timeout_ms * 1'000'000;
      auto [write_error, written] =
          co_await asio::async_write(slot.socket, asio::buffer(request), kTuple);
      if (write_error) {
        slot.deadline_ns = 0;
        Fail(slot, slot.timed_out ? "timeout" : "write");
        continue;
      }
      http::response_parser<http::string_body> parser;
      parser.body_limit(1 << 20);
      auto [read_error, read] = co_await http::async_read(slot.socket, slot.buffer, parser, kTuple);
      slot.deadline_ns = 0;
      if (read_error) {
        const bool closed = read_error == http::error::end_of_stream ||
                            read_error == asio::error::eof ||
                            read_error == asio::error::connection_reset;
        Fail(slot, slot.timed_out ? "timeout" : closed ? "closed" : "read");
        continue;
      }
      const int64_t done = Now();
      report_.latency.Record(shared_.schedule ? done - intended : done - sent_ns);
      ++report_.completed;
      shared_.completed.fetch_add(1, std::memory_order_relaxed);
      int64_t last = shared_.last_done_ns.load(std::memory_order_relaxed);
      while (last < done && !shared_.last_done_ns.compare_exchange_weak(last, done)) {
      }
      Count(parser.get());
      if (!parser.get().keep_alive()) {
        boost::system::error_code ignored;
        slot.socket.close(ignored);
        slot.buffer.clear();
      }
    }
    --alive_;
  }

  Shared& shared_;
  asio::io_context io_{1};
  base::SeededRandom random_;
  std::deque<std::unique_ptr<Slot>> slots_;
  int alive_ = 0;
  LoadReport report_;
};

base::Status Check(const LoadOptions& options) {
  auto invalid = [](std::string_view what) {
    return MakeError(ErrorCode::kInvalidArgument, "{}", what);
  };
  if (options.requests <= 0 && options.duration_s <= 0) {
    return invalid("give a number of requests or a duration (or both)");
  }
  if (options.mode == LoadMode::kOpen && options.rate <= 0) {
    return invalid("an open loop needs a rate above 0 requests/s");
  }
  if (options.connections < 1 || options.threads < 1) {
    return invalid("connections and threads must be at least 1");
  }
  if (options.users < 1) return invalid("users must be at least 1");
  if (options.action != "purchase" && options.action != "draw") {
    return invalid("the action is purchase or draw");
  }
  if (options.connect_timeout_ms < 1 || options.request_timeout_ms < 1) {
    return invalid("timeouts must be at least 1 ms");
  }
  return {};
}

}  // namespace

int64_t LoadReport::Count(int64_t code) const {
  auto it = codes.find(code);
  return it == codes.end() ? 0 : it->second;
}

int64_t LoadReport::ErrorCount() const {
  int64_t total = 0;
  for (const auto& [kind, count] : errors) total += count;
  return total;
}

base::Result<LoadReport> RunLoad(const LoadOptions& options) {
  if (auto checked = Check(options); !checked) return std::move(checked).error();

  Shared shared{.options = options,
                .users = UserIds(options.user_prefix, options.users, options.random_users)};
  std::vector<std::pair<std::string, uint16_t>> targets = {{options.host, options.port}};
  targets.insert(targets.end(), options.more_targets.begin(), options.more_targets.end());
  asio::io_context resolver_io;
  tcp::resolver resolver(resolver_io);
  for (const auto& [host, port] : targets) {
    boost::system::error_code resolve_error;
    auto resolved = resolver.resolve(host, std::to_string(port), resolve_error);
    if (resolve_error || resolved.empty()) {
      return MakeError(ErrorCode::kUnavailable, "resolve {}: {}", host,
                       resolve_error ? resolve_error.message() : "no address");
    }
    shared.endpoints.push_back(resolved.begin()->endpoint());
    shared.heads.push_back(fmt::format("POST /api/v1/activities/{}/{} HTTP/1.1\r\nHost: {}:{}\r\n",
                                       options.activity, options.action, host, port));
  }
  if (!options.token_secret.empty()) {
    shared.signer.emplace(options.token_secret);
    shared.token_expires_ms = options.wall_clock->NowMs() + 3'600'000;
  }
  if (options.requests > 0) shared.limit = options.requests;

  const int threads = std::min(options.threads, options.connections);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0, first = 0; t < threads; ++t) {
    // Connections spread evenly, the first threads taking one more when they do not divide.
    const int connections = options.connections / threads + (t < options.connections % threads);
    workers.push_back(std::make_unique<Worker>(shared, t, connections, first));
    first += connections;
  }

  // Once every thread has opened its connections: the clock starts.
  std::function<void()> start = [&shared, &options] {
    shared.start_ns = options.clock->NowNs();
    shared.started_ns.store(shared.start_ns);
    if (options.duration_s > 0) {
      shared.end_ns = shared.start_ns + static_cast<int64_t>(options.duration_s * 1e9);
    }
    if (options.mode == LoadMode::kOpen) shared.schedule.emplace(options.rate, shared.start_ns);
  };
  std::barrier<std::function<void()>> barrier(threads, start);

  std::mutex mutex;
  std::condition_variable finished_cv;
  int finished = 0;
  std::vector<std::thread> running;
  for (auto& worker : workers) {
    running.emplace_back([&, w = worker.get()] {
      w->Run(barrier);
      std::lock_guard lock(mutex);
      ++finished;
      finished_cv.notify_all();
    });
  }
  auto snapshot = [&] {
    LoadProgress progress;
    const int64_t started = shared.started_ns.load();
    progress.elapsed_s = started == 0 ? 0 : (options.clock->NowNs() - started) / 1e9;
    progress.sent = shared.sent.load(std::memory_order_relaxed);
    progress.completed = shared.completed.load(std::memory_order_relaxed);
    progress.errors = shared.errors.load(std::memory_order_relaxed);
    progress.reserved = shared.reserved.load(std::memory_order_relaxed);
    return progress;
  };
  {
    std::unique_lock lock(mutex);
    const auto interval =
        std::chrono::milliseconds(std::max<int64_t>(options.progress_interval_ms, 10));
    while (!finished_cv.wait_for(lock, interval, [&] { return finished == threads; })) {
      if (options.progress) {
        lock.unlock();
        options.progress(snapshot());
        lock.lock();
      }
    }
  }
  for (auto& thread : running) thread.join();

  LoadReport report;
  for (auto& worker : workers) {
    LoadReport& part = worker->report();
    report.sent += part.sent;
    report.completed += part.completed;
    report.latency.Merge(part.latency);
    for (const auto& [code, count] : part.codes) report.codes[code] += count;
    for (const auto& [code, status] : part.statuses) report.statuses.emplace(code, status);
    report.no_code += part.no_code;
    for (const auto& [status, count] : part.http_statuses) report.http_statuses[status] += count;
    for (const auto& [kind, count] : part.errors) report.errors[kind] += count;
    report.reserved_order_ids.insert(report.reserved_order_ids.end(),
                                     std::make_move_iterator(part.reserved_order_ids.begin()),
                                     std::make_move_iterator(part.reserved_order_ids.end()));
  }
  const int64_t last = shared.last_done_ns.load();
  const int64_t end = last > shared.start_ns ? last : options.clock->NowNs();
  report.elapsed_s = static_cast<double>(end - shared.start_ns) / 1e9;
  return report;
}

std::string FormatProgress(const LoadProgress& progress) {
  const double rate = progress.elapsed_s > 0 ? progress.completed / progress.elapsed_s : 0;
  return fmt::format("{:6.1f} s  sent {}  answered {}  ({:.0f}/s)  reserved {}  errors {}",
                     progress.elapsed_s, progress.sent, progress.completed, rate, progress.reserved,
                     progress.errors);
}

std::string FormatReport(const LoadReport& report, const std::string& title) {
  auto ms = [&](double q) { return report.latency.Percentile(q) / 1e6; };
  std::string out = title + "\n";
  out += fmt::format(
      "  requests   {} sent, {} answered in {:.3f} s: {:.0f} requests/s; {} errors\n", report.sent,
      report.completed, report.elapsed_s, report.RequestsPerSecond(), report.ErrorCount());
  out += fmt::format(
      "  latency    p50 {:.3f} ms  p90 {:.3f} ms  p99 {:.3f} ms  p99.9 {:.3f} ms  max {:.3f} ms\n",
      ms(0.5), ms(0.9), ms(0.99), ms(0.999), report.latency.max() / 1e6);
  out += "  outcomes  ";
  for (const auto& [code, count] : report.codes) {
    auto status = report.statuses.find(code);
    out += fmt::format(" {} {}: {};", code, status == report.statuses.end() ? "" : status->second,
                       count);
  }
  if (report.no_code > 0) out += fmt::format(" no code: {};", report.no_code);
  if (report.codes.empty() && report.no_code == 0) out += " none";
  out += "\n  http      ";
  for (const auto& [status, count] : report.http_statuses) {
    out += fmt::format(" {}: {};", status, count);
  }
  if (report.http_statuses.empty()) out += " none";
  out += "\n  errors    ";
  for (const auto& [kind, count] : report.errors) out += fmt::format(" {}: {};", kind, count);
  if (report.errors.empty()) out += " none";
  out += "\n";
  return out;
}

}  // namespace flashsale::load
