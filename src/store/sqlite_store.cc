#include "store/sqlite_store.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <array>

#include "base/strings.h"
#include "store/audit_sql.h"

namespace flashsale::store {

using base::Error;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr int kBusyTimeoutMs = 5000;

// Versioned migrations: step i brings the schema from version i to i + 1. Append only.
constexpr std::array<std::string_view, 4> kMigrations = {
    R"sql(
CREATE TABLE activities (
  id              TEXT PRIMARY KEY,
  title           TEXT NOT NULL DEFAULT '',
  kind            TEXT NOT NULL CHECK (kind IN ('counted', 'items')),
  start_ms        INTEGER NOT NULL,
  end_ms          INTEGER NOT NULL,
  per_user_limit  INTEGER NOT NULL,
  open            INTEGER NOT NULL,
  total_units     INTEGER NOT NULL,
  user_rate       REAL NOT NULL DEFAULT 0,
  user_burst      INTEGER NOT NULL DEFAULT 1,
  address_rate    REAL NOT NULL DEFAULT 0,
  address_burst   INTEGER NOT NULL DEFAULT 1,
  version         INTEGER NOT NULL,
  created_ms      INTEGER NOT NULL,
  updated_ms      INTEGER NOT NULL
);
CREATE TABLE activity_items (
  activity_id     TEXT NOT NULL REFERENCES activities(id),
  item_id         TEXT NOT NULL,
  added_ms        INTEGER NOT NULL,
  PRIMARY KEY (activity_id, item_id)
);
)sql",
    R"sql(
CREATE TABLE orders (
  order_id        TEXT PRIMARY KEY,
  activity_id     TEXT NOT NULL,
  user_id         TEXT NOT NULL,
  quantity        INTEGER NOT NULL,
  items           TEXT NOT NULL DEFAULT '',
  state           TEXT NOT NULL CHECK (state IN ('reserved', 'paid', 'cancelled')),
  single_unit     INTEGER NOT NULL,
  created_ms      INTEGER NOT NULL,
  persisted_ms    INTEGER NOT NULL,
  stream_id       TEXT NOT NULL
);
CREATE UNIQUE INDEX orders_one_live_per_user ON orders (activity_id, user_id)
  WHERE single_unit = 1 AND state <> 'cancelled';
CREATE INDEX orders_by_user ON orders (user_id, created_ms);
CREATE INDEX orders_by_activity ON orders (activity_id, state);
)sql",
    // Lotteries: the definition (JSON, store.h EncodeLottery) and one win per user and draw;
    // payment windows: orders expire, payments after expiry are flagged for a refund.
    R"sql(
ALTER TABLE activities ADD COLUMN lottery TEXT NOT NULL DEFAULT '';
ALTER TABLE activities ADD COLUMN payment_window_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN draw_no INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN state_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN refund_due INTEGER NOT NULL DEFAULT 0;
CREATE INDEX orders_unpaid ON orders (activity_id, state, created_ms);
CREATE UNIQUE INDEX orders_one_per_draw ON orders (activity_id, user_id, draw_no)
  WHERE draw_no > 0;
)sql",
    // The fence advanced by the lost-write repair after a Redis restart or failover (order
    // batches read before it are refused), and orders owed a compensation (sold twice).
    R"sql(
CREATE TABLE fence (
  id              INTEGER PRIMARY KEY CHECK (id = 1),
  epoch           INTEGER NOT NULL
);
INSERT INTO fence (id, epoch) VALUES (1, 0);
ALTER TABLE orders ADD COLUMN compensation_due INTEGER NOT NULL DEFAULT 0;
)sql",
};

ErrorCode CodeFor(int rc) {
  switch (rc & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
      return ErrorCode::kUnavailable;
    case SQLITE_CONSTRAINT:
      return ErrorCode::kAlreadyExists;
    default:
      return ErrorCode::kInternal;
  }
}

Error SqliteError(sqlite3* db, int rc, std::string_view what) {
  return MakeError(CodeFor(rc), "sqlite {}: {}", what,
                   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

// A prepared statement; finalized on destruction.
class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(std::string_view text) {
    Check(sqlite3_bind_text(stmt_, ++index_, text.data(), static_cast<int>(text.size()),
                            SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& Bind(int64_t value) {
    Check(sqlite3_bind_int64(stmt_, ++index_, value));
    return *this;
  }
  Stmt& Bind(double value) {
    Check(sqlite3_bind_double(stmt_, ++index_, value));
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE, or an error (kept in the status).
  Result<bool> Step(std::string_view what) {
    if (rc_ != SQLITE_OK) return SqliteError(db_, rc_, what);
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, rc, what);
  }
  base::Status Run(std::string_view what) {
    auto step = Step(what);
    if (!step.ok()) return std::move(step).error();
    return {};
  }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    index_ = 0;
  }

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) const { return sqlite3_column_double(stmt_, column); }
  std::string Text(int column) const {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    return text ? std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
                : std::string();
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && rc_ == SQLITE_OK) rc_ = rc;
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
  int index_ = 0;
};

base::Status Exec(sqlite3* db, std::string_view sql, std::string_view what) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db, std::string(sql).c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return {};
  Error error = MakeError(CodeFor(rc), "sqlite {}: {}", what, message ? message : "");
  sqlite3_free(message);
  return error;
}

// BEGIN IMMEDIATE ... COMMIT; rolls back unless committed.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { status_ = Exec(db, "BEGIN IMMEDIATE", "begin"); }
  ~Transaction() {
    if (status_.ok() && !done_) {
      // A failed rollback leaves SQLite to roll back when the connection closes; say so.
      if (auto rolled = Exec(db_, "ROLLBACK", "rollback"); !rolled) {
        spdlog::warn("{}", rolled.error().ToString());
      }
    }
  }
  const base::Status& status() const { return status_; }
  base::Status Commit() {
    done_ = true;
    return Exec(db_, "COMMIT", "commit");
  }

 private:
  sqlite3* db_;
  base::Status status_;
  bool done_ = false;
};

constexpr std::string_view kSelectActivity =
    "SELECT id, title, kind, start_ms, end_ms, per_user_limit, open, total_units, user_rate, "
    "user_burst, address_rate, address_burst, version, created_ms, updated_ms, lottery, "
    "payment_window_ms FROM activities";

ActivityRecord ReadActivity(const Stmt& row) {
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

base::Status InsertItems(sqlite3* db, std::string_view activity_id,
                         std::span<const std::string> items, int64_t now_ms) {
  Stmt insert(db, "INSERT INTO activity_items (activity_id, item_id, added_ms) VALUES (?, ?, ?)");
  for (const auto& item : items) {
    insert.Reset();
    if (auto run = insert.Bind(activity_id).Bind(item).Bind(now_ms).Run("insert item"); !run) {
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

OrderRecord ReadOrder(const Stmt& row) {
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

}  // namespace

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Error error = MakeError(ErrorCode::kUnavailable, "open sqlite database {}: {}", path,
                            db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return error;
  }
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  std::unique_ptr<SqliteStore> store(new SqliteStore(db, path));
  // WAL: readers do not block the writer; NORMAL sync is durable across process crashes (a power
  // loss may lose the last transactions, which the order stream still holds).
  for (std::string_view pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"}) {
    if (auto status = Exec(db, pragma, pragma); !status) return std::move(status).error();
  }
  return store;
}

SqliteStore::~SqliteStore() { sqlite3_close(db_); }

base::Status SqliteStore::Migrate() {
  std::lock_guard lock(mutex_);
  if (auto status = Exec(db_,
                         "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY "
                         "KEY, applied_ms INTEGER NOT NULL)",
                         "create schema_migrations");
      !status) {
    return status;
  }
  for (size_t i = 0; i < kMigrations.size(); ++i) {
    const auto version = static_cast<int64_t>(i + 1);
    Transaction tx(db_);
    if (!tx.status()) return tx.status();
    Stmt check(db_, "SELECT 1 FROM schema_migrations WHERE version = ?");
    auto applied = check.Bind(version).Step("read schema_migrations");
    if (!applied) return std::move(applied).error();
    if (*applied) continue;
    if (auto status = Exec(db_, kMigrations[i], fmt::format("migration {}", version)); !status) {
      return status;
    }
    Stmt record(db_,
                "INSERT INTO schema_migrations (version, applied_ms) VALUES (?, "
                "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))");
    if (auto status = record.Bind(version).Run("record migration"); !status) return status;
    if (auto status = tx.Commit(); !status) return status;
  }
  return {};
}

Result<int> SqliteStore::SchemaVersion() {
  std::lock_guard lock(mutex_);
  Stmt query(db_, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  auto row = query.Step("read schema version");
  if (!row) return std::move(row).error();
  return static_cast<int>(query.Int(0));
}

base::Status SqliteStore::Ping() {
  std::lock_guard lock(mutex_);
  Stmt query(db_, "SELECT 1");
  auto row = query.Step("ping");
  if (!row) return std::move(row).error();
  return {};
}

Result<std::vector<ActivityRecord>> SqliteStore::ListActivities() {
  std::lock_guard lock(mutex_);
  Stmt query(db_, std::string(kSelectActivity) + " ORDER BY created_ms, id");
  std::vector<ActivityRecord> records;
  for (;;) {
    auto row = query.Step("list activities");
    if (!row) return std::move(row).error();
    if (!*row) break;
    records.push_back(ReadActivity(query));
  }
  return records;
}

Result<ActivityRecord> SqliteStore::GetActivity(std::string_view id, bool with_items) {
  std::lock_guard lock(mutex_);
  return GetLocked(id, with_items);
}

Result<ActivityRecord> SqliteStore::GetLocked(std::string_view id, bool with_items) {
  Stmt query(db_, std::string(kSelectActivity) + " WHERE id = ?");
  auto row = query.Bind(id).Step("get activity");
  if (!row) return std::move(row).error();
  if (!*row) return MakeError(ErrorCode::kNotFound, "no activity '{}'", id);
  ActivityRecord record = ReadActivity(query);
  if (with_items && record.activity.kind == core::StockKind::kItemised) {
    Stmt items(db_,
               "SELECT item_id FROM activity_items WHERE activity_id = ? ORDER BY added_ms, "
               "rowid");
    items.Bind(id);
    for (;;) {
      auto item = items.Step("get items");
      if (!item) return std::move(item).error();
      if (!*item) break;
      record.activity.items.push_back(items.Text(0));
    }
  }
  return record;
}

Result<ActivityRecord> SqliteStore::CreateActivity(const core::SeckillActivity& a, int64_t now_ms) {
  if (auto valid = core::Validate(a); !valid) return valid.error();
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  Stmt insert(db_,
              "INSERT INTO activities (id, title, kind, start_ms, end_ms, per_user_limit, open, "
              "total_units, user_rate, user_burst, address_rate, address_burst, version, "
              "created_ms, updated_ms, lottery, payment_window_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
              "?, ?, ?, ?, 1, ?, ?, ?, ?)");
  insert.Bind(a.id)
      .Bind(a.title)
      .Bind(core::ToString(a.kind))
      .Bind(a.start_ms)
      .Bind(a.end_ms)
      .Bind(a.per_user_limit)
      .Bind(int64_t{a.open})
      .Bind(a.InitialUnits())
      .Bind(a.user_rate.per_second)
      .Bind(a.user_rate.burst)
      .Bind(a.address_rate.per_second)
      .Bind(a.address_rate.burst)
      .Bind(now_ms)
      .Bind(now_ms)
      .Bind(EncodeLottery(a.lottery))
      .Bind(a.payment_window_ms);
  if (auto run = insert.Run("create activity"); !run) {
    if (run.error().code == ErrorCode::kAlreadyExists) {
      return MakeError(ErrorCode::kAlreadyExists, "activity '{}' exists already", a.id);
    }
    return run.error();
  }
  if (auto items = InsertItems(db_, a.id, a.items, now_ms); !items) return items.error();
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return GetLocked(a.id, true);
}

Result<ActivityRecord> SqliteStore::UpdateActivity(std::string_view id,
                                                   const ActivityUpdate& update, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  auto current = GetLocked(id, false);
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
  Stmt write(db_,
             "UPDATE activities SET title = ?, start_ms = ?, end_ms = ?, per_user_limit = ?, "
             "open = ?, user_rate = ?, user_burst = ?, address_rate = ?, address_burst = ?, "
             "payment_window_ms = ?, version = version + 1, updated_ms = ? WHERE id = ?");
  write.Bind(a.title)
      .Bind(a.start_ms)
      .Bind(a.end_ms)
      .Bind(a.per_user_limit)
      .Bind(int64_t{a.open})
      .Bind(a.user_rate.per_second)
      .Bind(a.user_rate.burst)
      .Bind(a.address_rate.per_second)
      .Bind(a.address_rate.burst)
      .Bind(a.payment_window_ms)
      .Bind(now_ms)
      .Bind(id);
  if (auto run = write.Run("update activity"); !run) return run.error();
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return GetLocked(id, false);
}

Result<ActivityRecord> SqliteStore::AddStock(std::string_view id, int64_t units,
                                             std::span<const std::string> items, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  auto current = GetLocked(id, false);
  if (!current) return current;
  const bool itemised = current->activity.kind == core::StockKind::kItemised;
  if (units < 1 || (itemised && static_cast<int64_t>(items.size()) != units) ||
      (!itemised && !items.empty())) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "add {} units to '{}': must be >= 1, and item ids exactly for itemised stock",
                     units, id);
  }
  if (current->total_units + units > core::kMaxUnits) {
    return MakeError(ErrorCode::kInvalidArgument, "'{}' would hold over {} units", id,
                     core::kMaxUnits);
  }
  if (itemised) {
    core::SeckillActivity check = current->activity;
    check.items.assign(items.begin(), items.end());
    if (auto valid = core::Validate(check); !valid) return valid.error();
    if (auto inserted = InsertItems(db_, id, items, now_ms); !inserted) return inserted.error();
  }
  Stmt write(db_,
             "UPDATE activities SET total_units = total_units + ?, version = version + 1, "
             "updated_ms = ? WHERE id = ?");
  if (auto run = write.Bind(units).Bind(now_ms).Bind(id).Run("add stock"); !run) {
    return run.error();
  }
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return GetLocked(id, false);
}

Result<std::vector<InsertOutcome>> SqliteStore::InsertOrders(std::span<const OrderRecord> orders,
                                                             int64_t now_ms,
                                                             std::optional<int64_t> fence) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  if (fence) {
    Stmt read(db_, "SELECT epoch FROM fence WHERE id = 1");
    auto row = read.Step("read fence");
    if (!row) return std::move(row).error();
    const int64_t epoch = *row ? read.Int(0) : 0;
    if (epoch != *fence) {
      return MakeError(ErrorCode::kCancelled,
                       "fenced: the batch was read under epoch {}, the record is at {}", *fence,
                       epoch);
    }
  }
  Stmt exists(db_, "SELECT 1 FROM orders WHERE order_id = ?");
  Stmt insert(db_,
              "INSERT INTO orders (order_id, activity_id, user_id, quantity, items, state, "
              "single_unit, created_ms, persisted_ms, stream_id, draw_no) VALUES (?, ?, ?, ?, ?, "
              "?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
  std::vector<InsertOutcome> outcomes;
  outcomes.reserve(orders.size());
  for (const OrderRecord& order : orders) {
    exists.Reset();
    auto found = exists.Bind(order.order_id).Step("check order");
    if (!found) return std::move(found).error();
    if (*found) {
      outcomes.push_back(InsertOutcome::kDuplicate);
      continue;
    }
    insert.Reset();
    insert.Bind(order.order_id)
        .Bind(order.activity_id)
        .Bind(order.user_id)
        .Bind(order.quantity)
        .Bind(base::JoinWords(order.items))
        .Bind(ToString(order.state))
        .Bind(int64_t{order.single_unit})
        .Bind(order.created_ms)
        .Bind(now_ms)
        .Bind(order.stream_id)
        .Bind(order.draw_no);
    if (auto run = insert.Run("insert order"); !run) return run.error();
    // Not inserted although no order has this id: the one-live-order-per-user key (or the
    // one-win-per-draw key) refused it.
    outcomes.push_back(sqlite3_changes(db_) == 1 ? InsertOutcome::kInserted
                                                 : InsertOutcome::kConflict);
  }
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return outcomes;
}

Result<int64_t> SqliteStore::AdvanceFence() {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  Stmt bump(db_, "UPDATE fence SET epoch = epoch + 1 WHERE id = 1");
  if (auto run = bump.Run("advance fence"); !run) return run.error();
  Stmt read(db_, "SELECT epoch FROM fence WHERE id = 1");
  auto row = read.Step("read fence");
  if (!row) return std::move(row).error();
  if (!*row) return MakeError(ErrorCode::kInternal, "no fence row");
  const int64_t epoch = read.Int(0);
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return epoch;
}

base::Status SqliteStore::FlagCompensation(std::span<const std::string> order_ids) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  Stmt flag(db_, "UPDATE orders SET compensation_due = 1 WHERE order_id = ?");
  for (const auto& id : order_ids) {
    flag.Reset();
    if (auto run = flag.Bind(id).Run("flag compensation"); !run) return run.error();
  }
  return tx.Commit();
}

Result<OrderRecord> SqliteStore::GetOrder(std::string_view order_id) {
  std::lock_guard lock(mutex_);
  Stmt query(db_, std::string(kSelectOrder) + " WHERE order_id = ?");
  auto row = query.Bind(order_id).Step("get order");
  if (!row) return std::move(row).error();
  if (!*row) return MakeError(ErrorCode::kNotFound, "no order '{}'", order_id);
  return ReadOrder(query);
}

Result<std::vector<OrderRecord>> SqliteStore::OrdersOfUser(std::string_view user_id,
                                                           int64_t limit) {
  std::lock_guard lock(mutex_);
  Stmt query(db_, std::string(kSelectOrder) +
                      " WHERE user_id = ? ORDER BY created_ms DESC, order_id DESC LIMIT ?");
  query.Bind(user_id).Bind(limit);
  std::vector<OrderRecord> orders;
  for (;;) {
    auto row = query.Step("orders of user");
    if (!row) return std::move(row).error();
    if (!*row) break;
    orders.push_back(ReadOrder(query));
  }
  return orders;
}

Result<std::vector<OrderRecord>> SqliteStore::CancelUnpaid(std::string_view activity_id,
                                                           int64_t created_before_ms, int64_t limit,
                                                           int64_t now_ms) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  Stmt query(db_, std::string(kSelectOrder) +
                      " WHERE activity_id = ? AND state = 'reserved' AND created_ms < ? ORDER BY "
                      "created_ms, order_id LIMIT ?");
  query.Bind(activity_id).Bind(created_before_ms).Bind(limit);
  std::vector<OrderRecord> cancelled;
  for (;;) {
    auto row = query.Step("unpaid orders");
    if (!row) return std::move(row).error();
    if (!*row) break;
    cancelled.push_back(ReadOrder(query));
  }
  Stmt cancel(db_,
              "UPDATE orders SET state = 'cancelled', state_ms = ? WHERE order_id = ? AND state = "
              "'reserved'");
  for (OrderRecord& order : cancelled) {
    cancel.Reset();
    if (auto run = cancel.Bind(now_ms).Bind(order.order_id).Run("cancel order"); !run) {
      return run.error();
    }
    order.state = OrderState::kCancelled;
    order.state_ms = now_ms;
  }
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return cancelled;
}

Result<PayOutcome> SqliteStore::PayOrder(std::string_view order_id, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  Stmt query(db_, "SELECT state FROM orders WHERE order_id = ?");
  auto row = query.Bind(order_id).Step("read order");
  if (!row) return std::move(row).error();
  if (!*row) return MakeError(ErrorCode::kNotFound, "no order '{}'", order_id);
  const OrderState state = OrderStateFrom(query.Text(0));
  PayOutcome outcome = PayOutcome::kAlreadyPaid;
  if (state == OrderState::kReserved) {
    Stmt pay(db_, "UPDATE orders SET state = 'paid', state_ms = ? WHERE order_id = ?");
    if (auto run = pay.Bind(now_ms).Bind(order_id).Run("pay order"); !run) return run.error();
    outcome = PayOutcome::kPaid;
  } else if (state == OrderState::kCancelled) {
    Stmt flag(db_, "UPDATE orders SET refund_due = 1 WHERE order_id = ?");
    if (auto run = flag.Bind(order_id).Run("flag refund"); !run) return run.error();
    outcome = PayOutcome::kRefused;
  }
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return outcome;
}

Result<std::vector<OrderRecord>> SqliteStore::OrdersOfActivity(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  Stmt query(db_,
             std::string(kSelectOrder) + " WHERE activity_id = ? ORDER BY created_ms, order_id");
  query.Bind(activity_id);
  std::vector<OrderRecord> orders;
  for (;;) {
    auto row = query.Step("orders of activity");
    if (!row) return std::move(row).error();
    if (!*row) break;
    orders.push_back(ReadOrder(query));
  }
  return orders;
}

Result<OrderCounts> SqliteStore::CountOrders(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  Stmt query(db_,
             "SELECT COUNT(*), COALESCE(SUM(CASE WHEN state <> 'cancelled' THEN quantity END), "
             "0), COALESCE(SUM(CASE WHEN state = 'cancelled' THEN quantity END), 0) FROM orders "
             "WHERE activity_id = ?");
  auto row = query.Bind(activity_id).Step("count orders");
  if (!row) return std::move(row).error();
  return OrderCounts{query.Int(0), query.Int(1), query.Int(2)};
}

Result<OrderAudit> SqliteStore::AuditOrders(std::string_view activity_id, int64_t per_user_limit) {
  std::lock_guard lock(mutex_);
  OrderAudit audit;
  Stmt over(db_, std::string(kUsersOverLimit));
  over.Bind(activity_id).Bind(per_user_limit);
  for (;;) {
    auto row = over.Step("audit orders");
    if (!row) return std::move(row).error();
    if (!*row) break;
    audit.users_over_limit.emplace_back(over.Text(0), over.Int(1));
  }
  Stmt duplicates(db_, std::string(kDuplicateIntents));
  auto row = duplicates.Bind(activity_id).Step("audit orders");
  if (!row) return std::move(row).error();
  audit.duplicate_intents = duplicates.Int(0);
  return audit;
}

}  // namespace flashsale::store
