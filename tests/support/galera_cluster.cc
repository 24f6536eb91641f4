#include "support/galera_cluster.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

#include "base/subprocess.h"
#include "support/flashsale_process.h"

namespace flashsale::testing {
namespace {

constexpr auto kStartTimeout = std::chrono::minutes(5);
constexpr auto kStopTimeout = std::chrono::seconds(90);
constexpr int kPortSpan = 40;  // scripts/galera.sh uses base .. base+39

std::string Script() { return std::string(FLASHSALE_SOURCE_DIR) + "/scripts/galera.sh"; }

bool PortFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return free;
}

// A base port whose kPortSpan ports are free now, below the ephemeral range (32768 and up), where
// no client socket takes one of them between this check and the nodes' binds.
int FreeBasePort() {
  std::random_device device;
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int base = 20000 + static_cast<int>(device() % 300) * kPortSpan;
    bool all_free = true;
    for (int port = base; port < base + kPortSpan && all_free; ++port) all_free = PortFree(port);
    if (all_free) return base;
  }
  throw std::runtime_error("no free block of 40 loopback ports for a Galera cluster");
}

// Runs scripts/galera.sh with `args`; its output goes to `log`. True if it exited 0 in time.
bool RunScript(const std::vector<std::string>& args, const std::string& log,
               std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {Script()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto process = base::Subprocess::Spawn(argv, log);
  if (!process.ok()) return false;
  if (!process->Wait(timeout)) {
    process->Terminate(std::chrono::seconds(5));
    return false;
  }
  const auto status = process->exit_status();
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

}  // namespace

GaleraCluster::GaleraCluster() {
  std::string templ = (std::filesystem::temp_directory_path() / "flashsale-galera-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = templ;
  // As root the nodes run as the mysql account (scripts/galera.sh), which must reach the directory.
  std::filesystem::permissions(
      dir_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                std::filesystem::perms::others_exec);
  // A port found free can be taken before a node binds it (the script then stops the nodes it
  // started): a second try, on other ports, in a fresh directory.
  std::string output;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    base_port_ = FreeBasePort();
    const std::string cluster = fmt::format("{}/cluster{}", dir_, attempt);
    const std::string log = fmt::format("{}/galera-start{}.log", dir_, attempt);
    if (RunScript({"start", cluster, "--base-port", std::to_string(base_port_)}, log,
                  kStartTimeout)) {
      cluster_dir_ = cluster;
      return;
    }
    output += ReadFile(log);
    RunScript({"stop", cluster}, log + ".stop", kStopTimeout);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
  throw std::runtime_error("scripts/galera.sh start failed twice:\n" + output);
}

GaleraCluster::~GaleraCluster() {
  RunScript({"stop", cluster_dir_}, dir_ + "/galera-stop.log", kStopTimeout);
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string GaleraCluster::socket_path(int node) const {
  return fmt::format("{}/node{}/mysqld.sock", cluster_dir_, node);
}

pid_t GaleraCluster::pid(int node) const {
  std::ifstream in(fmt::format("{}/node{}/mariadbd.pid", cluster_dir_, node));
  pid_t pid = -1;
  if (!(in >> pid)) return -1;
  return pid;
}

std::string GaleraCluster::url(int node, std::string_view database) const {
  return fmt::format("mysql://flashsale:flashsale@127.0.0.1:{}/{}", port(node), database);
}

std::string GaleraCluster::UniqueDatabase() const {
  std::random_device device;
  const std::string name = fmt::format("t{:06x}{:06x}", device() & 0xFFFFFF, device() & 0xFFFFFF);
  Query(1, fmt::format("CREATE DATABASE `{}` CHARACTER SET utf8mb4", name));
  // Node 1 answers once the DDL ran there; the others apply it in the same order, a moment later
  // (Galera's replication is synchronous to certify, not to apply). Wait until every live node has
  // it, so that a store opened on any of them finds it.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int node = 2; node <= kNodes; ++node) {
    if (pid(node) <= 0) continue;
    while (Query(node, fmt::format("SHOW DATABASES LIKE '{}'", name)).rows.empty()) {
      if (std::chrono::steady_clock::now() > until) {
        throw std::runtime_error(fmt::format("galera node{} did not apply CREATE DATABASE", node));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return name;
}

void GaleraCluster::Kill(int node) {
  const pid_t target = pid(node);
  if (target <= 0) throw std::runtime_error(fmt::format("galera node{} has no pid file", node));
  ::kill(target, SIGKILL);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  // Not our child (the script started it): gone when the PID no longer answers, or is a zombie
  // its new parent has not reaped yet.
  const auto gone = [&] {
    if (::kill(target, 0) != 0) return true;
    std::ifstream stat(fmt::format("/proc/{}/stat", target));
    std::string pid_text, name, state;
    stat >> pid_text >> name >> state;
    return state == "Z";
  };
  while (!gone()) {
    if (std::chrono::steady_clock::now() > until) {
      throw std::runtime_error(
          fmt::format("galera node{} (pid {}) outlived SIGKILL", node, target));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::filesystem::remove(fmt::format("{}/node{}/mariadbd.pid", cluster_dir_, node));
}

int GaleraCluster::ClusterSize(int node) const {
  QueryResult result = Query(node, "SHOW STATUS LIKE 'wsrep_cluster_size'");
  if (result.rows.size() != 1 || result.rows[0].size() != 2 || !result.rows[0][1]) return 0;
  return std::stoi(*result.rows[0][1]);
}

std::string GaleraCluster::Scalar(int node, const std::string& sql,
                                  const std::string& database) const {
  QueryResult result =
      QueryAsRoot(socket_path(node), sql, database, "SET SESSION wsrep_sync_wait = 1");
  if (result.rows.size() != 1 || result.rows[0].size() != 1 || !result.rows[0][0]) {
    throw std::runtime_error("galera query '" + sql + "' did not return one non-NULL value");
  }
  return *result.rows[0][0];
}

}  // namespace flashsale::testing
