#pragma once
// A real 3-node MariaDB Galera cluster for tests, started by scripts/galera.sh on loopback in a
// private temporary directory, on ports no other cluster of this machine uses at that moment (a
// random base port whose 40 neighbours were free). Its nodes are not children of the test: they
// are stopped by `scripts/galera.sh stop`, which signals exactly the PIDs of their pid files, and
// the directory is removed at the end.
//
// Starting takes tens of seconds on a loaded machine (one node initialised, two joined by rsync
// SST), so a test binary shares one cluster and gives each test a database of its own.
//
// Accounts: root over each node's unix socket (Query), and `flashsale`/`flashsale` over TCP,
// which the URLs use.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "support/mariadb_server.h"

namespace flashsale::testing {

class GaleraCluster {
 public:
  static constexpr int kNodes = 3;

  // Starts the cluster (up to 5 minutes); throws std::runtime_error with the script's output if it
  // cannot.
  GaleraCluster();
  // Stops every node still running (by the PIDs in their pid files) and removes the directory.
  ~GaleraCluster();
  GaleraCluster(const GaleraCluster&) = delete;
  GaleraCluster& operator=(const GaleraCluster&) = delete;

  // Nodes are numbered 1 to kNodes.
  uint16_t port(int node) const { return static_cast<uint16_t>(base_port_ + node - 1); }
  std::string socket_path(int node) const;
  pid_t pid(int node) const;  // from its pid file; -1 if there is none

  // The store's URL for `database` through `node`, over TCP.
  std::string url(int node, std::string_view database) const;
  // Creates a database (through node 1) and returns its name once every running node has it.
  std::string UniqueDatabase() const;

  // SIGKILL to the node's PID, and a bounded wait (30 s) until it is gone.
  void Kill(int node);
  // The cluster size as `node` sees it (wsrep_cluster_size).
  int ClusterSize(int node) const;

  QueryResult Query(int node, const std::string& sql, const std::string& database = {}) const {
    return QueryAsRoot(socket_path(node), sql, database);
  }
  // The single value of a statement that returns one row of one non-NULL column; throws otherwise.
  // Read causally (wsrep_sync_wait): the node first applies every write the cluster committed
  // before the read, so a write made through another node is seen (without it, a node may answer
  // from before a write it has certified but not yet applied).
  std::string Scalar(int node, const std::string& sql, const std::string& database = {}) const;

 private:
  std::string dir_;          // the temporary directory
  std::string cluster_dir_;  // scripts/galera.sh's DIR, in dir_
  int base_port_ = 0;
};

}  // namespace flashsale::testing
