#include "support/mariadb_server.h"

// Connector/C's headers live in /usr/include/mariadb; this library does not get libmariadb's
// pkg-config include path (flashsale_store does), so they are named with their directory.
#include <fmt/format.h>
#include <mariadb/mysql.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace flashsale::testing {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(30);
constexpr auto kInstallTimeout = std::chrono::seconds(120);
constexpr auto kStopGrace = std::chrono::seconds(30);
// Options of both mariadb-install-db's bootstrap server and mariadbd. Small buffers: the server
// starts in a fraction of a second. A tmpdir of its own: a starting mariadbd deletes every "#sql*"
// file in its tmpdir, and in a shared /tmp those include the temporary tables of the servers other
// test processes are bootstrapping at that moment.
std::vector<std::string> CommonArgs(const std::string& dir) {
  std::vector<std::string> args = {"--tmpdir=" + dir + "/tmp", "--skip-name-resolve",
                                   "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M"};
  // mariadbd refuses to run as root unless told to; as anyone else it runs as that user.
  if (::geteuid() == 0) args.emplace_back("--user=root");
  return args;
}

uint16_t FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("could not find a free loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string ReadTail(const std::string& path, size_t max_bytes = 4000) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  return all.size() > max_bytes ? "..." + all.substr(all.size() - max_bytes) : all;
}

// mysql_init() initialises the library on first use, which is not thread-safe.
void InitLibrary() {
  static std::once_flag once;
  std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

// RFC 3986 userinfo: everything but unreserved characters percent-encoded.
std::string PercentEncode(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

struct CloseMysql {
  void operator()(MYSQL* mysql) const { mysql_close(mysql); }
};
using MysqlHandle = std::unique_ptr<MYSQL, CloseMysql>;

// A root connection over the unix socket, or nullptr with the reason in `error`.
MysqlHandle ConnectRoot(const std::string& socket_path, const std::string& database,
                        unsigned connect_timeout_s, std::string& error) {
  InitLibrary();
  MysqlHandle mysql(mysql_init(nullptr));
  if (!mysql) {
    error = "mysql_init failed (out of memory)";
    return nullptr;
  }
  const unsigned io_timeout_s = 30;
  const unsigned protocol = MYSQL_PROTOCOL_SOCKET;
  mysql_optionsv(mysql.get(), MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout_s);
  mysql_optionsv(mysql.get(), MYSQL_OPT_READ_TIMEOUT, &io_timeout_s);
  mysql_optionsv(mysql.get(), MYSQL_OPT_WRITE_TIMEOUT, &io_timeout_s);
  mysql_optionsv(mysql.get(), MYSQL_OPT_PROTOCOL, &protocol);
  mysql_optionsv(mysql.get(), MYSQL_SET_CHARSET_NAME, "utf8mb4");
  if (mysql_real_connect(mysql.get(), "localhost", "root", nullptr,
                         database.empty() ? nullptr : database.c_str(), 0, socket_path.c_str(),
                         0) == nullptr) {
    error = fmt::format("{} (error {})", mysql_error(mysql.get()), mysql_errno(mysql.get()));
    return nullptr;
  }
  return mysql;
}

}  // namespace

MariaDbServer::MariaDbServer(MariaDbServerOptions options) : options_(options) {
  std::string templ =
      (std::filesystem::temp_directory_path() / "flashsale-mariadb-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = templ;
  data_dir_ = dir_ + "/data";
  socket_path_ = dir_ + "/mysqld.sock";
  log_path_ = dir_ + "/mariadb.log";
  try {
    std::filesystem::create_directory(dir_ + "/tmp");
    Initialise();
    if (options_.tls) MakeCertificates();
    // A port found free can be taken before mariadbd binds it (it then exits); try a few.
    bool ready = false;
    for (int attempt = 0; attempt < 5 && !ready; ++attempt) {
      port_ = FreeLoopbackPort();
      Spawn();
      ready = WaitReady(kStartTimeout);
      if (!ready) Kill();
    }
    if (!ready) throw std::runtime_error("mariadbd did not start; its log:\n" + LogTail());
    Query(fmt::format("CREATE USER '{}'@'%' IDENTIFIED BY '{}'", kUser, kPassword));
    Query(fmt::format("GRANT ALL PRIVILEGES ON *.* TO '{}'@'%'", kUser));
    Query(fmt::format("CREATE DATABASE `{}` CHARACTER SET utf8mb4", kDatabase));
  } catch (...) {
    // The destructor does not run for a constructor that throws.
    Stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

MariaDbServer::~MariaDbServer() {
  Stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string MariaDbServer::url(std::string_view database) const {
  return fmt::format("mysql://{}:{}@127.0.0.1:{}/{}", kUser, PercentEncode(kPassword), port_,
                     database);
}

std::string MariaDbServer::socket_url(std::string_view database) const {
  return fmt::format("mysql://{}:{}@localhost/{}?socket={}", kUser, PercentEncode(kPassword),
                     database, socket_path_);
}

void MariaDbServer::Initialise() {
  // The system tables, a root without a password, no test database.
  std::vector<std::string> args = {"mariadb-install-db", "--no-defaults", "--datadir=" + data_dir_,
                                   "--auth-root-authentication-method=normal", "--skip-test-db"};
  for (auto& arg : CommonArgs(dir_)) args.push_back(std::move(arg));
  const std::string log = dir_ + "/install.log";
  auto process = base::Subprocess::Spawn(args, log);
  if (!process.ok()) {
    throw std::runtime_error(
        "cannot run mariadb-install-db: is mariadb-server installed? (scripts/install-deps.sh): " +
        process.error().message);
  }
  if (!process->Wait(kInstallTimeout)) {
    process->Terminate(std::chrono::seconds(5));
    throw std::runtime_error("mariadb-install-db did not finish in time; its log:\n" +
                             ReadTail(log));
  }
  const auto status = process->exit_status();
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    throw std::runtime_error(
        fmt::format("mariadb-install-db failed ({}); its log:\n{}",
                    status ? base::DescribeExitStatus(*status) : "unknown status", ReadTail(log)));
  }
}

namespace {

// Runs `openssl args...` with its output in `log`; throws with that output if it fails.
void RunOpenssl(std::vector<std::string> args, const std::string& log) {
  args.insert(args.begin(), "openssl");
  auto process = base::Subprocess::Spawn(args, log);
  if (!process.ok()) {
    throw std::runtime_error("cannot run openssl (scripts/install-deps.sh): " +
                             process.error().message);
  }
  if (!process->Wait(std::chrono::seconds(60))) {
    process->Terminate(std::chrono::seconds(5));
    throw std::runtime_error("openssl did not finish in time; its output:\n" + ReadTail(log));
  }
  const auto status = process->exit_status();
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    throw std::runtime_error("openssl " + args[1] + " failed; its output:\n" + ReadTail(log));
  }
}

// A self-signed CA: <dir>/<name>.pem and <dir>/<name>-key.pem.
void MakeCa(const std::string& dir, const std::string& name) {
  RunOpenssl(
      {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/" + name + "-key.pem",
       "-out", dir + "/" + name + ".pem", "-days", "2", "-subj", "/CN=flashsale test " + name},
      dir + "/openssl.log");
}

}  // namespace

void MariaDbServer::MakeCertificates() {
  const std::string tls = dir_ + "/tls";
  std::filesystem::create_directory(tls);
  MakeCa(tls, "ca");
  MakeCa(tls, "other-ca");
  const std::string log = tls + "/openssl.log";
  RunOpenssl({"req", "-newkey", "rsa:2048", "-nodes", "-keyout", tls + "/server-key.pem", "-out",
              tls + "/server.csr", "-subj", "/CN=localhost"},
             log);
  std::ofstream(tls + "/server-ext.cnf") << "subjectAltName=DNS:localhost\n";
  RunOpenssl({"x509", "-req", "-in", tls + "/server.csr", "-CA", tls + "/ca.pem", "-CAkey",
              tls + "/ca-key.pem", "-CAcreateserial", "-out", tls + "/server-cert.pem", "-days",
              "2", "-extfile", tls + "/server-ext.cnf"},
             log);
  ca_path_ = tls + "/ca.pem";
  other_ca_path_ = tls + "/other-ca.pem";
}

void MariaDbServer::Spawn() {
  std::vector<std::string> args = {"mariadbd",
                                   "--no-defaults",
                                   "--datadir=" + data_dir_,
                                   "--socket=" + socket_path_,
                                   "--port=" + std::to_string(port_),
                                   "--bind-address=127.0.0.1",
                                   "--pid-file=" + dir_ + "/mariadbd.pid",
                                   "--log-error=" + log_path_};
  for (auto& arg : CommonArgs(dir_)) args.push_back(std::move(arg));
  if (options_.tls) {
    const std::string tls = dir_ + "/tls";
    args.push_back("--ssl-ca=" + tls + "/ca.pem");
    args.push_back("--ssl-cert=" + tls + "/server-cert.pem");
    args.push_back("--ssl-key=" + tls + "/server-key.pem");
    if (options_.require_secure_transport) args.emplace_back("--require-secure-transport=ON");
  }
  // stdout and stderr go to the error log too: what stops mariadbd before it opens its log (a bad
  // option) is then in LogTail().
  auto process = base::Subprocess::Spawn(args, log_path_);
  if (!process.ok()) {
    throw std::runtime_error(
        "cannot run mariadbd: is mariadb-server installed? (scripts/install-deps.sh): " +
        process.error().message);
  }
  process_.emplace(std::move(process).value());
}

bool MariaDbServer::WaitReady(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (!process_ || !process_->Running()) return false;  // exited (e.g. the port was taken)
    std::string error;
    if (ConnectRoot(socket_path_, {}, 1, error)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string MariaDbServer::LogTail() const { return ReadTail(log_path_); }

void MariaDbServer::Kill() {
  if (!process_) return;
  process_->Signal(SIGKILL);
  process_->Wait(std::chrono::seconds(10));
  process_.reset();  // Terminates (and reaps) if the wait above gave up
}

void MariaDbServer::Start() {
  if (process_) throw std::logic_error("mariadbd is already running");
  Spawn();
  if (!WaitReady(kStartTimeout)) {
    Kill();
    throw std::runtime_error("mariadbd did not restart; its log:\n" + LogTail());
  }
}

void MariaDbServer::Stop() {
  if (!process_) return;
  process_->Terminate(kStopGrace);  // SIGTERM, then SIGKILL
  process_.reset();
}

QueryResult MariaDbServer::Query(const std::string& sql, const std::string& database) const {
  return QueryAsRoot(socket_path_, sql, database);
}

QueryResult QueryAsRoot(const std::string& socket_path, const std::string& sql,
                        const std::string& database, const std::string& session) {
  std::string error;
  MysqlHandle mysql = ConnectRoot(socket_path, database, 10, error);
  if (!mysql) throw std::runtime_error("test mariadb connect failed: " + error);
  if (!session.empty() && mysql_real_query(mysql.get(), session.data(), session.size()) != 0) {
    throw std::runtime_error(fmt::format("test mariadb statement '{}' failed: {} (error {})",
                                         session, mysql_error(mysql.get()),
                                         mysql_errno(mysql.get())));
  }
  if (mysql_real_query(mysql.get(), sql.data(), sql.size()) != 0) {
    throw std::runtime_error(fmt::format("test mariadb query '{}' failed: {} (error {})", sql,
                                         mysql_error(mysql.get()), mysql_errno(mysql.get())));
  }
  QueryResult result;
  MYSQL_RES* res = mysql_store_result(mysql.get());
  if (res == nullptr) {
    if (mysql_field_count(mysql.get()) != 0) {
      throw std::runtime_error(fmt::format("test mariadb query '{}': reading the rows failed: {}",
                                           sql, mysql_error(mysql.get())));
    }
    result.affected_rows = mysql_affected_rows(mysql.get());
    return result;
  }
  const unsigned columns = mysql_num_fields(res);
  while (MYSQL_ROW row = mysql_fetch_row(res)) {
    const unsigned long* lengths = mysql_fetch_lengths(res);
    auto& out = result.rows.emplace_back();
    for (unsigned i = 0; i < columns; ++i) {
      if (row[i] == nullptr) {
        out.emplace_back();
      } else {
        out.emplace_back(std::string(row[i], lengths[i]));
      }
    }
  }
  mysql_free_result(res);
  return result;
}

std::string MariaDbServer::Scalar(const std::string& sql, const std::string& database) const {
  QueryResult result = Query(sql, database);
  if (result.rows.size() != 1 || result.rows[0].size() != 1 || !result.rows[0][0]) {
    throw std::runtime_error("test mariadb query '" + sql + "' did not return one non-NULL value");
  }
  return *result.rows[0][0];
}

std::string MariaDbServer::UniqueDatabase() const {
  std::random_device device;
  const std::string name = fmt::format("t{:06x}{:06x}", device() & 0xFFFFFF, device() & 0xFFFFFF);
  Query(fmt::format("CREATE DATABASE `{}` CHARACTER SET utf8mb4", name));
  return url(name);
}

}  // namespace flashsale::testing
