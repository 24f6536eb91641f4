#pragma once
// Jobs that run once across all instances (S3-8, S3-9), under a distributed lock each:
//   prewarm    loads every activity that has not started yet, has no orders in the record (its
//              start may have been postponed after it sold), and is not in Redis, from the
//              record into Redis (the setup script: stock loaded once); a sale that is running
//              is never touched (its Redis state is reconciliation's to judge);
//   reconcile  service/reconcile.h for every activity: the invariant's terms, the repairs it can
//              prove, the drift it cannot explain;
//   expire     for activities with a payment window: reserved orders unpaid past it are cancelled
//              in the record (compare-and-set, once) and their units returned in Redis (once:
//              the release script); a crash between the two leaves a cancelled order whose unit
//              reconciliation returns.
// A run takes the job's lock (keyspace/lock.h) and a watchdog extends it while the run goes on; a
// run that loses its lock stops before its next activity. On a schedule (serve and worker run
// one), an instance first claims the job's period (SET NX PX on the job's "next" key), so each
// period's run happens on one instance only; on demand (admin API, CLI) a run only needs the
// lock: a job running elsewhere is reported, not waited for.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "base/metrics.h"
#include "base/result.h"
#include "service/context.h"
#include "service/reconcile.h"

namespace flashsale::service {

enum class Job { kPrewarm, kReconcile, kExpire };
std::string_view ToString(Job job);
std::optional<Job> JobFrom(std::string_view name);

struct JobRequest {
  Job job = Job::kReconcile;
  std::string activity_id;  // empty: every activity
  bool repair = true;       // reconcile: repair what it can prove
};

// What the jobs of a process did, for /metrics.
class JobMetrics {
 public:
  base::Counter runs[3];  // by Job
  base::Counter lock_lost;
  void SetDrift(const std::string& activity_id, int64_t drift);
  // Drops the series of activities not in `ids` (deleted ones).
  void KeepOnly(const std::set<std::string>& ids);
  void AppendPrometheus(std::string& out) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int64_t> drift_;
};

// One run now; its report as JSON ({"job": ..., "activities": [...]}). kAlreadyExists when the
// job is running on another instance.
boost::asio::awaitable<base::Result<std::string>> RunJob(ServiceContext& context,
                                                         const JobRequest& request,
                                                         JobMetrics* metrics);

struct JobSchedule {
  std::chrono::milliseconds prewarm_every{10'000};    // 0: never
  std::chrono::milliseconds reconcile_every{60'000};  // 0: never
  std::chrono::milliseconds expire_every{5'000};      // 0: never
};

// Until *stop: runs each job once per period across all instances.
boost::asio::awaitable<void> RunJobSchedule(ServiceContext& context, JobSchedule schedule,
                                            const bool* stop, JobMetrics* metrics);

}  // namespace flashsale::service
