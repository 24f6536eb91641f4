#include "keyspace/service_state.h"

#include <fmt/format.h>

#include <charconv>

#include "base/strings.h"
#include "keyspace/activity_scripts.h"
#include "redis/scripts.h"

namespace flashsale::keyspace {

using base::ErrorCode;
using base::MakeError;
using base::Result;
using base::Status;
template <typename T>
using Awaitable = boost::asio::awaitable<T>;

namespace {

// A decimal integer, or nothing.
std::optional<int64_t> ToInt(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A bulk string reply, nothing for nil (or a reply of another type).
std::optional<std::string> StringOf(const redis::Reply& reply) {
  if (!reply.is_string()) return std::nullopt;
  return std::string(reply.str());
}

Status Done(const Result<redis::Reply>& reply) {
  if (!reply.ok()) return reply.error();
  return Status();
}

}  // namespace

NamespaceKeys::NamespaceKeys(std::string_view key_namespace)
    : namespace_(key_namespace),
      registry_version_(fmt::format("{}:registry:version", key_namespace)) {}

std::string NamespaceKeys::JobLock(std::string_view job) const {
  return fmt::format("{}:jobs:{{{}}}:lock", namespace_, job);
}

std::string NamespaceKeys::JobFence(std::string_view job) const {
  return fmt::format("{}:jobs:{{{}}}:fence", namespace_, job);
}

std::string NamespaceKeys::JobClaim(std::string_view job) const {
  return fmt::format("{}:jobs:{{{}}}:next", namespace_, job);
}

std::string NamespaceKeys::RepairMarker(std::string_view run_id) const {
  return fmt::format("{}:redis:repaired:{{{}}}", namespace_, run_id);
}

std::string NamespaceKeys::IdempotencyClaim(std::string_view token) const {
  return fmt::format("{}:idem:{{{}}}", namespace_, token);
}

std::vector<std::pair<std::string, std::string>> RepairMarkerFields(const RepairMarker& marker) {
  return {{"run_id", marker.run_id},
          {"epoch", std::to_string(marker.epoch)},
          {"activities", base::JoinWords(marker.activities)},
          {"orders_applied", std::to_string(marker.orders_applied)},
          {"units_applied", std::to_string(marker.units_applied)},
          {"rebuilt", std::to_string(marker.rebuilt)},
          {"oversold_units", std::to_string(marker.oversold_units)},
          {"flagged_orders", std::to_string(marker.flagged_orders)},
          {"acknowledged_lost", std::to_string(marker.acknowledged_lost)},
          {"repaired_ms", std::to_string(marker.repaired_ms)}};
}

RepairMarker ParseRepairMarker(const std::map<std::string, std::string, std::less<>>& fields) {
  const auto text = [&fields](std::string_view name) -> std::string_view {
    auto it = fields.find(name);
    return it == fields.end() ? std::string_view() : std::string_view(it->second);
  };
  const auto number = [&text](std::string_view name) { return ToInt(text(name)).value_or(0); };
  RepairMarker marker;
  marker.run_id = text("run_id");
  marker.epoch = number("epoch");
  marker.activities = base::SplitWords(text("activities"));
  marker.orders_applied = number("orders_applied");
  marker.units_applied = number("units_applied");
  marker.rebuilt = number("rebuilt");
  marker.oversold_units = number("oversold_units");
  marker.flagged_orders = number("flagged_orders");
  marker.acknowledged_lost = number("acknowledged_lost");
  marker.repaired_ms = number("repaired_ms");
  return marker;
}

ServiceState::ServiceState(redis::Connection& connection, std::string_view key_namespace)
    : connection_(connection), namespace_(key_namespace), keys_(key_namespace) {}

Awaitable<Result<int64_t>> ServiceState::BumpRegistryVersion() {
  const redis::Command incr({"INCR", keys_.registry_version()});
  auto reply = co_await redis::Await(connection_, incr);
  if (!reply.ok()) co_return std::move(reply).error();
  if (!reply->is_integer()) {
    co_return MakeError(ErrorCode::kProtocol, "INCR {}: {}", keys_.registry_version(),
                        reply->Describe());
  }
  co_return reply->integer();
}

Awaitable<Result<std::string>> ServiceState::RegistryVersion() {
  const redis::Command get({"GET", keys_.registry_version()});
  auto reply = co_await redis::Await(connection_, get);
  if (!reply.ok()) co_return std::move(reply).error();
  co_return StringOf(*reply).value_or("");
}

Awaitable<Result<bool>> ServiceState::ClaimJobPeriod(std::string_view job,
                                                     std::chrono::milliseconds period) {
  const redis::IntArg ttl(period.count());
  const redis::Command claim({"SET", keys_.JobClaim(job), "1", "NX", "PX", ttl});
  auto reply = co_await redis::Await(connection_, claim);
  if (!reply.ok()) co_return std::move(reply).error();
  co_return !reply->is_nil();
}

Awaitable<Result<std::optional<RepairMarker>>> ServiceState::ReadRepairMarker(
    std::string_view run_id) {
  const redis::Command read({"HGETALL", keys_.RepairMarker(run_id)});
  auto reply = co_await redis::Await(connection_, read);
  if (!reply.ok()) co_return std::move(reply).error();
  if (!reply->is_array()) {
    co_return MakeError(ErrorCode::kProtocol, "HGETALL {}: {}", keys_.RepairMarker(run_id),
                        reply->Describe());
  }
  if (reply->size() == 0) co_return std::nullopt;
  std::map<std::string, std::string, std::less<>> fields;
  for (size_t i = 0; i + 1 < reply->size(); i += 2) {
    fields[std::string((*reply)[i].str())] = std::string((*reply)[i + 1].str());
  }
  co_return ParseRepairMarker(fields);
}

Awaitable<Status> ServiceState::WriteRepairMarker(const RepairMarker& marker) {
  const std::string key = keys_.RepairMarker(marker.run_id);
  const auto fields = RepairMarkerFields(marker);
  std::vector<std::string_view> args{"HSET", key};
  for (const auto& [name, value] : fields) {
    args.push_back(name);
    args.push_back(value);
  }
  const redis::Command write((std::span<const std::string_view>(args)));
  auto reply = co_await redis::Await(connection_, write);
  co_return Done(reply);
}

Awaitable<Status> ServiceState::KeepReconcileReport(std::string_view activity_id,
                                                    std::string_view json) {
  const ActivityKeys keys(namespace_, activity_id);
  const redis::Command keep({"SET", keys.reconcile_report(), json});
  auto reply = co_await redis::Await(connection_, keep);
  co_return Done(reply);
}

Awaitable<Result<std::optional<std::string>>> ServiceState::ReconcileReport(
    std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  const redis::Command get({"GET", keys.reconcile_report()});
  auto reply = co_await redis::Await(connection_, get);
  if (!reply.ok()) co_return std::move(reply).error();
  co_return StringOf(*reply);
}

Awaitable<Result<int64_t>> ServiceState::OversoldUnits(std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  const redis::Command get({"HGET", keys.meta(), "oversold"});
  auto reply = co_await redis::Await(connection_, get);
  if (!reply.ok()) co_return std::move(reply).error();
  co_return ToInt(StringOf(*reply).value_or("")).value_or(0);
}

Awaitable<Result<int64_t>> ServiceState::MarkMissing(std::string_view activity_id, int64_t now_ms,
                                                     std::chrono::milliseconds ttl) {
  const ActivityKeys keys(namespace_, activity_id);
  const redis::IntArg now(now_ms), ttl_ms(ttl.count());
  const redis::Command mark({"SET", keys.missing_since(), now, "NX", "GET", "PX", ttl_ms});
  auto reply = co_await redis::Await(connection_, mark);
  if (!reply.ok()) co_return std::move(reply).error();
  // SET ... GET answers the value it found (marked before), or nil (marked now).
  co_return ToInt(StringOf(*reply).value_or("")).value_or(now_ms);
}

Awaitable<Status> ServiceState::ClearMissing(std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  const redis::Command unmark({"DEL", keys.missing_since()});
  auto reply = co_await redis::Await(connection_, unmark);
  co_return Done(reply);
}

Awaitable<Result<bool>> ServiceState::IsMarkedMissing(std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  const redis::Command exists({"EXISTS", keys.missing_since()});
  auto reply = co_await redis::Await(connection_, exists);
  if (!reply.ok()) co_return std::move(reply).error();
  if (!reply->is_integer()) {
    co_return MakeError(ErrorCode::kProtocol, "EXISTS: unexpected {}", reply->Describe());
  }
  co_return reply->integer() == 1;
}

Awaitable<Result<std::optional<std::string>>> ServiceState::CacheGet(std::string_view key) {
  const redis::Command get({"GET", key});
  auto reply = co_await redis::Await(connection_, get);
  if (!reply.ok()) co_return std::move(reply).error();
  co_return StringOf(*reply);
}

Awaitable<Status> ServiceState::CachePut(std::string_view key, std::string_view value,
                                         int64_t ttl_s) {
  const redis::IntArg ttl(ttl_s);
  const redis::Command set({"SET", key, value, "EX", ttl});
  auto reply = co_await redis::Await(connection_, set);
  co_return Done(reply);
}

}  // namespace flashsale::keyspace
