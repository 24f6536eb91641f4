#include "service/pipeline.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>

#include "base/process_stats.h"
#include "keyspace/embedded_scripts.h"
#include "redis/scripts.h"
#include "service/admin.h"

namespace flashsale::service {

namespace asio = boost::asio;

namespace {

// The relay's options, counting into the pipeline's metrics (when there are).
RelayOptions WithMetrics(RelayOptions options, PipelineMetrics* metrics) {
  if (metrics != nullptr) options.metrics = &metrics->relay;
  return options;
}

}  // namespace

class OrderPipeline::Runner {
 public:
  // kOrders: one order consumer, on a thread at ConsumerOptions::nice. kJobs: the admission
  // queues' consumer, the registry poll and the scheduled jobs (the lost-write repair among
  // them), at the process's priority: a sale frozen after a Redis event waits on the repair.
  enum class Role { kOrders, kJobs };

  Runner(const PipelineDeps& deps, ConsumerOptions options, Role role)
      : role_(role),
        nice_(options.nice),
        work_(asio::make_work_guard(io_)),
        connection_(redis::Connection::Create(io_.get_executor(), deps.redis)),
        runner_(connection_, keyspace::Scripts()),
        random_(deps.random()),
        context_(*deps.settings, runner_, *deps.store, deps.db_executor, *deps.registry,
                 *deps.clock, *random_),
        stream_(runner_, deps.settings->key_namespace),
        jobs_(deps.jobs),
        webhooks_(WithMetrics(deps.webhooks, deps.metrics)),
        job_metrics_(&deps.metrics->jobs),
        poll_timer_(io_) {
    // Each runner builds only what its role runs.
    if (role_ == Role::kOrders) {
      consumer_.emplace(context_, stream_, options, *deps.metrics);
    } else {
      queue_consumer_.emplace(context_, QueueOptions(options), deps.metrics->queue);
    }
  }

  ~Runner() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  base::Status LoadRegistry() {
    connection_->Start();
    auto future = asio::co_spawn(
        io_,
        [this]() -> asio::awaitable<std::optional<base::Error>> {
          auto status = co_await ReloadRegistry(context_);
          if (status.ok()) co_return std::nullopt;
          co_return std::move(status).error();
        },
        asio::use_future);
    while (future.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
      io_.run_one_for(std::chrono::milliseconds(50));
    }
    auto error = future.get();
    if (error) return *error;
    return {};
  }

  void Run(bool poll_registry, std::chrono::milliseconds poll_every) {
    connection_->Start();
    if (role_ == Role::kOrders) {
      asio::co_spawn(io_, consumer_->Run(&stop_), [this](std::exception_ptr) { done_ = true; });
      queue_done_ = true;
      jobs_done_ = true;
      relay_done_ = true;
    } else {
      done_ = true;
      asio::co_spawn(io_, RunQueues(), [this](std::exception_ptr) { queue_done_ = true; });
      if (poll_registry) {
        asio::co_spawn(io_, PollRegistry(context_, poll_every, poll_timer_, &stop_),
                       asio::detached);
      }
      asio::co_spawn(io_, RunJobSchedule(context_, jobs_, &stop_, job_metrics_),
                     [this](std::exception_ptr) { jobs_done_ = true; });
      if (webhooks_.HasReceivers()) {
        relay_.emplace(context_, webhooks_);
        asio::co_spawn(io_, relay_->Run(&stop_),
                       [this](std::exception_ptr) { relay_done_ = true; });
      } else {
        relay_done_ = true;
      }
    }
    io_.restart();
    thread_ = std::thread([this] {
      base::NameThisThread(role_ == Role::kOrders ? "fs-orders" : "fs-jobs");
      if (role_ == Role::kOrders && nice_ > 0) LowerThreadPriority(nice_);
      io_.run();
    });
  }

  void Stop() {
    asio::post(io_, [this] {
      stop_ = true;
      poll_timer_.cancel();
    });
  }

  void Join(std::chrono::milliseconds grace) {
    const auto until = std::chrono::steady_clock::now() + grace;
    while ((!done_ || !queue_done_ || !jobs_done_ || !relay_done_) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    asio::post(io_, [this] {
      connection_->Stop();
      work_.reset();
    });
    const auto hard = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!io_.stopped() && std::chrono::steady_clock::now() < hard) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static QueueConsumerOptions QueueOptions(const ConsumerOptions& options) {
    QueueConsumerOptions queue;
    queue.name = options.name;
    queue.batch = options.batch;
    queue.claim_idle = options.claim_idle;
    return queue;
  }

  // The admission queues' consumer, on the jobs' thread and connection.
  asio::awaitable<void> RunQueues() {
    asio::steady_timer pause(co_await asio::this_coro::executor);
    auto backoff = kQueueIdle;
    while (!stop_) {
      if (co_await queue_consumer_->Pass(&stop_) > 0) {
        backoff = kQueueIdle;
        continue;
      }
      pause.expires_after(backoff);
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      backoff = std::min(backoff * 2, kQueueIdle * 10);
    }
    co_await queue_consumer_->ReleaseLocks();
  }

  static constexpr std::chrono::milliseconds kQueueIdle{10};
  const Role role_;
  const int nice_;
  asio::io_context io_{1};  // first: destroyed last
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::shared_ptr<redis::Connection> connection_;
  redis::ScriptRunner runner_;
  std::unique_ptr<base::Random> random_;  // before context_, which uses it
  ServiceContext context_;
  keyspace::OrderStream stream_;
  std::optional<OrderConsumer> consumer_;            // kOrders
  std::optional<DrawQueueConsumer> queue_consumer_;  // kJobs
  JobSchedule jobs_;
  RelayOptions webhooks_;
  std::optional<EventRelay> relay_;  // kJobs, with receivers (webhooks, a broker)
  JobMetrics* job_metrics_;
  asio::steady_timer poll_timer_;
  bool stop_ = false;
  std::atomic<bool> done_ = false;
  std::atomic<bool> queue_done_ = false;
  std::atomic<bool> jobs_done_ = false;
  std::atomic<bool> relay_done_ = false;
  std::thread thread_;
};

OrderPipeline::OrderPipeline(PipelineDeps deps, ConsumerOptions options, int consumers,
                             bool poll_registry, std::chrono::milliseconds registry_poll)
    : deps_(std::move(deps)),
      options_(std::move(options)),
      consumers_(consumers),
      poll_registry_(poll_registry),
      registry_poll_(registry_poll) {}

OrderPipeline::~OrderPipeline() { Stop(); }

std::string OrderPipeline::DefaultName() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return fmt::format("{}-{}", host, ::getpid());
}

bool OrderPipeline::LowerThreadPriority(int nice) {
  // setpriority(PRIO_PROCESS, tid) sets one thread's nice value on Linux (NPTL threads are
  // scheduled each on its own); raising it needs no privilege.
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  if (::setpriority(PRIO_PROCESS, tid, nice) != 0) {
    spdlog::warn("order pipeline: nice {} for thread {} refused: {}", nice, tid,
                 std::strerror(errno));
    return false;
  }
  return true;
}

base::Status OrderPipeline::Start() {
  if (consumers_ <= 0) return {};
  // The jobs' thread first: it loads the registry (when polling it) before any consumer reads.
  runners_.push_back(std::make_unique<Runner>(deps_, options_, Runner::Role::kJobs));
  for (int i = 0; i < consumers_; ++i) {
    ConsumerOptions options = options_;
    options.name = fmt::format("{}-{}", options_.name, i);
    runners_.push_back(std::make_unique<Runner>(deps_, std::move(options), Runner::Role::kOrders));
  }
  if (poll_registry_) {
    if (auto loaded = runners_[0]->LoadRegistry(); !loaded) {
      runners_.clear();
      return loaded;
    }
  }
  for (size_t i = 0; i < runners_.size(); ++i) {
    runners_[i]->Run(poll_registry_ && i == 0, registry_poll_);
  }
  return {};
}

void OrderPipeline::Stop() {
  for (auto& runner : runners_) runner->Stop();
  for (auto& runner : runners_) runner->Join(std::chrono::seconds(10));
  runners_.clear();
}

}  // namespace flashsale::service
