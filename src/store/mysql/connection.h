#pragma once
// The MariaDB Connector/C driver of MySqlStore: one connection, its prepared statements and its
// transactions, with every server error classified into the error codes of base/result.h.
//
// Every wait is bounded: connect 5 s, each read and write 30 s, a row lock 10 s. The connection is
// not reconnected behind a caller's back (MYSQL_OPT_RECONNECT is off): an error that leaves it
// unusable marks it broken(), and its owner drops it.

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "store/mysql/url.h"
#include "store/records.h"

typedef struct st_mysql MYSQL;
typedef struct st_mysql_stmt MYSQL_STMT;
typedef struct st_mysql_res MYSQL_RES;

namespace flashsale::store::mysql {

using Param = records::SqlValue;

// Calls mysql_library_init once, thread-safely (mysql_init() would do it on first use, but not
// thread-safely). Call before the first Connection::Open.
void InitLibrary();

// One row of a result, copied out of the statement's buffers.
class Row {
 public:
  bool IsNull(size_t column) const { return cells_[column].null; }
  int64_t Int(size_t column) const;  // DECIMAL (sent as text) and DOUBLE are converted
  double Double(size_t column) const;
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
  // Connects and sets up the session (strict mode, READ COMMITTED, the lock wait timeout).
  // kUnavailable if the server cannot be reached or refuses the account or database.
  static base::Result<std::unique_ptr<Connection>> Open(const MySqlEndpoint& endpoint);

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  MYSQL* get() { return mysql_; }
  // A connection-level or client error was seen: the connection must not be used again.
  bool broken() const { return broken_; }
  // The server chose this connection's transaction as a deadlock victim and rolled all of it back.
  bool deadlocked() const { return deadlocked_; }
  void ClearDeadlock() { deadlocked_ = false; }

  // The error for a failed call, classified; marks the connection broken when it is.
  base::Error Fail(std::string_view what, unsigned code, std::string_view message);
  base::Error FailFromHandle(std::string_view what);

  // A round trip (mysql_ping), without reconnecting.
  base::Status Ping();

  // A statement without parameters whose result, if any, is discarded (transactions, DDL, SET).
  base::Status Exec(std::string_view sql, std::string_view what);

  // The rows of a statement without parameters, as text (SHOW WARNINGS). NULL reads as "".
  base::Result<std::vector<std::vector<std::string>>> TextRows(std::string_view sql,
                                                               std::string_view what);

 private:
  Connection(MYSQL* mysql, std::string where) : mysql_(mysql), where_(std::move(where)) {}
  // On a Galera node: reads see what the other nodes committed before them (connection.cc).
  base::Status ReadCausallyOnGalera();

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
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Runs the statement with these parameters; a result set is read in full into rows().
  base::Status Execute(std::initializer_list<Param> params) {
    return Execute(std::span<const Param>(params.begin(), params.size()));
  }
  base::Status Execute(std::span<const Param> params);

  const std::vector<Row>& rows() const { return rows_; }
  uint64_t affected_rows() const { return affected_rows_; }
  unsigned warnings() const { return warnings_; }

 private:
  base::Status Prepare();
  base::Status ReadRows(MYSQL_RES* meta);
  base::Error StmtError();

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
  explicit Transaction(Connection& conn);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  const base::Status& status() const { return status_; }

  // A connection lost while COMMIT was in flight leaves the outcome unknown: kUnknownOutcome.
  base::Status Commit();

 private:
  Connection& conn_;
  base::Status status_;
  bool done_ = false;
};

// A MySQL warning or error code that names a duplicate key.
bool IsDuplicateKey(unsigned code);

}  // namespace flashsale::store::mysql
