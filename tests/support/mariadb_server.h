#pragma once
// A real MariaDB server for tests: its data directory is initialised (mariadb-install-db) in a
// private temporary directory, and mariadbd runs as a child process on a free loopback port and a
// unix socket there; it is stopped (by its PID) and the directory removed at the end.
//
// Starting one takes a few seconds (initialising the data directory is most of it), so a test
// binary shares one server and gives each test a database of its own (UniqueDatabase()).
//
// Accounts: root without a password (Query() uses it, over the unix socket) and `flashsale` with
// the password kPassword and every privilege, which the URLs use: its '@', ':', '/' and '%' are
// percent-encoded there, so the store's URL decoding and password handling are exercised.
//
// Linking: Query() uses MariaDB Connector/C, so a test binary that uses this class links
// libmariadb (store_integration_test does, through flashsale_store).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/subprocess.h"

namespace flashsale::testing {

// What a statement returned: the rows of a result set (a NULL is an empty optional), or for a
// statement without one, the number of rows it changed.
struct QueryResult {
  std::vector<std::vector<std::optional<std::string>>> rows;
  uint64_t affected_rows = 0;
};

// Runs one SQL statement as root over the unix socket `socket_path`, as MariaDbServer::Query does
// (also for the nodes of a GaleraCluster). `session` (if not empty) runs first on the same
// connection, e.g. to set a session variable.
QueryResult QueryAsRoot(const std::string& socket_path, const std::string& sql,
                        const std::string& database = {}, const std::string& session = {});

// A server with TLS: a CA and a server certificate it signs are generated with the `openssl`
// command into the server's directory (tls/; nothing is committed), and mariadbd runs with
// --ssl-ca/--ssl-cert/--ssl-key. The server certificate names DNS:localhost only (no IP address):
// a client that checks the host name accepts "localhost" and refuses "127.0.0.1".
struct MariaDbServerOptions {
  bool tls = false;
  // With tls: require_secure_transport=ON, so the server refuses a TCP connection without TLS
  // (the unix socket Query() uses still counts as secure).
  bool require_secure_transport = false;
};

class MariaDbServer {
 public:
  static constexpr std::string_view kUser = "flashsale";
  static constexpr std::string_view kPassword = "p@ss:w/rd%1";
  static constexpr std::string_view kDatabase = "flashsale_test";  // created at start

  // Initialises, starts and waits (up to 30 s) until the server accepts connections; throws
  // std::runtime_error with the tail of its log if it cannot.
  explicit MariaDbServer(MariaDbServerOptions options = {});
  // Stops the server (SIGTERM, then SIGKILL) and removes its directory.
  ~MariaDbServer();
  MariaDbServer(const MariaDbServer&) = delete;
  MariaDbServer& operator=(const MariaDbServer&) = delete;

  uint16_t port() const { return port_; }
  const std::string& dir() const { return dir_; }
  const std::string& socket_path() const { return socket_path_; }
  // With tls: the CA that signed the server's certificate (PEM), and an unrelated CA that did not.
  // Empty without.
  const std::string& ca_path() const { return ca_path_; }
  const std::string& other_ca_path() const { return other_ca_path_; }
  pid_t pid() const { return process_ ? process_->pid() : -1; }  // -1 while stopped

  // The store's URL (see store/mysql/url.h) for kDatabase, or for `database`, over TCP:
  // mysql://flashsale:<password>@127.0.0.1:<port>/<database>.
  std::string url() const { return url(kDatabase); }
  std::string url(std::string_view database) const;
  // The same over the unix socket: mysql://flashsale:<password>@localhost/<database>?socket=...
  std::string socket_url(std::string_view database) const;

  // SIGKILL and reap: the server dies as in a crash (InnoDB recovers on the next Start()).
  void Kill();
  // Starts the server again on the same data directory, port and socket; throws if it does not
  // accept connections within 30 s. Throws std::logic_error if it is running.
  void Start();
  // SIGTERM (a clean shutdown) and reap; up to 30 s, then SIGKILL.
  void Stop();

  // Runs one SQL statement as root over the unix socket, on a fresh connection (10 s connect,
  // 30 s read and write timeouts), in `database` if not empty. Throws std::runtime_error with the
  // server's message on any error. Thread-safe.
  QueryResult Query(const std::string& sql, const std::string& database = {}) const;
  // The single value of a statement that returns one row of one non-NULL column; throws
  // otherwise.
  std::string Scalar(const std::string& sql, const std::string& database = {}) const;

  // Creates a database no other test shares ("t" + 12 random hex digits, utf8mb4) and returns its
  // url().
  std::string UniqueDatabase() const;

 private:
  void Initialise();
  void MakeCertificates();
  void Spawn();
  bool WaitReady(std::chrono::milliseconds timeout);
  std::string LogTail() const;

  std::string dir_;
  std::string data_dir_;
  std::string socket_path_;
  std::string log_path_;
  uint16_t port_ = 0;
  MariaDbServerOptions options_;
  std::string ca_path_;
  std::string other_ca_path_;
  std::optional<base::Subprocess> process_;  // empty while stopped
};

}  // namespace flashsale::testing
