#pragma once
// A real Redis Cluster for tests and benchmarks: scripts/redis-cluster.sh started in a private
// temporary directory on free loopback ports (and their cluster bus ports, +10000), stopped by
// the script (which signals exactly the PIDs in its pid files) at the end.

#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "support/redis_server.h"

namespace flashsale::testing {

struct RedisClusterOptions {
  int masters = 3;
  int replicas = 0;
  bool appendonly = false;
};

class RedisCluster {
 public:
  explicit RedisCluster(RedisClusterOptions options = {});
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // redis+cluster://127.0.0.1:<p0>,127.0.0.1:<p1>,... (the primaries as started)
  std::string url() const;
  const std::vector<uint16_t>& ports() const { return ports_; }
  const std::string& dir() const { return dir_; }

  // A synchronous command on a fresh connection to the node on `port` (10 s timeout); throws on
  // a connection error. No redirection is followed.
  SyncReply Command(uint16_t port, const std::vector<std::string>& args) const;
  SyncReply Command(uint16_t port, std::initializer_list<std::string_view> args) const;
  // The pid of the node on `port` (from its pid file), for SIGSTOP/SIGCONT in fault tests.
  pid_t Pid(uint16_t port) const;
  // CLUSTER KEYSLOT on the first node.
  int Keyslot(std::string_view key) const;
  // The port of the primary serving `slot` (CLUSTER SHARDS on the first node).
  uint16_t PrimaryOf(int slot) const;
  // The node id of the node on `port` (CLUSTER MYID).
  std::string NodeId(uint16_t port) const;
  // Moving a slot to another primary, in the steps of the cluster specification, so a test can
  // run traffic between them: Begin marks the slot IMPORTING on `to` and MIGRATING on its owner
  // `from`; MoveKeys MIGRATEs up to `batch` of the slot's keys and returns how many were moved
  // (0: none left); Finish gives the slot to `to` on every primary (SETSLOT NODE).
  void BeginMigration(int slot, uint16_t from, uint16_t to) const;
  int MoveKeys(int slot, uint16_t from, uint16_t to, int batch) const;
  void FinishMigration(int slot, uint16_t to) const;
  // All three, moving every key.
  void MigrateSlot(int slot, uint16_t to) const;

 private:
  RedisClusterOptions options_;
  std::string dir_;
  std::vector<uint16_t> ports_;
};

}  // namespace flashsale::testing
