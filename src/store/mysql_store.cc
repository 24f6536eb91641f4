#include "store/mysql_store.h"

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <type_traits>
#include <unordered_set>
#include <variant>

#include "base/strings.h"
#include "store/audit_sql.h"

namespace flashsale::store {

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
constexpr int64_t kMigrationLockTimeoutS = 20;
constexpr int kDeadlockAttempts = 3;      // runs of a call whose transaction deadlocks
constexpr size_t kMaxIdBytes = 64;        // VARCHAR(64) ids
constexpr size_t kMaxTextBytes = 65'535;  // TEXT

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

constexpr std::string_view kCreateSchemaMigrations = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version     BIGINT NOT NULL PRIMARY KEY,
  applied_ms  BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql";

// Versioned migrations, SqliteStore's schema in MySQL's dialect: step i brings the schema from
// version i to i + 1; append only. MySQL commits each DDL statement at once, so a migration is a
// list of statements that can all be run again (IF NOT EXISTS) should one stop half-way.
// Binary collation: ids compare byte for byte, as in SQLite (utf8mb4's default collation would
// make 'Alice' and 'alice' one user).
constexpr std::string_view kMigration1[] = {
    R"sql(
CREATE TABLE IF NOT EXISTS activities (
  id              VARCHAR(64) NOT NULL PRIMARY KEY,
  title           TEXT NOT NULL,
  kind            VARCHAR(16) NOT NULL CHECK (kind IN ('counted', 'items')),
  start_ms        BIGINT NOT NULL,
  end_ms          BIGINT NOT NULL,
  per_user_limit  BIGINT NOT NULL,
  open            TINYINT NOT NULL,
  total_units     BIGINT NOT NULL,
  user_rate       DOUBLE NOT NULL DEFAULT 0,
  user_burst      BIGINT NOT NULL DEFAULT 1,
  address_rate    DOUBLE NOT NULL DEFAULT 0,
  address_burst   BIGINT NOT NULL DEFAULT 1,
  version         BIGINT NOT NULL,
  created_ms      BIGINT NOT NULL,
  updated_ms      BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql",
    // seq keeps the order items were added in (SQLite's rowid).
    R"sql(
CREATE TABLE IF NOT EXISTS activity_items (
  activity_id     VARCHAR(64) NOT NULL,
  item_id         VARCHAR(64) NOT NULL,
  added_ms        BIGINT NOT NULL,
  seq             BIGINT NOT NULL AUTO_INCREMENT,
  PRIMARY KEY (activity_id, item_id),
  UNIQUE KEY activity_items_seq (seq),
  CONSTRAINT activity_items_activity FOREIGN KEY (activity_id) REFERENCES activities (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql",
};

// SQLite's partial unique index "(activity_id, user_id) WHERE single_unit = 1 AND state <>
// 'cancelled'" does not exist here: the live_* columns hold activity and user of a live single-unit
// order and are NULL otherwise, and a unique key over NULLs never clashes. (Two columns rather
// than one concatenation: no separator to collide with, whatever the ids hold.)
constexpr std::string_view kMigration2[] = {
    R"sql(
CREATE TABLE IF NOT EXISTS orders (
  order_id          VARCHAR(64) NOT NULL PRIMARY KEY,
  activity_id       VARCHAR(64) NOT NULL,
  user_id           VARCHAR(64) NOT NULL,
  quantity          BIGINT NOT NULL,
  items             TEXT NOT NULL,
  state             VARCHAR(16) NOT NULL CHECK (state IN ('reserved', 'paid', 'cancelled')),
  single_unit       TINYINT NOT NULL,
  created_ms        BIGINT NOT NULL,
  persisted_ms      BIGINT NOT NULL,
  stream_id         VARCHAR(64) NOT NULL,
  live_activity_id  VARCHAR(64)
    AS (IF(single_unit = 1 AND state <> 'cancelled', activity_id, NULL)) STORED,
  live_user_id      VARCHAR(64)
    AS (IF(single_unit = 1 AND state <> 'cancelled', user_id, NULL)) STORED,
  UNIQUE KEY orders_one_live_per_user (live_activity_id, live_user_id),
  KEY orders_by_user (user_id, created_ms),
  KEY orders_by_activity (activity_id, state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql",
};

// Payment windows (orders expire; a payment after expiry is flagged for a refund), and lotteries:
// the definition (JSON, store.h EncodeLottery) and one win per user and draw (draw_key
// is NULL for a sale's order, and NULLs never clash). Each statement checks the catalogue first,
// so a migration stopped half-way can run again.
constexpr std::string_view kMigration3[] = {
    "ALTER TABLE activities ADD COLUMN IF NOT EXISTS lottery TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE activities ADD COLUMN IF NOT EXISTS payment_window_ms BIGINT NOT NULL DEFAULT 0",
    R"sql(
ALTER TABLE orders
  ADD COLUMN IF NOT EXISTS draw_no BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS draw_key BIGINT AS (IF(draw_no > 0, draw_no, NULL)) STORED,
  ADD UNIQUE KEY IF NOT EXISTS orders_one_per_draw (activity_id, user_id, draw_key),
  ADD COLUMN IF NOT EXISTS state_ms BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS refund_due TINYINT NOT NULL DEFAULT 0,
  ADD KEY IF NOT EXISTS orders_unpaid (activity_id, state, created_ms)
)sql",
};

// The fence advanced by the lost-write repair after a Redis restart or failover (order batches
// read before it are refused), and orders owed a compensation (sold twice).
constexpr std::string_view kMigration4[] = {
    R"sql(
CREATE TABLE IF NOT EXISTS fence (
  id     TINYINT NOT NULL PRIMARY KEY,
  epoch  BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql",
    "INSERT IGNORE INTO fence (id, epoch) VALUES (1, 0)",
    "ALTER TABLE orders ADD COLUMN IF NOT EXISTS compensation_due TINYINT NOT NULL DEFAULT 0",
};

constexpr std::array<std::span<const std::string_view>, 4> kMigrations = {kMigration1, kMigration2,
                                                                          kMigration3, kMigration4};

// One name per database on the server: LEFT(SHA1(..)) keeps it within GET_LOCK's 64 characters.
constexpr std::string_view kMigrationLock =
    "CONCAT('flashsale-migrate-', LEFT(SHA1(DATABASE()), 32))";

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
    // The statement (a lock wait) or the transaction (a deadlock) was rolled back: nothing
    // happened, and trying again later may work.
    case ER_LOCK_WAIT_TIMEOUT:
    case ER_LOCK_DEADLOCK:
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

bool ParseUnsigned(std::string_view text, uint64_t& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return !text.empty() && ec == std::errc() && ptr == end;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986 percent-decoding; '+' is a plus. kInvalidArgument names `part`, never its text (it may
// be the password).
Result<std::string> PercentDecode(std::string_view text, std::string_view part) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    const int high = i + 2 < text.size() ? HexDigit(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? HexDigit(text[i + 2]) : -1;
    if (high < 0 || low < 0) {
      return MakeError(ErrorCode::kInvalidArgument, "mysql url: bad percent-encoding in the {}",
                       part);
    }
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

}  // namespace

// ---- URL ----

std::string MySqlEndpoint::Describe() const {
  if (!socket.empty()) {
    return fmt::format("mysql://{}@localhost/{}?socket={}", user, database, socket);
  }
  const bool ipv6 = host.find(':') != std::string::npos;
  return fmt::format("mysql://{}@{}{}{}:{}/{}", user, ipv6 ? "[" : "", host, ipv6 ? "]" : "", port,
                     database);
}

Result<MySqlEndpoint> ParseMySqlUrl(std::string_view url) {
  constexpr std::string_view kForms =
      "expected mysql://user[:password]@host[:port]/database or "
      "mysql://user[:password]@localhost/database?socket=/path/to.sock";
  constexpr std::string_view kScheme = "mysql://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return MakeError(ErrorCode::kInvalidArgument, "mysql url does not start with mysql://; {}",
                     kForms);
  }
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find('#') != std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "mysql url: a fragment ('#') is not allowed; {}",
                     kForms);
  }
  std::string_view query;
  if (const size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "mysql url names no database; {}", kForms);
  }
  const std::string_view authority = rest.substr(0, slash);
  const std::string_view path = rest.substr(slash + 1);

  MySqlEndpoint endpoint;
  auto database = PercentDecode(path, "database");
  if (!database) return std::move(database).error();
  if (database->empty() || database->find('/') != std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "mysql url: database '{}' is not a name; {}",
                     *database, kForms);
  }
  endpoint.database = std::move(*database);

  const size_t at = authority.rfind('@');
  if (at == std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "mysql url names no user; {}", kForms);
  }
  const std::string_view userinfo = authority.substr(0, at);
  const std::string_view hostport = authority.substr(at + 1);
  const size_t colon = userinfo.find(':');
  auto user = PercentDecode(userinfo.substr(0, colon), "user");
  if (!user) return std::move(user).error();
  if (user->empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "mysql url names no user; {}", kForms);
  }
  endpoint.user = std::move(*user);
  if (colon != std::string_view::npos) {
    auto password = PercentDecode(userinfo.substr(colon + 1), "password");
    if (!password) return std::move(password).error();
    endpoint.password = std::move(*password);
  }

  std::string_view host = hostport;
  std::string_view port;
  if (!hostport.empty() && hostport.front() == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) {
      return MakeError(ErrorCode::kInvalidArgument, "mysql url: unclosed '[' in the host");
    }
    host = hostport.substr(1, close - 1);
    const std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return MakeError(ErrorCode::kInvalidArgument, "mysql url: '{}' after the host", after);
      }
      port = after.substr(1);
      if (port.empty()) {
        return MakeError(ErrorCode::kInvalidArgument, "mysql url: empty port; {}", kForms);
      }
    }
  } else if (const size_t c = hostport.find(':'); c != std::string_view::npos) {
    host = hostport.substr(0, c);
    port = hostport.substr(c + 1);
    if (port.empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "mysql url: empty port; {}", kForms);
    }
  }
  if (!port.empty()) {
    uint64_t number = 0;
    if (!ParseUnsigned(port, number) || number < 1 || number > 65535) {
      return MakeError(ErrorCode::kInvalidArgument, "mysql url: port '{}' is not 1 to 65535", port);
    }
    endpoint.port = static_cast<uint16_t>(number);
  }

  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = param.find('=');
    const std::string_view key = param.substr(0, eq);
    if (key != "socket" || eq == std::string_view::npos) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "mysql url: unknown parameter '{}' (only socket=/path/to.sock)", key);
    }
    auto socket = PercentDecode(param.substr(eq + 1), "socket path");
    if (!socket) return std::move(socket).error();
    if (socket->empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "mysql url: empty socket path");
    }
    endpoint.socket = std::move(*socket);
  }

  if (!endpoint.socket.empty()) {
    if (!(host.empty() || host == "localhost") || !port.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "mysql url: with ?socket= the host must be empty or localhost, and no "
                       "port; {}",
                       kForms);
    }
  } else {
    auto decoded = PercentDecode(host, "host");
    if (!decoded) return std::move(decoded).error();
    if (decoded->empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "mysql url names no host; {}", kForms);
    }
    endpoint.host = std::move(*decoded);
  }
  return endpoint;
}

// ---- Connection, statements, transactions ----

namespace mysql_internal {

using Param = std::variant<int64_t, double, std::string_view>;

// One row of a result, copied out of the statement's buffers.
class Row {
 public:
  bool IsNull(size_t column) const { return cells_[column].null; }
  int64_t Int(size_t column) const {
    const Cell& cell = cells_[column];
    if (cell.type == Cell::kReal) return static_cast<int64_t>(cell.real);
    if (cell.type == Cell::kText) {  // DECIMAL arrives as text
      int64_t value = 0;
      std::from_chars(cell.text.data(), cell.text.data() + cell.text.size(), value);
      return value;
    }
    return cell.integer;
  }
  double Double(size_t column) const {
    const Cell& cell = cells_[column];
    return cell.type == Cell::kReal ? cell.real : static_cast<double>(cell.integer);
  }
  const std::string& Text(size_t column) const { return cells_[column].text; }

 private:
  friend class Statement;
  struct Cell {
    enum Type { kInt, kReal, kText } type = kText;
    bool null = false;
    int64_t integer = 0;
    double real = 0;
    std::string text;
  };
  std::vector<Cell> cells_;
};

class Connection {
 public:
  static Result<std::unique_ptr<Connection>> Open(const MySqlEndpoint& endpoint) {
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
    const bool tcp = endpoint.socket.empty();
    if (mysql_real_connect(mysql, tcp ? endpoint.host.c_str() : "localhost", endpoint.user.c_str(),
                           endpoint.password.c_str(), endpoint.database.c_str(),
                           tcp ? endpoint.port : 0, tcp ? nullptr : endpoint.socket.c_str(),
                           0) == nullptr) {
      // Whatever refused us (no server, a wrong password, no such database), the store cannot be
      // used until that changes.
      return MakeError(ErrorCode::kUnavailable, "mysql connect to {}: {} (error {})", where,
                       mysql_error(mysql), mysql_errno(mysql));
    }
    for (const std::string& setup : SessionSetup()) {
      if (auto status = conn->Exec(setup, "session setup"); !status) {
        return std::move(status).error();
      }
    }
    return conn;
  }

  ~Connection() { mysql_close(mysql_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  MYSQL* get() { return mysql_; }
  // A connection-level or client error was seen: the connection must not be used again.
  bool broken() const { return broken_; }
  // The server chose this connection's transaction as a deadlock victim and rolled all of it back.
  bool deadlocked() const { return deadlocked_; }
  void ClearDeadlock() { deadlocked_ = false; }

  // The error for a failed call, classified; marks the connection broken when it is.
  Error Fail(std::string_view what, unsigned code, std::string_view message) {
    if (IsConnectionLoss(code) || IsClientError(code)) broken_ = true;
    if (code == ER_LOCK_DEADLOCK) deadlocked_ = true;
    const ErrorCode error_code = IsConnectionLoss(code) ? ErrorCode::kUnavailable
                                 : IsClientError(code)  ? ErrorCode::kInternal
                                                        : CodeFor(code);
    return MakeError(error_code, "mysql {} on {}: {} (error {})", what, where_, message, code);
  }
  Error FailFromHandle(std::string_view what) {
    return Fail(what, mysql_errno(mysql_), mysql_error(mysql_));
  }

  // A statement without parameters whose result, if any, is discarded (transactions, DDL, SET).
  base::Status Exec(std::string_view sql, std::string_view what) {
    if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) return FailFromHandle(what);
    if (MYSQL_RES* res = mysql_store_result(mysql_)) {
      mysql_free_result(res);
    } else if (mysql_field_count(mysql_) != 0) {
      return FailFromHandle(what);
    }
    return {};
  }

  // The rows of a statement without parameters, as text (SHOW WARNINGS). NULL reads as "".
  Result<std::vector<std::vector<std::string>>> TextRows(std::string_view sql,
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

 private:
  Connection(MYSQL* mysql, std::string where) : mysql_(mysql), where_(std::move(where)) {}

  MYSQL* mysql_;
  std::string where_;  // Describe(): for messages, without the password
  bool broken_ = false;
  bool deadlocked_ = false;
};

// A prepared statement, prepared on first Execute and closed on destruction (before its
// connection goes away: statements live inside one call's body).
class Statement {
 public:
  Statement(Connection& conn, std::string sql, std::string_view what)
      : conn_(conn), sql_(std::move(sql)), what_(what) {}
  ~Statement() {
    if (stmt_ != nullptr) mysql_stmt_close(stmt_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Runs the statement with these parameters; a result set is read in full into rows().
  base::Status Execute(std::initializer_list<Param> params) {
    return Execute(std::span<const Param>(params.begin(), params.size()));
  }
  base::Status Execute(std::span<const Param> params) {
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

  const std::vector<Row>& rows() const { return rows_; }
  uint64_t affected_rows() const { return affected_rows_; }
  unsigned warnings() const { return warnings_; }

 private:
  base::Status Prepare() {
    stmt_ = mysql_stmt_init(conn_.get());
    if (stmt_ == nullptr) return conn_.FailFromHandle(what_);
    // Lets mysql_stmt_store_result report each column's longest value, to size the buffers.
    const my_bool update_max_length = 1;
    mysql_stmt_attr_set(stmt_, STMT_ATTR_UPDATE_MAX_LENGTH, &update_max_length);
    if (mysql_stmt_prepare(stmt_, sql_.data(), sql_.size()) != 0) return StmtError();
    return {};
  }

  base::Status ReadRows(MYSQL_RES* meta) {
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

  Error StmtError() { return conn_.Fail(what_, mysql_stmt_errno(stmt_), mysql_stmt_error(stmt_)); }

  Connection& conn_;
  std::string sql_;
  std::string_view what_;
  MYSQL_STMT* stmt_ = nullptr;
  std::vector<Row> rows_;
  uint64_t affected_rows_ = 0;
  unsigned warnings_ = 0;
};

// START TRANSACTION ... COMMIT; rolls back unless committed.
class Transaction {
 public:
  explicit Transaction(Connection& conn) : conn_(conn) {
    status_ = conn.Exec("START TRANSACTION", "begin");
  }
  ~Transaction() {
    // On a broken connection there is nothing to roll back with: the server rolls back when it
    // sees the connection close.
    if (status_.ok() && !done_ && !conn_.broken()) {
      if (auto rolled = conn_.Exec("ROLLBACK", "rollback"); !rolled) {
        spdlog::warn("{}", rolled.error().ToString());
      }
    }
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  const base::Status& status() const { return status_; }

  // A connection lost while COMMIT was in flight leaves the outcome unknown: kUnknownOutcome.
  base::Status Commit() {
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

 private:
  Connection& conn_;
  base::Status status_;
  bool done_ = false;
};

}  // namespace mysql_internal

namespace {

using mysql_internal::Connection;
using mysql_internal::Param;
using mysql_internal::Row;
using mysql_internal::Statement;
using mysql_internal::Transaction;

void InitLibrary() {
  // mysql_init() would do it on first use, but not thread-safely.
  static std::once_flag once;
  std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

constexpr std::string_view kSelectActivity =
    "SELECT id, title, kind, start_ms, end_ms, per_user_limit, open, total_units, user_rate, "
    "user_burst, address_rate, address_burst, version, created_ms, updated_ms, lottery, "
    "payment_window_ms FROM activities";

ActivityRecord ReadActivity(const Row& row) {
  ActivityRecord record;
  core::SeckillActivity& a = record.activity;
  a.id = row.Text(0);
  a.title = row.Text(1);
  a.kind = row.Text(2) == "items" ? core::StockKind::kItemised : core::StockKind::kCounted;
  a.start_ms = row.Int(3);
  a.end_ms = row.Int(4);
  a.per_user_limit = row.Int(5);
  a.open = row.Int(6) != 0;
  record.total_units = row.Int(7);
  a.stock = a.kind == core::StockKind::kCounted ? record.total_units : 0;
  a.user_rate = {row.Double(8), row.Int(9)};
  a.address_rate = {row.Double(10), row.Int(11)};
  record.version = row.Int(12);
  record.created_ms = row.Int(13);
  record.updated_ms = row.Int(14);
  SetLotteryFromColumn(a, row.Text(15));
  a.payment_window_ms = row.Int(16);
  return record;
}

// The activity, its row locked until the transaction ends when `for_update` (a read-modify-write
// must not interleave with another's: SQLite gets that from BEGIN IMMEDIATE).
Result<ActivityRecord> GetActivityOn(Connection& conn, std::string_view id, bool with_items,
                                     bool for_update) {
  Statement query(
      conn, std::string(kSelectActivity) + " WHERE id = ?" + (for_update ? " FOR UPDATE" : ""),
      "get activity");
  if (auto run = query.Execute({id}); !run) return run.error();
  if (query.rows().empty()) return MakeError(ErrorCode::kNotFound, "no activity '{}'", id);
  ActivityRecord record = ReadActivity(query.rows().front());
  if (with_items && record.activity.kind == core::StockKind::kItemised) {
    Statement items(conn,
                    "SELECT item_id FROM activity_items WHERE activity_id = ? ORDER BY added_ms, "
                    "seq",
                    "get items");
    if (auto run = items.Execute({id}); !run) return run.error();
    for (const Row& row : items.rows()) record.activity.items.push_back(row.Text(0));
  }
  return record;
}

base::Status InsertItems(Connection& conn, std::string_view activity_id,
                         std::span<const std::string> items, int64_t now_ms) {
  Statement insert(conn,
                   "INSERT INTO activity_items (activity_id, item_id, added_ms) VALUES (?, ?, ?)",
                   "insert item");
  for (const auto& item : items) {
    if (auto run = insert.Execute({activity_id, item, now_ms}); !run) {
      if (run.error().code == ErrorCode::kAlreadyExists) {
        return MakeError(ErrorCode::kAlreadyExists, "activity '{}' already has item '{}'",
                         activity_id, item);
      }
      return run;
    }
  }
  return {};
}

constexpr std::string_view kSelectOrder =
    "SELECT order_id, activity_id, user_id, quantity, items, state, single_unit, created_ms, "
    "persisted_ms, stream_id, draw_no, state_ms, refund_due, compensation_due FROM orders";

OrderRecord ReadOrder(const Row& row) {
  OrderRecord order;
  order.order_id = row.Text(0);
  order.activity_id = row.Text(1);
  order.user_id = row.Text(2);
  order.quantity = row.Int(3);
  order.items = base::SplitWords(row.Text(4));
  order.state = OrderStateFrom(row.Text(5));
  order.single_unit = row.Int(6) != 0;
  order.created_ms = row.Int(7);
  order.persisted_ms = row.Int(8);
  order.stream_id = row.Text(9);
  order.draw_no = row.Int(10);
  order.state_ms = row.Int(11);
  order.refund_due = row.Int(12) != 0;
  order.compensation_due = row.Int(13) != 0;
  return order;
}

// What the schema cannot hold, refused before anything is written (strict mode would refuse it
// too, but INSERT IGNORE turns such errors into warnings).
base::Status ValidateOrder(const OrderRecord& order) {
  for (const auto& [name, value] :
       {std::pair<std::string_view, std::string_view>{"order id", order.order_id},
        {"activity id", order.activity_id},
        {"user id", order.user_id},
        {"stream id", order.stream_id}}) {
    if (value.size() > kMaxIdBytes) {
      return MakeError(ErrorCode::kInvalidArgument, "order '{}': {} is over {} bytes",
                       order.order_id.substr(0, kMaxIdBytes), name, kMaxIdBytes);
    }
  }
  size_t items_bytes = order.items.empty() ? 0 : order.items.size() - 1;
  for (const auto& item : order.items) items_bytes += item.size();
  if (items_bytes > kMaxTextBytes) {
    return MakeError(ErrorCode::kInvalidArgument, "order '{}': items are over {} bytes",
                     order.order_id, kMaxTextBytes);
  }
  return {};
}

// INSERT IGNORE downgrades every error to a warning, and only a duplicate key may be ignored: any
// other warning (a value truncated, a check failed) is an error, and the transaction rolls back.
base::Status CheckOnlyDuplicatesIgnored(Connection& conn, const Statement& insert,
                                        std::string_view order_id) {
  if (insert.warnings() == 0) return {};
  auto warnings = conn.TextRows("SHOW WARNINGS", "read warnings");
  if (!warnings) return std::move(warnings).error();
  for (const auto& row : *warnings) {  // Level, Code, Message
    if (row.size() < 3 || row[0] == "Note") continue;
    uint64_t code = 0;
    ParseUnsigned(row[1], code);
    if (code == ER_DUP_ENTRY || code == ER_DUP_KEY || code == ER_DUP_ENTRY_WITH_KEY_NAME) continue;
    return conn.Fail(fmt::format("insert order '{}'", order_id), static_cast<unsigned>(code),
                     row[2]);
  }
  return {};
}

// ---- InsertOrders ----
//
// A batch is written in a handful of round trips whatever its size (InsertBatched): one query for
// the ids that exist, one for the committed live orders of the batch's users, and one multi-row
// INSERT IGNORE per chunk; the outcomes are decided in memory, exactly as the checks of the
// row-by-row way would decide them one order after another (an order sees the ones before it in
// its batch, as a statement sees its own transaction's writes). That agreement holds as long as
// no other writer commits a clashing order meanwhile and every value fits its column: then every
// row is inserted, with no warning. Anything else (a concurrent writer's order ignored as a
// duplicate, a value the server refused with a warning) and the transaction is rolled back whole
// and the batch is written the row-by-row way (InsertOneByOne), which tells those cases apart.

constexpr size_t kMaxIdsPerQuery = 1000;
constexpr size_t kMaxRowsPerInsert = 1000;
constexpr size_t kMaxBytesPerInsert = 4 << 20;  // well under the server's max_allowed_packet

constexpr std::string_view kInsertColumns =
    "INSERT IGNORE INTO orders (order_id, activity_id, user_id, quantity, items, state, "
    "single_unit, created_ms, persisted_ms, stream_id, draw_no) VALUES ";
constexpr std::string_view kInsertRow = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

// The columns' collation (utf8mb4_bin) is PAD SPACE: trailing spaces do not count when ids are
// compared. In-memory sets of ids compare them the same way.
std::string_view Unpadded(std::string_view id) {
  while (!id.empty() && id.back() == ' ') id.remove_suffix(1);
  return id;
}

bool IsLive(const OrderRecord& order) {
  return order.single_unit && order.state != OrderState::kCancelled;
}

// "prefix (?, ?, ...)" with `count` placeholders, then `suffix`.
std::string WithPlaceholders(std::string_view prefix, size_t count, std::string_view suffix) {
  std::string sql(prefix);
  sql += '(';
  for (size_t i = 0; i < count; ++i) sql += i == 0 ? "?" : ", ?";
  sql += ')';
  sql += suffix;
  return sql;
}

// Statements of one call that differ only in their number of placeholders: all full chunks share
// one, prepared once.
class StatementsBySize {
 public:
  StatementsBySize(Connection& conn, std::string_view what) : conn_(conn), what_(what) {}
  template <typename MakeSql>
  Statement& Get(size_t size, const MakeSql& make_sql) {
    auto& statement = statements_[size];
    if (!statement) statement = std::make_unique<Statement>(conn_, make_sql(size), what_);
    return *statement;
  }

 private:
  Connection& conn_;
  std::string_view what_;
  std::map<size_t, std::unique_ptr<Statement>> statements_;
};

// The outcomes, or nothing when the batch did not go in cleanly (the caller rolls back and goes
// row by row). Runs inside the caller's transaction.
Result<std::optional<std::vector<InsertOutcome>>> InsertBatched(Connection& conn,
                                                                std::span<const OrderRecord> orders,
                                                                int64_t now_ms) {
  // 1. Which ids exist (committed; READ COMMITTED).
  std::unordered_set<std::string> existing;
  {
    StatementsBySize queries(conn, "check orders");
    const auto sql = [](size_t n) {
      return WithPlaceholders("SELECT order_id FROM orders WHERE order_id IN ", n, "");
    };
    std::vector<Param> params;
    for (size_t start = 0; start < orders.size(); start += kMaxIdsPerQuery) {
      const size_t end = std::min(orders.size(), start + kMaxIdsPerQuery);
      params.clear();
      for (size_t i = start; i < end; ++i) params.emplace_back(orders[i].order_id);
      Statement& query = queries.Get(params.size(), sql);
      if (auto run = query.Execute(params); !run) return run.error();
      for (const Row& row : query.rows()) existing.emplace(Unpadded(row.Text(0)));
    }
  }

  // 2. Which users of the batch already have a committed live order in the activity, and which
  // order that is (a batch is one activity's, in practice: one query per activity and chunk).
  // The live order may be the very order of the batch, written by another consumer between the
  // two reads: that is a duplicate, not a conflict.
  std::map<std::pair<std::string, std::string>, std::string> live;  // (activity, user) -> order
  {
    std::map<std::string_view, std::vector<std::string_view>> users_by_activity;
    for (const OrderRecord& order : orders) {
      if (IsLive(order) && !existing.contains(std::string(Unpadded(order.order_id)))) {
        users_by_activity[order.activity_id].push_back(order.user_id);
      }
    }
    StatementsBySize queries(conn, "check live orders");
    const auto sql = [](size_t n) {
      return WithPlaceholders(
          "SELECT live_user_id, order_id FROM orders WHERE live_activity_id = ? AND "
          "live_user_id IN ",
          n, "");
    };
    std::vector<Param> params;
    for (const auto& [activity, users] : users_by_activity) {
      for (size_t start = 0; start < users.size(); start += kMaxIdsPerQuery) {
        const size_t end = std::min(users.size(), start + kMaxIdsPerQuery);
        params.assign({activity});
        for (size_t i = start; i < end; ++i) params.emplace_back(users[i]);
        Statement& query = queries.Get(end - start, sql);
        if (auto run = query.Execute(params); !run) return run.error();
        for (const Row& row : query.rows()) {
          live.emplace(
              std::pair(std::string(Unpadded(activity)), std::string(Unpadded(row.Text(0)))),
              std::string(Unpadded(row.Text(1))));
        }
      }
    }
  }

  // 3. The outcomes, order by order, as the row-by-row checks would find them.
  std::vector<InsertOutcome> outcomes;
  outcomes.reserve(orders.size());
  std::vector<size_t> to_insert;
  std::unordered_set<std::string_view> planned_ids;
  for (size_t i = 0; i < orders.size(); ++i) {
    const OrderRecord& order = orders[i];
    const std::string_view id = Unpadded(order.order_id);
    if (planned_ids.contains(id) || existing.contains(std::string(id))) {
      outcomes.push_back(InsertOutcome::kDuplicate);
      continue;
    }
    if (IsLive(order)) {
      // Also an earlier order of this batch: the one live key per user and activity.
      auto [it, fresh] = live.emplace(
          std::pair(std::string(Unpadded(order.activity_id)), std::string(Unpadded(order.user_id))),
          std::string(id));
      if (!fresh) {
        outcomes.push_back(it->second == id ? InsertOutcome::kDuplicate : InsertOutcome::kConflict);
        continue;
      }
    }
    planned_ids.insert(id);
    to_insert.push_back(i);
    outcomes.push_back(InsertOutcome::kInserted);
  }

  // 4. The inserts, in chunks; every row must go in without a warning.
  std::vector<std::string> items(to_insert.size());
  for (size_t k = 0; k < to_insert.size(); ++k)
    items[k] = base::JoinWords(orders[to_insert[k]].items);
  StatementsBySize inserts(conn, "insert orders");
  const auto sql = [](size_t rows) {
    std::string text(kInsertColumns);
    for (size_t r = 0; r < rows; ++r) {
      if (r > 0) text += ", ";
      text += kInsertRow;
    }
    return text;
  };
  std::vector<Param> params;
  for (size_t start = 0; start < to_insert.size();) {
    size_t end = start;
    size_t bytes = 0;
    params.clear();
    while (end < to_insert.size() && end - start < kMaxRowsPerInsert &&
           (end == start || bytes < kMaxBytesPerInsert)) {
      const OrderRecord& order = orders[to_insert[end]];
      bytes += order.order_id.size() + order.activity_id.size() + order.user_id.size() +
               items[end].size() + order.stream_id.size() + 64;
      params.insert(params.end(), {order.order_id, order.activity_id, order.user_id, order.quantity,
                                   items[end], ToString(order.state), int64_t{order.single_unit},
                                   order.created_ms, now_ms, order.stream_id, order.draw_no});
      ++end;
    }
    Statement& insert = inserts.Get(end - start, sql);
    if (auto run = insert.Execute(params); !run) return run.error();
    if (insert.warnings() != 0 || insert.affected_rows() != end - start) {
      return std::optional<std::vector<InsertOutcome>>();
    }
    start = end;
  }
  return std::optional<std::vector<InsertOutcome>>(std::move(outcomes));
}

// The row-by-row way: per order, an existence check by id, a check for a committed live order of
// the user, the insert, and when it was ignored, the existence check again. Runs inside the
// caller's transaction.
Result<std::vector<InsertOutcome>> InsertOneByOne(Connection& conn,
                                                  std::span<const OrderRecord> orders,
                                                  int64_t now_ms) {
  Statement exists(conn, "SELECT 1 FROM orders WHERE order_id = ?", "check order");
  Statement live(conn,
                 "SELECT order_id FROM orders WHERE live_activity_id = ? AND live_user_id = ?",
                 "check live order");
  Statement insert(conn, std::string(kInsertColumns) + std::string(kInsertRow), "insert order");
  std::vector<InsertOutcome> outcomes;
  outcomes.reserve(orders.size());
  for (const OrderRecord& order : orders) {
    if (auto run = exists.Execute({order.order_id}); !run) return run.error();
    if (!exists.rows().empty()) {
      outcomes.push_back(InsertOutcome::kDuplicate);
      continue;
    }
    // A committed live order of this user is a conflict without trying the insert: a clash
    // found by the insert takes a next-key lock on the unique key, and two writers holding such
    // locks deadlock as soon as either inserts into the gap before it (where every order
    // without a live key goes when the clash is with the smallest key).
    if (IsLive(order)) {
      if (auto run = live.Execute({order.activity_id, order.user_id}); !run) return run.error();
      if (!live.rows().empty()) {
        // This very order, committed by another writer since the existence check: a duplicate.
        const bool same = Unpadded(live.rows()[0].Text(0)) == Unpadded(order.order_id);
        outcomes.push_back(same ? InsertOutcome::kDuplicate : InsertOutcome::kConflict);
        continue;
      }
    }
    const std::string items = base::JoinWords(order.items);
    if (auto run = insert.Execute({order.order_id, order.activity_id, order.user_id, order.quantity,
                                   items, ToString(order.state), int64_t{order.single_unit},
                                   order.created_ms, now_ms, order.stream_id, order.draw_no});
        !run) {
      return run.error();
    }
    if (auto only = CheckOnlyDuplicatesIgnored(conn, insert, order.order_id); !only) {
      return only.error();
    }
    if (insert.affected_rows() == 1) {
      outcomes.push_back(InsertOutcome::kInserted);
      continue;
    }
    // Ignored. Either another writer committed this very order after the checks above (its
    // insert held ours until then; READ COMMITTED lets this second check see it), or the
    // one-live-order-per-user key refused a different order of the same user, committed since.
    if (auto run = exists.Execute({order.order_id}); !run) return run.error();
    outcomes.push_back(exists.rows().empty() ? InsertOutcome::kConflict
                                             : InsertOutcome::kDuplicate);
  }
  return outcomes;
}

}  // namespace

// ---- MySqlStore ----

MySqlStore::MySqlStore(MySqlEndpoint endpoint) : endpoint_(std::move(endpoint)) {}

MySqlStore::~MySqlStore() = default;

Result<std::unique_ptr<MySqlStore>> MySqlStore::Open(const std::string& url) {
  auto endpoint = ParseMySqlUrl(url);
  if (!endpoint) return std::move(endpoint).error();
  InitLibrary();
  std::unique_ptr<MySqlStore> store(new MySqlStore(std::move(*endpoint)));
  auto connection = Connection::Open(store->endpoint_);
  if (!connection) return std::move(connection).error();
  store->connection_ = std::move(*connection);
  return store;
}

template <typename Body>
auto MySqlStore::Run(const Body& body) {
  using R = std::invoke_result_t<const Body&, Connection&>;
  const bool reused = connection_ != nullptr;
  bool reconnected = false;
  int deadlocks = 0;
  for (;;) {
    if (!connection_) {
      auto opened = Connection::Open(endpoint_);
      if (!opened) return R(std::move(opened).error());
      connection_ = std::move(*opened);
    }
    connection_->ClearDeadlock();
    R result = body(*connection_);
    // A deadlock victim's transaction was rolled back whole: running the body again is as if it
    // ran once. Two writers of the same orders (a redelivery racing its original) can deadlock on
    // the unique keys' locks; one of them trying again is the normal way out.
    if (!result.ok() && connection_->deadlocked() && ++deadlocks < kDeadlockAttempts) continue;
    if (!connection_->broken()) return result;
    connection_.reset();
    // A connection opened by an earlier call may have died since (a server restart): if this call
    // found it broken with nothing done (kUnavailable, not kUnknownOutcome), once more on a fresh
    // one. A fresh connection that breaks is reported: the server is not well right now.
    const bool retry =
        reused && !reconnected && !result.ok() && result.error().code == ErrorCode::kUnavailable;
    if (!retry) return result;
    reconnected = true;
    spdlog::info("{}; reconnecting", result.error().ToString());
  }
}

base::Status MySqlStore::Migrate() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> base::Status {
    Statement take(conn, fmt::format("SELECT GET_LOCK({}, ?)", kMigrationLock),
                   "take the migration lock");
    if (auto run = take.Execute({kMigrationLockTimeoutS}); !run) return run;
    if (take.rows().empty() || take.rows()[0].IsNull(0)) {
      return MakeError(ErrorCode::kInternal, "mysql GET_LOCK on {} failed", Describe());
    }
    if (take.rows()[0].Int(0) != 1) {
      return MakeError(ErrorCode::kUnavailable,
                       "mysql migrate {}: another migration held the lock for {} s", Describe(),
                       kMigrationLockTimeoutS);
    }
    // Released with the connection too, should this one break.
    struct Release {
      Connection& conn;
      ~Release() {
        if (!conn.broken()) {
          (void)conn.Exec(fmt::format("DO RELEASE_LOCK({})", kMigrationLock), "release lock");
        }
      }
    } release{conn};

    if (auto status = conn.Exec(kCreateSchemaMigrations, "create schema_migrations"); !status) {
      return status;
    }
    Statement check(conn, "SELECT 1 FROM schema_migrations WHERE version = ?",
                    "read schema_migrations");
    Statement record(conn,
                     "INSERT INTO schema_migrations (version, applied_ms) VALUES (?, "
                     "CAST(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000 AS SIGNED))",
                     "record migration");
    for (size_t i = 0; i < kMigrations.size(); ++i) {
      const auto version = static_cast<int64_t>(i + 1);
      if (auto run = check.Execute({version}); !run) return run;
      if (!check.rows().empty()) continue;
      for (std::string_view statement : kMigrations[i]) {
        if (auto status = conn.Exec(statement, fmt::format("migration {}", version)); !status) {
          return status;
        }
      }
      if (auto run = record.Execute({version}); !run) return run;
    }
    return {};
  });
}

Result<int> MySqlStore::SchemaVersion() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<int> {
    Statement query(conn, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                    "read schema version");
    if (auto run = query.Execute({}); !run) return run.error();
    return static_cast<int>(query.rows().at(0).Int(0));
  });
}

base::Status MySqlStore::Ping() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> base::Status {
    if (mysql_ping(conn.get()) != 0) return conn.FailFromHandle("ping");
    return {};
  });
}

Result<std::vector<ActivityRecord>> MySqlStore::ListActivities() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<ActivityRecord>> {
    Statement query(conn, std::string(kSelectActivity) + " ORDER BY created_ms, id",
                    "list activities");
    if (auto run = query.Execute({}); !run) return run.error();
    std::vector<ActivityRecord> records;
    records.reserve(query.rows().size());
    for (const Row& row : query.rows()) records.push_back(ReadActivity(row));
    return records;
  });
}

Result<ActivityRecord> MySqlStore::GetActivity(std::string_view id, bool with_items) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) { return GetActivityOn(conn, id, with_items, false); });
}

Result<ActivityRecord> MySqlStore::CreateActivity(const core::SeckillActivity& a, int64_t now_ms) {
  if (auto valid = core::Validate(a); !valid) return valid.error();
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<ActivityRecord> {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    Statement insert(conn,
                     "INSERT INTO activities (id, title, kind, start_ms, end_ms, per_user_limit, "
                     "open, total_units, user_rate, user_burst, address_rate, address_burst, "
                     "version, created_ms, updated_ms, lottery, payment_window_ms) VALUES (?, ?, "
                     "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)",
                     "create activity");
    const std::string lottery = EncodeLottery(a.lottery);
    auto run = insert.Execute({a.id, a.title, core::ToString(a.kind), a.start_ms, a.end_ms,
                               a.per_user_limit, int64_t{a.open}, a.InitialUnits(),
                               a.user_rate.per_second, a.user_rate.burst, a.address_rate.per_second,
                               a.address_rate.burst, now_ms, now_ms, lottery, a.payment_window_ms});
    if (!run) {
      if (run.error().code == ErrorCode::kAlreadyExists) {
        return MakeError(ErrorCode::kAlreadyExists, "activity '{}' exists already", a.id);
      }
      return run.error();
    }
    if (auto items = InsertItems(conn, a.id, a.items, now_ms); !items) return items.error();
    // Read inside the transaction: once COMMIT succeeds there is nothing left that could fail.
    auto record = GetActivityOn(conn, a.id, true, false);
    if (!record) return record;
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return record;
  });
}

Result<ActivityRecord> MySqlStore::UpdateActivity(std::string_view id, const ActivityUpdate& update,
                                                  int64_t now_ms) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<ActivityRecord> {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    auto current = GetActivityOn(conn, id, false, true);
    if (!current) return current;
    core::SeckillActivity a = current->activity;
    if (update.title) a.title = *update.title;
    if (update.start_ms) a.start_ms = *update.start_ms;
    if (update.end_ms) a.end_ms = *update.end_ms;
    if (update.per_user_limit) a.per_user_limit = *update.per_user_limit;
    if (update.open) a.open = *update.open;
    if (update.user_rate) a.user_rate = *update.user_rate;
    if (update.address_rate) a.address_rate = *update.address_rate;
    if (update.payment_window_ms) a.payment_window_ms = *update.payment_window_ms;
    a.items.clear();
    if (auto valid = core::Validate(a); !valid) return valid.error();
    Statement write(
        conn,
        "UPDATE activities SET title = ?, start_ms = ?, end_ms = ?, per_user_limit = "
        "?, open = ?, user_rate = ?, user_burst = ?, address_rate = ?, address_burst "
        "= ?, payment_window_ms = ?, version = version + 1, updated_ms = ? WHERE id = ?",
        "update activity");
    if (auto run =
            write.Execute({a.title, a.start_ms, a.end_ms, a.per_user_limit, int64_t{a.open},
                           a.user_rate.per_second, a.user_rate.burst, a.address_rate.per_second,
                           a.address_rate.burst, a.payment_window_ms, now_ms, id});
        !run) {
      return run.error();
    }
    auto record = GetActivityOn(conn, id, false, false);
    if (!record) return record;
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return record;
  });
}

Result<ActivityRecord> MySqlStore::AddStock(std::string_view id, int64_t units,
                                            std::span<const std::string> items, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<ActivityRecord> {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    auto current = GetActivityOn(conn, id, false, true);
    if (!current) return current;
    const bool itemised = current->activity.kind == core::StockKind::kItemised;
    if (units < 1 || (itemised && static_cast<int64_t>(items.size()) != units) ||
        (!itemised && !items.empty())) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          "add {} units to '{}': must be >= 1, and item ids exactly for itemised stock", units, id);
    }
    if (current->total_units + units > core::kMaxUnits) {
      return MakeError(ErrorCode::kInvalidArgument, "'{}' would hold over {} units", id,
                       core::kMaxUnits);
    }
    if (itemised) {
      core::SeckillActivity check = current->activity;
      check.items.assign(items.begin(), items.end());
      if (auto valid = core::Validate(check); !valid) return valid.error();
      if (auto inserted = InsertItems(conn, id, items, now_ms); !inserted) {
        return inserted.error();
      }
    }
    Statement write(conn,
                    "UPDATE activities SET total_units = total_units + ?, version = version + 1, "
                    "updated_ms = ? WHERE id = ?",
                    "add stock");
    if (auto run = write.Execute({units, now_ms, id}); !run) return run.error();
    auto record = GetActivityOn(conn, id, false, false);
    if (!record) return record;
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return record;
  });
}

Result<std::vector<InsertOutcome>> MySqlStore::InsertOrders(std::span<const OrderRecord> orders,
                                                            int64_t now_ms,
                                                            std::optional<int64_t> fence) {
  for (const OrderRecord& order : orders) {
    if (auto valid = ValidateOrder(order); !valid) return valid.error();
  }
  // Inside the transaction, a shared lock on the fence row: AdvanceFence's update waits for
  // this transaction, and once it committed, this check sees the new epoch.
  const auto check_fence = [&](Connection& conn) -> base::Status {
    if (!fence) return {};
    Statement read(conn, "SELECT epoch FROM fence WHERE id = 1 LOCK IN SHARE MODE", "read fence");
    if (auto run = read.Execute(std::span<const Param>()); !run) return run.error();
    const int64_t epoch = read.rows().empty() ? 0 : read.rows()[0].Int(0);
    if (epoch != *fence) {
      return MakeError(ErrorCode::kCancelled,
                       "fenced: the batch was read under epoch {}, the record is at {}", *fence,
                       epoch);
    }
    return {};
  };
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<InsertOutcome>> {
    {
      Transaction tx(conn);
      if (!tx.status()) return tx.status().error();
      if (auto fenced = check_fence(conn); !fenced) return fenced.error();
      auto batched = InsertBatched(conn, orders, now_ms);
      if (!batched) return std::move(batched).error();
      if (*batched) {
        if (auto commit = tx.Commit(); !commit) return commit.error();
        return std::move(**batched);
      }
      // Not clean: rolled back whole, locks and all (a failed rollback must not be followed by
      // START TRANSACTION, which would commit what it failed to undo), and done row by row.
      if (auto rolled = conn.Exec("ROLLBACK", "rollback"); !rolled) return rolled.error();
    }
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    if (auto fenced = check_fence(conn); !fenced) return fenced.error();
    auto outcomes = InsertOneByOne(conn, orders, now_ms);
    if (!outcomes) return outcomes;
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return outcomes;
  });
}

Result<int64_t> MySqlStore::AdvanceFence() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<int64_t> {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    if (auto run = conn.Exec("UPDATE fence SET epoch = epoch + 1 WHERE id = 1", "advance fence");
        !run) {
      return run.error();
    }
    Statement read(conn, "SELECT epoch FROM fence WHERE id = 1", "read fence");
    if (auto run = read.Execute(std::span<const Param>()); !run) return run.error();
    if (read.rows().empty()) return MakeError(ErrorCode::kInternal, "no fence row");
    const int64_t epoch = read.rows()[0].Int(0);
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return epoch;
  });
}

base::Status MySqlStore::FlagCompensation(std::span<const std::string> order_ids) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> base::Status {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    Statement flag(conn, "UPDATE orders SET compensation_due = 1 WHERE order_id = ?",
                   "flag compensation");
    for (const auto& id : order_ids) {
      if (auto run = flag.Execute({id}); !run) return run.error();
    }
    return tx.Commit();
  });
}

Result<OrderRecord> MySqlStore::GetOrder(std::string_view order_id) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<OrderRecord> {
    Statement query(conn, std::string(kSelectOrder) + " WHERE order_id = ?", "get order");
    if (auto run = query.Execute({order_id}); !run) return run.error();
    if (query.rows().empty()) return MakeError(ErrorCode::kNotFound, "no order '{}'", order_id);
    return ReadOrder(query.rows().front());
  });
}

Result<std::vector<OrderRecord>> MySqlStore::OrdersOfUser(std::string_view user_id, int64_t limit) {
  // As SQLite's LIMIT: a negative limit is no limit.
  const int64_t bounded = limit < 0 ? std::numeric_limits<int64_t>::max() : limit;
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<OrderRecord>> {
    Statement query(conn,
                    std::string(kSelectOrder) +
                        " WHERE user_id = ? ORDER BY created_ms DESC, order_id DESC LIMIT ?",
                    "orders of user");
    if (auto run = query.Execute({user_id, bounded}); !run) return run.error();
    std::vector<OrderRecord> orders;
    orders.reserve(query.rows().size());
    for (const Row& row : query.rows()) orders.push_back(ReadOrder(row));
    return orders;
  });
}

Result<std::vector<OrderRecord>> MySqlStore::CancelUnpaid(std::string_view activity_id,
                                                          int64_t created_before_ms, int64_t limit,
                                                          int64_t now_ms) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<OrderRecord>> {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    // Locked until the transaction ends: a payment racing with the expiry waits for it.
    Statement query(conn,
                    std::string(kSelectOrder) +
                        " WHERE activity_id = ? AND state = 'reserved' AND created_ms < ? ORDER "
                        "BY created_ms, order_id LIMIT ? FOR UPDATE",
                    "unpaid orders");
    if (auto run = query.Execute({activity_id, created_before_ms, limit}); !run) {
      return run.error();
    }
    std::vector<OrderRecord> cancelled;
    for (const Row& row : query.rows()) cancelled.push_back(ReadOrder(row));
    Statement cancel(conn,
                     "UPDATE orders SET state = 'cancelled', state_ms = ? WHERE order_id = ? AND "
                     "state = 'reserved'",
                     "cancel order");
    for (OrderRecord& order : cancelled) {
      if (auto run = cancel.Execute({now_ms, order.order_id}); !run) return run.error();
      order.state = OrderState::kCancelled;
      order.state_ms = now_ms;
    }
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return cancelled;
  });
}

Result<PayOutcome> MySqlStore::PayOrder(std::string_view order_id, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<PayOutcome> {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    Statement query(conn, "SELECT state FROM orders WHERE order_id = ? FOR UPDATE", "read order");
    if (auto run = query.Execute({order_id}); !run) return run.error();
    if (query.rows().empty()) return MakeError(ErrorCode::kNotFound, "no order '{}'", order_id);
    const OrderState state = OrderStateFrom(query.rows()[0].Text(0));
    PayOutcome outcome = PayOutcome::kAlreadyPaid;
    if (state == OrderState::kReserved) {
      Statement pay(conn, "UPDATE orders SET state = 'paid', state_ms = ? WHERE order_id = ?",
                    "pay order");
      if (auto run = pay.Execute({now_ms, order_id}); !run) return run.error();
      outcome = PayOutcome::kPaid;
    } else if (state == OrderState::kCancelled) {
      Statement flag(conn, "UPDATE orders SET refund_due = 1 WHERE order_id = ?", "flag refund");
      if (auto run = flag.Execute({order_id}); !run) return run.error();
      outcome = PayOutcome::kRefused;
    }
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return outcome;
  });
}

Result<std::vector<OrderRecord>> MySqlStore::OrdersOfActivity(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<OrderRecord>> {
    Statement query(
        conn, std::string(kSelectOrder) + " WHERE activity_id = ? ORDER BY created_ms, order_id",
        "orders of activity");
    if (auto run = query.Execute({activity_id}); !run) return run.error();
    std::vector<OrderRecord> orders;
    orders.reserve(query.rows().size());
    for (const Row& row : query.rows()) orders.push_back(ReadOrder(row));
    return orders;
  });
}

Result<OrderCounts> MySqlStore::CountOrders(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<OrderCounts> {
    Statement query(conn,
                    "SELECT COUNT(*), CAST(COALESCE(SUM(CASE WHEN state <> 'cancelled' THEN "
                    "quantity END), 0) AS SIGNED), CAST(COALESCE(SUM(CASE WHEN state = "
                    "'cancelled' THEN quantity END), 0) AS SIGNED) FROM orders WHERE activity_id "
                    "= ?",
                    "count orders");
    if (auto run = query.Execute({activity_id}); !run) return run.error();
    const Row& row = query.rows().at(0);
    return OrderCounts{row.Int(0), row.Int(1), row.Int(2)};
  });
}

Result<OrderAudit> MySqlStore::AuditOrders(std::string_view activity_id, int64_t per_user_limit) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<OrderAudit> {
    OrderAudit audit;
    Statement over(conn, std::string(kUsersOverLimit), "audit orders");
    if (auto run = over.Execute({activity_id, per_user_limit}); !run) return run.error();
    for (const Row& row : over.rows()) audit.users_over_limit.emplace_back(row.Text(0), row.Int(1));
    Statement duplicates(conn, std::string(kDuplicateIntents), "audit orders");
    if (auto run = duplicates.Execute({activity_id}); !run) return run.error();
    audit.duplicate_intents = duplicates.rows().at(0).Int(0);
    return audit;
  });
}

}  // namespace flashsale::store
