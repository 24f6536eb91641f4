#include "support/redis_cluster.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <thread>

#include "base/subprocess.h"
#include "support/flashsale_process.h"

#ifndef FLASHSALE_SOURCE_DIR
#error "FLASHSALE_SOURCE_DIR must name the source tree (for scripts/redis-cluster.sh)"
#endif

namespace flashsale::testing {
namespace {

bool PortFree(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return free;
}

// A base port P with P..P+n-1 and their bus ports (+10000) free.
uint16_t FreeBasePort(int n) {
  std::random_device device;
  std::uniform_int_distribution<int> pick(20000, 55000 - n);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto base = static_cast<uint16_t>(pick(device));
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) {
      ok = PortFree(static_cast<uint16_t>(base + i)) &&
           PortFree(static_cast<uint16_t>(base + i + 10000));
    }
    if (ok) return base;
  }
  throw std::runtime_error("no free run of loopback ports for a cluster");
}

std::string Script() { return std::string(FLASHSALE_SOURCE_DIR) + "/scripts/redis-cluster.sh"; }

// Runs the script and waits (bounded) for it; true on exit status 0.
bool RunScript(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {Script()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto process = base::Subprocess::Spawn(argv, log);
  if (!process.ok())
    throw std::runtime_error("cannot run redis-cluster.sh: " + process.error().message);
  if (!process->Wait(std::chrono::seconds(120))) {
    process->Terminate(std::chrono::seconds(5));
    return false;
  }
  const auto status = process->exit_status();
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

std::string Text(const redisReply* reply) {
  if (reply == nullptr || reply->str == nullptr) return {};
  return std::string(reply->str, reply->len);
}

}  // namespace

RedisCluster::RedisCluster(RedisClusterOptions options) : options_(options) {
  std::string templ =
      (std::filesystem::temp_directory_path() / "flashsale-cluster-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = templ;
  const int total = options_.masters * (1 + options_.replicas);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const uint16_t base = FreeBasePort(total);
    ports_.clear();
    for (int i = 0; i < options_.masters; ++i) ports_.push_back(static_cast<uint16_t>(base + i));
    if (RunScript({"start", dir_ + "/nodes", "--masters", std::to_string(options_.masters),
                   "--replicas", std::to_string(options_.replicas), "--base-port",
                   std::to_string(base), "--appendonly", options_.appendonly ? "yes" : "no"},
                  dir_ + "/script.log")) {
      return;
    }
    RunScript({"stop", dir_ + "/nodes"}, dir_ + "/script.log");
    std::error_code ignored;
    std::filesystem::remove_all(dir_ + "/nodes", ignored);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
  throw std::runtime_error("redis-cluster.sh start failed three times");
}

RedisCluster::~RedisCluster() {
  RunScript({"stop", dir_ + "/nodes"}, dir_ + "/script.log");
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string RedisCluster::url() const {
  std::string url = "redis+cluster://";
  for (size_t i = 0; i < ports_.size(); ++i) {
    url += fmt::format("{}127.0.0.1:{}", i == 0 ? "" : ",", ports_[i]);
  }
  return url;
}

SyncReply RedisCluster::Command(uint16_t port, const std::vector<std::string>& args) const {
  timeval tv{10, 0};
  redisContext* context = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (context == nullptr || context->err != 0) {
    std::string error = context != nullptr ? context->errstr : "out of memory";
    if (context != nullptr) redisFree(context);
    throw std::runtime_error("test cluster connect failed: " + error);
  }
  redisSetTimeout(context, tv);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lens.push_back(arg.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(context, static_cast<int>(args.size()), argv.data(), lens.data()));
  std::string error = context->errstr;
  redisFree(context);
  if (reply == nullptr) throw std::runtime_error("test cluster command failed: " + error);
  return SyncReply(reply);
}

SyncReply RedisCluster::Command(uint16_t port, std::initializer_list<std::string_view> args) const {
  std::vector<std::string> copy(args.begin(), args.end());
  return Command(port, copy);
}

pid_t RedisCluster::Pid(uint16_t port) const {
  const std::string text = ReadFile(fmt::format("{}/nodes/{}/redis.pid", dir_, port));
  const long pid = std::strtol(text.c_str(), nullptr, 10);
  if (pid <= 0) throw std::runtime_error(fmt::format("no pid file for the node on {}", port));
  return static_cast<pid_t>(pid);
}

int RedisCluster::Keyslot(std::string_view key) const {
  auto reply = Command(ports_.front(), {"CLUSTER", "KEYSLOT", key});
  if (reply->type != REDIS_REPLY_INTEGER) throw std::runtime_error("CLUSTER KEYSLOT failed");
  return static_cast<int>(reply->integer);
}

uint16_t RedisCluster::PrimaryOf(int slot) const {
  auto reply = Command(ports_.front(), {"CLUSTER", "SLOTS"});
  if (reply->type != REDIS_REPLY_ARRAY) throw std::runtime_error("CLUSTER SLOTS failed");
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    if (range->elements < 3) continue;
    if (slot >= range->element[0]->integer && slot <= range->element[1]->integer) {
      return static_cast<uint16_t>(range->element[2]->element[1]->integer);
    }
  }
  throw std::runtime_error(fmt::format("slot {} has no primary", slot));
}

std::string RedisCluster::NodeId(uint16_t port) const {
  return Text(Command(port, {"CLUSTER", "MYID"}).get());
}

void RedisCluster::BeginMigration(int slot, uint16_t from, uint16_t to) const {
  const std::string s = std::to_string(slot);
  auto importing = Command(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", NodeId(from)});
  if (importing->type == REDIS_REPLY_ERROR) throw std::runtime_error(Text(importing.get()));
  auto migrating = Command(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", NodeId(to)});
  if (migrating->type == REDIS_REPLY_ERROR) throw std::runtime_error(Text(migrating.get()));
}

int RedisCluster::MoveKeys(int slot, uint16_t from, uint16_t to, int batch) const {
  auto keys =
      Command(from, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), std::to_string(batch)});
  if (keys->type != REDIS_REPLY_ARRAY) throw std::runtime_error("GETKEYSINSLOT failed");
  if (keys->elements == 0) return 0;
  std::vector<std::string> args = {"MIGRATE", "127.0.0.1", std::to_string(to), "", "0",
                                   "10000",   "KEYS"};
  for (size_t i = 0; i < keys->elements; ++i) args.push_back(Text(keys->element[i]));
  auto migrated = Command(from, args);
  if (migrated->type == REDIS_REPLY_ERROR) {
    throw std::runtime_error("MIGRATE failed: " + Text(migrated.get()));
  }
  return static_cast<int>(keys->elements);
}

void RedisCluster::FinishMigration(int slot, uint16_t to) const {
  const std::string id = NodeId(to);
  const std::string s = std::to_string(slot);
  // The new owner first, then the old one (which then redirects with MOVED), then the rest.
  std::vector<uint16_t> order = {to};
  for (uint16_t port : ports_) {
    if (port != to) order.push_back(port);
  }
  for (uint16_t port : order) {
    auto reply = Command(port, {"CLUSTER", "SETSLOT", s, "NODE", id});
    if (reply->type == REDIS_REPLY_ERROR) {
      throw std::runtime_error("SETSLOT NODE failed: " + Text(reply.get()));
    }
  }
}

void RedisCluster::MigrateSlot(int slot, uint16_t to) const {
  const uint16_t from = PrimaryOf(slot);
  if (from == to) return;
  BeginMigration(slot, from, to);
  while (MoveKeys(slot, from, to, 100) > 0) {
  }
  FinishMigration(slot, to);
}

}  // namespace flashsale::testing
