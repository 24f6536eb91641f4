#include "store/mysql/connection.h"

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <variant>

namespace flashsale::store::mysql {

using base::Error;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr unsigned kConnectTimeoutS = 5;
constexpr unsigned kReadWriteTimeoutS = 30;
// Row lock waits end (ER_LOCK_WAIT_TIMEOUT) well before the read timeout would drop the
// connection: a call blocked behind another writer fails cleanly instead.
constexpr int kLockWaitTimeoutS = 10;

// The session every connection runs in. Strict mode makes a value the column cannot hold an
// error, not a silent truncation. READ COMMITTED: each statement sees what is committed when it
// runs, which InsertOrders relies on to tell a redelivery from a double sale when a concurrent
// writer commits the same order first; it also takes fewer gap locks than REPEATABLE READ.
std::array<std::string, 2> SessionSetup() {
  return {fmt::format("SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', "
                      "SESSION innodb_lock_wait_timeout = {}",
                      kLockWaitTimeoutS),
          "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"};
}

// The connection is gone or unusable: drop it; the operation did not complete.
bool IsConnectionLoss(unsigned code) {
  switch (code) {
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_UNKNOWN_HOST:
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_SERVER_LOST_EXTENDED:
    case CR_ERR_NET_READ:
    case CR_ERR_NET_WRITE:
    case ER_SERVER_SHUTDOWN:
    case ER_CONNECTION_KILLED:
    case ER_NET_READ_ERROR:
    case ER_NET_READ_INTERRUPTED:
    case ER_NET_ERROR_ON_WRITE:
    case ER_NET_WRITE_INTERRUPTED:
    case ER_NEW_ABORTING_CONNECTION:
      return true;
    default:
      return false;
  }
}

// Errors of the client library itself (bad use, out of sync, out of memory): the connection's
// state is unknown, so it is dropped too.
bool IsClientError(unsigned code) {
  return (code >= CR_MIN_ERROR && code <= CR_MAX_ERROR) || (code >= 5000 && code < 6000);
}

ErrorCode CodeFor(unsigned code) {
  if (IsConnectionLoss(code)) return ErrorCode::kUnavailable;
  switch (code) {
    case ER_DUP_ENTRY:
    case ER_DUP_KEY:
    case ER_DUP_ENTRY_WITH_KEY_NAME:
      return ErrorCode::kAlreadyExists;
    // The statement (a lock wait) or the transaction (a deadlock, or on Galera a certification
    // conflict, which the server reports as a deadlock) was rolled back: nothing happened, and
    // trying again later may work. ER_UNKNOWN_COM_ERROR is how a Galera node that is not part of
    // the primary component (or not synced yet) refuses every statement.
    case ER_LOCK_WAIT_TIMEOUT:
    case ER_LOCK_DEADLOCK:
    case ER_UNKNOWN_COM_ERROR:
    case ER_STATEMENT_TIMEOUT:
    case ER_QUERY_INTERRUPTED:
    case ER_CON_COUNT_ERROR:
    case ER_TOO_MANY_USER_CONNECTIONS:
    case ER_OUT_OF_RESOURCES:
    case ER_CANT_CREATE_THREAD:
    case ER_LOCK_TABLE_FULL:
      return ErrorCode::kUnavailable;
    // A value the schema cannot hold.
    case ER_DATA_TOO_LONG:
    case ER_TRUNCATED_WRONG_VALUE_FOR_FIELD:
    case WARN_DATA_TRUNCATED:
    case ER_WARN_DATA_OUT_OF_RANGE:
    case ER_BAD_NULL_ERROR:
    case ER_CONSTRAINT_FAILED:
      return ErrorCode::kInvalidArgument;
    default:
      return ErrorCode::kInternal;
  }
}

// The TLS options of `endpoint` (store/mysql/url.h). Connector/C checks the certificate chain when
// a CA file or directory is set, and the chain and the host name with VERIFY_SERVER_CERT (with the
// system's CAs when none is set). SSL_ENFORCE asks for TLS; Open() checks that it was used.
base::Status SetTlsOptions(MYSQL* mysql, const MySqlEndpoint& endpoint, const std::string& where) {
  if (!endpoint.tls()) return {};
  if (!endpoint.ssl_ca.empty()) {
    if (std::FILE* file = std::fopen(endpoint.ssl_ca.c_str(), "r")) {
      std::fclose(file);
    } else {
      return MakeError(ErrorCode::kUnavailable,
                       "mysql connect to {}: ssl-ca '{}' cannot be read: {}", where,
                       endpoint.ssl_ca, std::strerror(errno));
    }
  }
  const my_bool on = 1;
  bool set = mysql_optionsv(mysql, MYSQL_OPT_SSL_ENFORCE, &on) == 0;
  if (endpoint.ssl_mode == SslMode::kVerifyIdentity) {
    set = set && mysql_optionsv(mysql, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on) == 0;
  }
  if (!endpoint.ssl_ca.empty()) {
    set = set && mysql_optionsv(mysql, MYSQL_OPT_SSL_CA, endpoint.ssl_ca.c_str()) == 0;
  } else if (endpoint.ssl_mode == SslMode::kVerifyCa) {
    // No CA file: the system's CA directory, so that the chain is checked (the one place the
    // system keeps them; SSL_CERT_DIR overrides it as it does for OpenSSL).
    const char* dir = std::getenv(X509_get_default_cert_dir_env());
    if (dir == nullptr || *dir == '\0') dir = X509_get_default_cert_dir();
    set = set && mysql_optionsv(mysql, MYSQL_OPT_SSL_CAPATH, dir) == 0;
  }
  if (!set) {
    return MakeError(ErrorCode::kInternal,
                     "mysql connect to {}: the client library refused the TLS options", where);
  }
  return {};
}

}  // namespace

void InitLibrary() {
  static std::once_flag once;
  std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

bool IsDuplicateKey(unsigned code) {
  return code == ER_DUP_ENTRY || code == ER_DUP_KEY || code == ER_DUP_ENTRY_WITH_KEY_NAME;
}

// ---- Row ----

int64_t Row::Int(size_t column) const {
  const Cell& cell = cells_[column];
  if (cell.type == Cell::kReal) return static_cast<int64_t>(cell.real);
  if (cell.type == Cell::kText) {  // DECIMAL arrives as text
    int64_t value = 0;
    std::from_chars(cell.text.data(), cell.text.data() + cell.text.size(), value);
    return value;
  }
  return cell.integer;
}

double Row::Double(size_t column) const {
  const Cell& cell = cells_[column];
  return cell.type == Cell::kReal ? cell.real : static_cast<double>(cell.integer);
}

// ---- Connection ----

Result<std::unique_ptr<Connection>> Connection::Open(const MySqlEndpoint& endpoint) {
  MYSQL* mysql = mysql_init(nullptr);
  const std::string where = endpoint.Describe();
  if (mysql == nullptr) {
    return MakeError(ErrorCode::kUnavailable, "mysql connect to {}: out of memory", where);
  }
  std::unique_ptr<Connection> conn(new Connection(mysql, where));
  const unsigned connect_timeout = kConnectTimeoutS;
  const unsigned io_timeout = kReadWriteTimeoutS;
  const my_bool reconnect = 0;
  const unsigned protocol = endpoint.socket.empty() ? MYSQL_PROTOCOL_TCP : MYSQL_PROTOCOL_SOCKET;
  mysql_optionsv(mysql, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
  mysql_optionsv(mysql, MYSQL_OPT_READ_TIMEOUT, &io_timeout);
  mysql_optionsv(mysql, MYSQL_OPT_WRITE_TIMEOUT, &io_timeout);
  mysql_optionsv(mysql, MYSQL_OPT_RECONNECT, &reconnect);
  mysql_optionsv(mysql, MYSQL_OPT_PROTOCOL, &protocol);
  mysql_optionsv(mysql, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  if (auto tls = SetTlsOptions(mysql, endpoint, where); !tls) return std::move(tls).error();
  const bool tcp = endpoint.socket.empty();
  if (mysql_real_connect(mysql, tcp ? endpoint.host.c_str() : "localhost", endpoint.user.c_str(),
                         endpoint.password.c_str(), endpoint.database.c_str(),
                         tcp ? endpoint.port : 0, tcp ? nullptr : endpoint.socket.c_str(),
                         0) == nullptr) {
    // Whatever refused us (no server, a wrong password, no such database), the store cannot be
    // used until that changes.
    // MariaDB before 11.4 refuses plaintext under require_secure_transport as a wrong password.
    const bool maybe_tls_required =
        tcp && !endpoint.tls() && mysql_errno(mysql) == ER_ACCESS_DENIED_ERROR;
    return MakeError(ErrorCode::kUnavailable, "mysql connect to {}: {} (error {}){}", where,
                     mysql_error(mysql), mysql_errno(mysql),
                     maybe_tls_required
                         ? "; if the server requires TLS (require_secure_transport), "
                           "add ?ssl-mode=VERIFY_CA&ssl-ca=/path/ca.pem to the URL"
                         : "");
  }
  // Connector/C 3.3 refuses a server without TLS before logging in only when it checks the host
  // name (VERIFY_IDENTITY); with REQUIRED and VERIFY_CA it logs in over plaintext (the
  // challenge-response of the authentication plugin, not the password). The connection is then
  // closed before any statement runs on it.
  if (endpoint.tls() && mysql_get_ssl_cipher(mysql) == nullptr) {
    return MakeError(ErrorCode::kUnavailable,
                     "mysql connect to {}: the server does not offer TLS, and ssl-mode={} asks for "
                     "it (the connection was closed before any statement)",
                     where, SslModeName(endpoint.ssl_mode));
  }
  for (const std::string& setup : SessionSetup()) {
    if (auto status = conn->Exec(setup, "session setup"); !status) {
      return std::move(status).error();
    }
  }
  if (auto causal = conn->ReadCausallyOnGalera(); !causal) return std::move(causal).error();
  return conn;
}

// A Galera node certifies a write set with the whole cluster before COMMIT returns, but applies
// the other nodes' write sets a moment later: without this, a read through one node could miss
// what another node committed just before (an order, an activity an admin created elsewhere).
// wsrep_sync_wait = 1 makes each read wait until the node has applied everything committed in the
// cluster when the read began. A server without Galera has no wsrep_on variable, or has it OFF.
base::Status Connection::ReadCausallyOnGalera() {
  auto wsrep = TextRows("SHOW VARIABLES LIKE 'wsrep_on'", "session setup");
  if (!wsrep) return std::move(wsrep).error();
  const bool galera = !wsrep->empty() && wsrep->front().size() == 2 && wsrep->front()[1] == "ON";
  if (!galera) return {};
  return Exec("SET SESSION wsrep_sync_wait = 1", "session setup");
}

Connection::~Connection() { mysql_close(mysql_); }

Error Connection::Fail(std::string_view what, unsigned code, std::string_view message) {
  if (IsConnectionLoss(code) || IsClientError(code)) broken_ = true;
  // Galera: a certification conflict (at COMMIT, or an autocommitted statement) and a transaction
  // aborted by a replicated one that won ("brute force" abort) both arrive as ER_LOCK_DEADLOCK.
  if (code == ER_LOCK_DEADLOCK) deadlocked_ = true;
  const ErrorCode error_code = IsConnectionLoss(code) ? ErrorCode::kUnavailable
                               : IsClientError(code)  ? ErrorCode::kInternal
                                                      : CodeFor(code);
  return MakeError(error_code, "mysql {} on {}: {} (error {})", what, where_, message, code);
}

Error Connection::FailFromHandle(std::string_view what) {
  return Fail(what, mysql_errno(mysql_), mysql_error(mysql_));
}

base::Status Connection::Ping() {
  if (mysql_ping(mysql_) != 0) return FailFromHandle("ping");
  return {};
}

base::Status Connection::Exec(std::string_view sql, std::string_view what) {
  if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) return FailFromHandle(what);
  if (MYSQL_RES* res = mysql_store_result(mysql_)) {
    mysql_free_result(res);
  } else if (mysql_field_count(mysql_) != 0) {
    return FailFromHandle(what);
  }
  return {};
}

Result<std::vector<std::vector<std::string>>> Connection::TextRows(std::string_view sql,
                                                                   std::string_view what) {
  if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) return FailFromHandle(what);
  MYSQL_RES* res = mysql_store_result(mysql_);
  if (res == nullptr) {
    if (mysql_field_count(mysql_) != 0) return FailFromHandle(what);
    return std::vector<std::vector<std::string>>{};
  }
  std::vector<std::vector<std::string>> rows;
  const unsigned columns = mysql_num_fields(res);
  while (MYSQL_ROW row = mysql_fetch_row(res)) {
    const unsigned long* lengths = mysql_fetch_lengths(res);
    auto& out = rows.emplace_back();
    for (unsigned i = 0; i < columns; ++i) {
      out.emplace_back(row[i] ? std::string(row[i], lengths[i]) : std::string());
    }
  }
  mysql_free_result(res);
  return rows;
}

// ---- Statement ----

Statement::~Statement() {
  if (stmt_ != nullptr) mysql_stmt_close(stmt_);
}

base::Status Statement::Execute(std::span<const Param> params) {
  rows_.clear();
  affected_rows_ = 0;
  warnings_ = 0;
  if (stmt_ == nullptr) {
    if (auto prepared = Prepare(); !prepared) return prepared;
  }
  if (params.size() != mysql_stmt_param_count(stmt_)) {
    return MakeError(ErrorCode::kInternal, "mysql {}: {} parameters for {} placeholders", what_,
                     params.size(), mysql_stmt_param_count(stmt_));
  }
  // Copies: MYSQL_BIND wants non-const buffers, and they must outlive mysql_stmt_execute.
  std::vector<Param> values(params.begin(), params.end());
  std::vector<MYSQL_BIND> binds(values.size());
  std::vector<unsigned long> lengths(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    MYSQL_BIND& bind = binds[i];
    std::memset(&bind, 0, sizeof(bind));
    if (auto* integer = std::get_if<int64_t>(&values[i])) {
      bind.buffer_type = MYSQL_TYPE_LONGLONG;
      bind.buffer = integer;
    } else if (auto* real = std::get_if<double>(&values[i])) {
      bind.buffer_type = MYSQL_TYPE_DOUBLE;
      bind.buffer = real;
    } else {
      const std::string_view text = std::get<std::string_view>(values[i]);
      static char empty[1] = {0};
      bind.buffer_type = MYSQL_TYPE_STRING;
      bind.buffer = text.empty() ? empty : const_cast<char*>(text.data());
      bind.buffer_length = text.size();
      lengths[i] = text.size();
      bind.length = &lengths[i];
    }
  }
  if (!binds.empty() && mysql_stmt_bind_param(stmt_, binds.data()) != 0) return StmtError();
  if (mysql_stmt_execute(stmt_) != 0) return StmtError();
  warnings_ = mysql_warning_count(conn_.get());
  MYSQL_RES* meta = mysql_stmt_result_metadata(stmt_);
  if (meta == nullptr) {
    if (mysql_stmt_errno(stmt_) != 0) return StmtError();
    affected_rows_ = mysql_stmt_affected_rows(stmt_);
    return {};
  }
  auto status = ReadRows(meta);
  mysql_free_result(meta);
  mysql_stmt_free_result(stmt_);
  return status;
}

base::Status Statement::Prepare() {
  stmt_ = mysql_stmt_init(conn_.get());
  if (stmt_ == nullptr) return conn_.FailFromHandle(what_);
  // Lets mysql_stmt_store_result report each column's longest value, to size the buffers.
  const my_bool update_max_length = 1;
  mysql_stmt_attr_set(stmt_, STMT_ATTR_UPDATE_MAX_LENGTH, &update_max_length);
  if (mysql_stmt_prepare(stmt_, sql_.data(), sql_.size()) != 0) return StmtError();
  return {};
}

base::Status Statement::ReadRows(MYSQL_RES* meta) {
  if (mysql_stmt_store_result(stmt_) != 0) return StmtError();
  const unsigned columns = mysql_num_fields(meta);
  const MYSQL_FIELD* fields = mysql_fetch_fields(meta);
  std::vector<MYSQL_BIND> binds(columns);
  std::vector<Row::Cell> cells(columns);
  std::vector<std::vector<char>> buffers(columns);
  std::vector<unsigned long> lengths(columns);
  std::vector<my_bool> nulls(columns);
  for (unsigned i = 0; i < columns; ++i) {
    MYSQL_BIND& bind = binds[i];
    std::memset(&bind, 0, sizeof(bind));
    bind.is_null = &nulls[i];
    bind.length = &lengths[i];
    switch (fields[i].type) {
      case MYSQL_TYPE_TINY:
      case MYSQL_TYPE_SHORT:
      case MYSQL_TYPE_INT24:
      case MYSQL_TYPE_LONG:
      case MYSQL_TYPE_LONGLONG:
        cells[i].type = Row::Cell::kInt;
        bind.buffer_type = MYSQL_TYPE_LONGLONG;
        bind.buffer = &cells[i].integer;
        break;
      case MYSQL_TYPE_FLOAT:
      case MYSQL_TYPE_DOUBLE:
        cells[i].type = Row::Cell::kReal;
        bind.buffer_type = MYSQL_TYPE_DOUBLE;
        bind.buffer = &cells[i].real;
        break;
      default:
        cells[i].type = Row::Cell::kText;
        buffers[i].resize(fields[i].max_length + 1);
        bind.buffer_type = MYSQL_TYPE_STRING;
        bind.buffer = buffers[i].data();
        bind.buffer_length = buffers[i].size();
        break;
    }
  }
  if (mysql_stmt_bind_result(stmt_, binds.data()) != 0) return StmtError();
  for (;;) {
    const int fetched = mysql_stmt_fetch(stmt_);
    if (fetched == MYSQL_NO_DATA) break;
    if (fetched == 1) return StmtError();
    if (fetched == MYSQL_DATA_TRUNCATED) {  // max_length was wrong: a bug, not bad data
      return MakeError(ErrorCode::kInternal, "mysql {}: a value did not fit its buffer", what_);
    }
    Row& row = rows_.emplace_back();
    row.cells_ = cells;
    for (unsigned i = 0; i < columns; ++i) {
      Row::Cell& cell = row.cells_[i];
      cell.null = nulls[i] != 0;
      if (cell.type == Row::Cell::kText && !cell.null) {
        cell.text.assign(buffers[i].data(), std::min<size_t>(lengths[i], buffers[i].size()));
      }
    }
  }
  return {};
}

Error Statement::StmtError() {
  return conn_.Fail(what_, mysql_stmt_errno(stmt_), mysql_stmt_error(stmt_));
}

// ---- Transaction ----

Transaction::Transaction(Connection& conn) : conn_(conn) {
  status_ = conn.Exec("START TRANSACTION", "begin");
}

Transaction::~Transaction() {
  // On a broken connection there is nothing to roll back with: the server rolls back when it
  // sees the connection close.
  if (status_.ok() && !done_ && !conn_.broken()) {
    if (auto rolled = conn_.Exec("ROLLBACK", "rollback"); !rolled) {
      spdlog::warn("{}", rolled.error().ToString());
    }
  }
}

base::Status Transaction::Commit() {
  done_ = true;
  auto committed = conn_.Exec("COMMIT", "commit");
  if (!committed && committed.error().code == ErrorCode::kUnavailable && conn_.broken()) {
    return MakeError(ErrorCode::kUnknownOutcome,
                     "{}; the connection was lost with COMMIT in flight, so the transaction may "
                     "or may not have been committed",
                     committed.error().message);
  }
  return committed;
}

}  // namespace flashsale::store::mysql
