#include "server/ops_metrics.h"

#include <fmt/format.h>

#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <optional>

#include "base/process_stats.h"
#include "base/version.h"
#include "keyspace/activity_scripts.h"

namespace flashsale::server {

namespace asio = boost::asio;

namespace {

struct ActivitySample {
  std::optional<int64_t> remaining;
  std::optional<int64_t> reserved;
  std::optional<int64_t> persisted;
  int64_t frozen = 0;  // 1 while the service holds the sale stopped
};

// Label values in the text format escape backslash, double quote and newline.
std::string Escape(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void AppendGauge(std::string& out, std::string_view name, std::string_view help,
                 const std::map<std::string, ActivitySample>& samples,
                 std::optional<int64_t> ActivitySample::*field) {
  out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
  for (const auto& [id, sample] : samples) {
    if (const auto& value = sample.*field) {
      out += fmt::format("{}{{activity=\"{}\"}} {}\n", name, Escape(id), *value);
    }
  }
}

}  // namespace

asio::awaitable<void> AppendOperatorMetrics(service::ServiceContext& context, std::string& out) {
  if (auto stats = base::ReadProcessStats(); stats.ok()) {
    base::AppendProcessMetrics(*stats, out);
  }
  out += fmt::format(
      "# HELP flashsale_build_info The version and the git commit of this binary.\n"
      "# TYPE flashsale_build_info gauge\n"
      "flashsale_build_info{{version=\"{}\",commit=\"{}\"}} 1\n",
      Escape(base::Version()), Escape(base::Commit()));

  const redis::Command ping{"PING"};
  auto pong = co_await context.redis().AsyncSend(
      ping, redis::Clock::now() + std::chrono::milliseconds(500), asio::use_awaitable);
  const auto db_ping = [](store::Store& store) { return store.Ping(); };
  auto db = co_await context.OnDb(db_ping);
  out += fmt::format(
      "# HELP flashsale_redis_up Whether Redis answered a PING at this scrape (1) or not (0).\n"
      "# TYPE flashsale_redis_up gauge\n"
      "flashsale_redis_up {}\n"
      "# HELP flashsale_db_up Whether the database answered at this scrape (1) or not (0).\n"
      "# TYPE flashsale_db_up gauge\n"
      "flashsale_db_up {}\n",
      pong.ok() ? 1 : 0, db.ok() ? 1 : 0);

  std::map<std::string, ActivitySample> samples;
  const service::SnapshotPtr snapshot = context.snapshot();
  for (const auto& record : snapshot->all()) {
    const std::string id = record.activity.id;
    ActivitySample& sample = samples[id];
    // Frozen for a lost-write repair: the activity's own freeze (its Redis held less of its
    // write sequence than was acknowledged), or its Redis server's event (service/redis_watch.h).
    sample.frozen = context.Frozen(id) ? 1 : 0;
    if (pong.ok()) {
      auto status = co_await context.activity_scripts().AsyncStatus(id, asio::use_awaitable);
      if (status.ok() && status->found) {
        sample.remaining = status->remaining;
        sample.reserved = status->reserved - status->released;
      }
    }
    if (db.ok()) {
      const auto count = [id](store::Store& store) { return store.CountOrders(id); };
      auto counts = co_await context.OnDb(count);
      if (counts.ok()) sample.persisted = counts->units;
    }
  }
  AppendGauge(out, "flashsale_activity_remaining_units", "Units left to sell, as Redis has them.",
              samples, &ActivitySample::remaining);
  AppendGauge(out, "flashsale_activity_reserved_units",
              "Units reserved in Redis and not returned (sold, paid or awaiting payment).", samples,
              &ActivitySample::reserved);
  AppendGauge(out, "flashsale_activity_persisted_units",
              "Units of live (reserved or paid) orders in the database of record.", samples,
              &ActivitySample::persisted);
  out +=
      "# HELP flashsale_activity_frozen Whether the service stopped the activity's sale on its "
      "own (1) or not (0).\n# TYPE flashsale_activity_frozen gauge\n";
  for (const auto& [id, sample] : samples) {
    out +=
        fmt::format("flashsale_activity_frozen{{activity=\"{}\"}} {}\n", Escape(id), sample.frozen);
  }
}

}  // namespace flashsale::server
