#include "store/sqlite_store.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <array>

#include "base/strings.h"
#include "store/records.h"

namespace flashsale::store {

using base::Error;
using base::ErrorCode;
using base::MakeError;
using base::Result;
using records::SqlValue;

namespace {

constexpr int kBusyTimeoutMs = 5000;

// Versioned migrations: step i brings the schema from version i to i + 1. Append only.
constexpr std::array<std::string_view, 12> kMigrations = {
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
    // orders_by_activity (activity_id, state) is a prefix of orders_unpaid (activity_id, state,
    // created_ms), which serves every query it served: one B-tree fewer to write per order.
    R"sql(
DROP INDEX IF EXISTS orders_by_activity;
)sql",
    // Each activity's write mark: the highest write sequence (core/write_seq.h) of any order
    // persisted for it, raised by InsertOrders and never lowered (Store::WrittenSeqs).
    R"sql(
CREATE TABLE activity_writes (
  activity_id     TEXT PRIMARY KEY,
  epoch           INTEGER NOT NULL,
  seq             INTEGER NOT NULL
);
)sql",
    // The outbox: one event per change of an order's state, written in the change's transaction
    // (Store::EventsAfter); numbered under the one row of order_event_seq.
    R"sql(
CREATE TABLE order_events (
  seq             INTEGER PRIMARY KEY,
  event_id        TEXT NOT NULL UNIQUE,
  order_id        TEXT NOT NULL,
  activity_id     TEXT NOT NULL,
  state           TEXT NOT NULL,
  at_ms           INTEGER NOT NULL
);
CREATE TABLE order_event_seq (
  id              INTEGER PRIMARY KEY CHECK (id = 1),
  last_seq        INTEGER NOT NULL
);
INSERT INTO order_event_seq (id, last_seq) VALUES (1, 0);
)sql",
    // Webhook deliveries (service/event_relay.h): each receiver's cursor, and the events it
    // parked (kept, listed, retried on demand).
    R"sql(
CREATE TABLE webhook_cursors (
  receiver        TEXT PRIMARY KEY,
  after_seq       INTEGER NOT NULL,
  updated_ms      INTEGER NOT NULL
);
CREATE TABLE webhook_parked (
  receiver        TEXT NOT NULL,
  seq             INTEGER NOT NULL,
  activity_id     TEXT NOT NULL,
  attempts        INTEGER NOT NULL,
  last_error      TEXT NOT NULL,
  parked_ms       INTEGER NOT NULL,
  retry           INTEGER NOT NULL,
  PRIMARY KEY (receiver, seq)
);
)sql",
    // The export (Store::OrdersPage): an activity's orders by order id, a page at a time, read in
    // the index's order (no sort of the activity's orders for each page).
    R"sql(
CREATE INDEX orders_by_activity_id ON orders (activity_id, order_id);
)sql",
    // An activity's own webhook receivers (core::Activity::webhook_urls), one URL a line.
    R"sql(
ALTER TABLE activities ADD COLUMN webhook_urls TEXT NOT NULL DEFAULT '';
)sql",
    // The report's answers (Store::AddAnswers), and its count of refused orders read from an
    // index of the refused events alone (a partial index: the other events cost it nothing).
    R"sql(
CREATE TABLE activity_answers (
  activity_id     TEXT NOT NULL,
  word            TEXT NOT NULL,
  total           INTEGER NOT NULL,
  PRIMARY KEY (activity_id, word)
) WITHOUT ROWID;
CREATE INDEX order_events_refused ON order_events (activity_id) WHERE state = 'refused';
)sql",
    // An activity's waiting room (core::Activity::waiting_room, core::EncodeWaitingRoom); '': none.
    R"sql(
ALTER TABLE activities ADD COLUMN waiting_room TEXT NOT NULL DEFAULT '';
)sql",
};

// Raises an activity's write mark to (epoch, seq) unless it is at that or higher (epoch first,
// then seq). ? activity_id, ? epoch, ? seq.
constexpr std::string_view kRaiseWrittenMark =
    "INSERT INTO activity_writes (activity_id, epoch, seq) VALUES (?, ?, ?) ON CONFLICT "
    "(activity_id) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq WHERE excluded.epoch > "
    "activity_writes.epoch OR (excluded.epoch = activity_writes.epoch AND excluded.seq > "
    "activity_writes.seq)";

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

// A prepared statement; finalized on destruction. Or, made with a cache slot, one prepared once
// for the connection's lifetime (kept in the slot, finalized by ~SqliteStore) and reset on
// destruction, so it never holds a read transaction open.
class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  }
  Stmt(sqlite3* db, sqlite3_stmt*& cache, std::string_view sql) : db_(db), cached_(true) {
    if (cache == nullptr) {
      rc_ = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                               SQLITE_PREPARE_PERSISTENT, &cache, nullptr);
    }
    stmt_ = cache;
  }
  ~Stmt() {
    if (cached_) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    } else {
      sqlite3_finalize(stmt_);
    }
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Texts are copied, or after Static() only referenced: then each must stay valid until the
  // next Reset (or the statement's end).
  Stmt& Static() {
    text_lifetime_ = SQLITE_STATIC;
    return *this;
  }
  Stmt& Bind(std::string_view text) {
    Check(sqlite3_bind_text(stmt_, ++index_, text.data(), static_cast<int>(text.size()),
                            text_lifetime_));
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
  Stmt& BindAll(std::span<const SqlValue> values) {
    for (const SqlValue& value : values) std::visit([this](auto v) { Bind(v); }, value);
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
  bool cached_ = false;
  sqlite3_destructor_type text_lifetime_ = SQLITE_TRANSIENT;
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

base::Status InsertItems(sqlite3* db, std::string_view activity_id,
                         std::span<const std::string> items, int64_t now_ms) {
  Stmt insert(db, records::kInsertItem);
  for (const auto& item : items) {
    insert.Reset();
    if (auto run = insert.Bind(activity_id).Bind(item).Bind(now_ms).Run("insert item"); !run) {
      if (run.error().code == ErrorCode::kAlreadyExists) {
        return records::ItemExists(activity_id, item);
      }
      return run;
    }
  }
  return {};
}

// The rows of `query`, each read by `read`.
template <typename Record>
Result<std::vector<Record>> ReadAll(Stmt& query, Record (*read)(const Stmt&),
                                    std::string_view what) {
  std::vector<Record> records;
  for (;;) {
    auto row = query.Step(what);
    if (!row) return std::move(row).error();
    if (!*row) break;
    records.push_back(read(query));
  }
  return records;
}

}  // namespace

// The events of changes made in the caller's transaction, numbered after the last ones (the
// database lock of BEGIN IMMEDIATE keeps numbers in commit order). Each change happens once, so
// its id is new; a duplicate is an error and the transaction rolls back.
base::Status SqliteStore::WriteEvents(std::span<const records::EventDraft> events, int64_t now_ms) {
  if (events.empty()) return {};
  const auto count = static_cast<int64_t>(events.size());
  Stmt bump(db_, bump_event_seq_, records::kBumpEventSeq);
  if (auto run = bump.Bind(count).Run("number events"); !run) return run;
  Stmt read(db_, read_event_seq_, records::kReadEventSeq);
  auto row = read.Step("number events");
  if (!row) return std::move(row).error();
  if (!*row) return MakeError(ErrorCode::kInternal, "no order_event_seq row");
  int64_t seq = read.Int(0) - count;
  Stmt insert(db_, insert_event_, records::kInsertEvent);
  for (const records::EventDraft& event : events) {
    insert.Reset();
    const std::string id = records::EventId(event.order_id, event.state);
    if (auto run = insert.Bind(++seq)
                       .Bind(std::string_view(id))
                       .Bind(event.order_id)
                       .Bind(event.activity_id)
                       .Bind(event.state)
                       .Bind(now_ms)
                       .Run("write event");
        !run) {
      return run;
    }
  }
  return {};
}

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
  // WAL: readers do not block the writer; NORMAL sync keeps every commit across a process crash
  // (a power loss may roll back the transactions since the last checkpoint: docs/durability.md).
  // A page cache of 32 MiB instead of SQLite's 2 MiB: the orders' random-key index (by user) soon
  // outgrows 2 MiB, and then every batch read its pages back from the file and the cache freed
  // and allocated again the pages a commit had dirtied beyond its size. No effect on durability.
  for (std::string_view pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
                                  "PRAGMA foreign_keys=ON", "PRAGMA cache_size=-32768"}) {
    if (auto status = Exec(db, pragma, pragma); !status) return std::move(status).error();
  }
  return store;
}

SqliteStore::~SqliteStore() {
  for (sqlite3_stmt* stmt : {read_fence_, insert_order_, order_exists_, raise_written_,
                             bump_event_seq_, read_event_seq_, insert_event_}) {
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db_);
}

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
  Stmt query(db_, std::string(records::kSelectActivity) + " ORDER BY created_ms, id");
  return ReadAll(query, &records::ReadActivity<Stmt>, "list activities");
}

Result<ActivityRecord> SqliteStore::GetActivity(std::string_view id, bool with_items) {
  std::lock_guard lock(mutex_);
  return GetLocked(id, with_items);
}

Result<ActivityRecord> SqliteStore::GetLocked(std::string_view id, bool with_items) {
  Stmt query(db_, std::string(records::kSelectActivity) + " WHERE id = ?");
  auto row = query.Bind(id).Step("get activity");
  if (!row) return std::move(row).error();
  if (!*row) return records::NoActivity(id);
  ActivityRecord record = records::ReadActivity(query);
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

Result<ActivityRecord> SqliteStore::CreateActivity(const core::Activity& a, int64_t now_ms) {
  if (auto valid = core::Validate(a); !valid) return valid.error();
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  Stmt insert(db_, records::kInsertActivity);
  const std::string lottery = EncodeLottery(a.lottery);
  const std::string webhooks = records::JoinWebhookUrls(a.webhook_urls);
  const std::string room = core::EncodeWaitingRoom(a.waiting_room);
  if (auto run = insert.BindAll(records::ActivityInsertValues(a, lottery, webhooks, room, now_ms))
                     .Run("create activity");
      !run) {
    if (run.error().code == ErrorCode::kAlreadyExists) return records::ActivityExists(a.id);
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
  auto merged = records::MergeUpdate(*current, update);
  if (!merged) return std::move(merged).error();
  Stmt write(db_, records::kUpdateActivity);
  const std::string webhooks = records::JoinWebhookUrls(merged->webhook_urls);
  const std::string room = core::EncodeWaitingRoom(merged->waiting_room);
  if (auto run = write.BindAll(records::ActivityUpdateValues(*merged, webhooks, room, id, now_ms))
                     .Run("update activity");
      !run) {
    return run.error();
  }
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
  if (auto valid = records::CheckAddedStock(id, *current, units, items); !valid) {
    return valid.error();
  }
  if (auto inserted = InsertItems(db_, id, items, now_ms); !inserted) return inserted.error();
  Stmt write(db_, records::kAddStock);
  if (auto run = write.Bind(units).Bind(now_ms).Bind(id).Run("add stock"); !run) {
    return run.error();
  }
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return GetLocked(id, false);
}

base::Status SqliteStore::DeleteActivity(std::string_view id) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status();
  auto current = GetLocked(id, false);
  if (!current) return std::move(current).error();
  Stmt count(db_, records::kCountActivityOrders);
  auto counted = count.Bind(id).Step("count orders");
  if (!counted) return std::move(counted).error();
  if (count.Int(0) > 0) return records::HasOrders(id, count.Int(0));
  Stmt items(db_, records::kDeleteItems);
  if (auto run = items.Bind(id).Run("delete items"); !run) return run;
  Stmt activity(db_, records::kDeleteActivity);
  if (auto run = activity.Bind(id).Run("delete activity"); !run) return run;
  Stmt mark(db_, records::kDeleteWrittenMark);
  if (auto run = mark.Bind(id).Run("delete write mark"); !run) return run;
  return tx.Commit();
}

Result<std::vector<InsertOutcome>> SqliteStore::InsertOrders(std::span<const OrderRecord> orders,
                                                             int64_t now_ms,
                                                             std::optional<int64_t> fence) {
  auto marks = records::HighestWritten(orders);
  if (!marks) return std::move(marks).error();
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  if (fence) {
    Stmt read(db_, read_fence_, "SELECT epoch FROM fence WHERE id = 1");
    auto row = read.Step("read fence");
    if (!row) return std::move(row).error();
    const int64_t epoch = *row ? read.Int(0) : 0;
    if (epoch != *fence) {
      return MakeError(ErrorCode::kFailedPrecondition, base::ErrorDetail::kFenced,
                       "fenced: the batch was read under epoch {}, the record is at {}", *fence,
                       epoch);
    }
  }
  // Each activity's write mark, raised (or left, never lowered) in the same transaction.
  if (!marks->empty()) {
    Stmt raise(db_, raise_written_, kRaiseWrittenMark);
    for (const records::WrittenMark& mark : *marks) {
      raise.Reset();
      if (auto run = raise.Bind(mark.activity_id)
                         .Bind(mark.written.epoch)
                         .Bind(mark.written.seq)
                         .Run("raise write mark");
          !run) {
        return run.error();
      }
    }
  }
  // The statements are prepared once per connection; the texts bound without a copy (each
  // order's values outlive its step).
  static const std::string kInsertOrder =
      fmt::format("INSERT INTO orders {} VALUES {} ON CONFLICT DO NOTHING",
                  records::kOrderInsertColumns, records::kOrderInsertRow);
  Stmt insert(db_, insert_order_, kInsertOrder);
  insert.Static();
  Stmt exists(db_, order_exists_, "SELECT 1 FROM orders WHERE order_id = ?");
  std::vector<InsertOutcome> outcomes;
  outcomes.reserve(orders.size());
  std::string items;
  for (const OrderRecord& order : orders) {
    insert.Reset();
    items = base::JoinWords(order.items);
    if (auto run =
            insert.BindAll(records::OrderInsertValues(order, items, now_ms)).Run("insert order");
        !run) {
      return run.error();
    }
    if (sqlite3_changes(db_) == 1) {
      outcomes.push_back(InsertOutcome::kInserted);
      continue;
    }
    // Not inserted: either an order with this id is in the record (a redelivery), or the
    // one-live-order-per-user key (or the one-win-per-draw key) refused it. Only then is the
    // id looked up, so the common case costs one statement per order.
    insert.Reset();
    exists.Reset();
    auto found = exists.Bind(order.order_id).Step("check order");
    if (!found) return std::move(found).error();
    outcomes.push_back(*found ? InsertOutcome::kDuplicate : InsertOutcome::kConflict);
  }
  insert.Reset();
  std::vector<records::EventDraft> events;
  for (size_t i = 0; i < orders.size(); ++i) {
    if (outcomes[i] != InsertOutcome::kInserted) continue;
    events.push_back(
        {orders[i].order_id, orders[i].activity_id, records::InsertedEventState(orders[i])});
  }
  if (auto written = WriteEvents(events, now_ms); !written) return written.error();
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

Result<int64_t> SqliteStore::ReadFence() {
  std::lock_guard lock(mutex_);
  Stmt read(db_, "SELECT epoch FROM fence WHERE id = 1");
  auto row = read.Step("read fence");
  if (!row) return std::move(row).error();
  return *row ? read.Int(0) : 0;
}

Result<std::vector<std::pair<std::string, core::WriteSeq>>> SqliteStore::WrittenSeqs() {
  std::lock_guard lock(mutex_);
  Stmt query(db_, records::kSelectWrittenSeqs);
  std::vector<std::pair<std::string, core::WriteSeq>> marks;
  for (;;) {
    auto row = query.Step("read write marks");
    if (!row) return std::move(row).error();
    if (!*row) break;
    marks.emplace_back(query.Text(0), core::WriteSeq{query.Int(1), query.Int(2)});
  }
  return marks;
}

base::Status SqliteStore::FlagCompensation(std::span<const std::string> order_ids, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  Stmt flag(db_, records::kFlagCompensation);
  Stmt activity(db_, records::kActivityOfOrder);
  std::vector<std::string> activities;  // of the orders flagged now, for their events
  std::vector<std::string_view> flagged;
  for (const auto& id : order_ids) {
    flag.Reset();
    if (auto run = flag.Bind(id).Run("flag compensation"); !run) return run.error();
    if (sqlite3_changes(db_) != 1) continue;
    activity.Reset();
    auto row = activity.Bind(id).Step("read order");
    if (!row) return std::move(row).error();
    if (!*row) continue;
    activities.push_back(activity.Text(0));
    flagged.push_back(id);
  }
  std::vector<records::EventDraft> events;
  for (size_t i = 0; i < flagged.size(); ++i) {
    events.push_back({flagged[i], activities[i], kEventCompensationDue});
  }
  if (auto written = WriteEvents(events, now_ms); !written) return written;
  return tx.Commit();
}

Result<OrderRecord> SqliteStore::GetOrder(std::string_view order_id) {
  std::lock_guard lock(mutex_);
  Stmt query(db_, std::string(records::kSelectOrder) + " WHERE order_id = ?");
  auto row = query.Bind(order_id).Step("get order");
  if (!row) return std::move(row).error();
  if (!*row) return records::NoOrder(order_id);
  return records::ReadOrder(query);
}

Result<std::vector<OrderRecord>> SqliteStore::OrdersOfUser(std::string_view user_id,
                                                           int64_t limit) {
  std::lock_guard lock(mutex_);
  Stmt query(db_, std::string(records::kSelectOrder) + std::string(records::kWhereUserNewestFirst));
  query.Bind(user_id).Bind(limit);
  return ReadAll(query, &records::ReadOrder<Stmt>, "orders of user");
}

Result<std::vector<OrderRecord>> SqliteStore::CancelUnpaid(std::string_view activity_id,
                                                           int64_t created_before_ms, int64_t limit,
                                                           int64_t now_ms) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  Stmt query(db_, std::string(records::kSelectOrder) + std::string(records::kWhereUnpaidBefore));
  query.Bind(activity_id).Bind(created_before_ms).Bind(limit);
  auto cancelled = ReadAll(query, &records::ReadOrder<Stmt>, "unpaid orders");
  if (!cancelled) return cancelled;
  Stmt cancel(db_, records::kCancelReserved);
  for (OrderRecord& order : *cancelled) {
    cancel.Reset();
    if (auto run = cancel.Bind(now_ms).Bind(order.order_id).Run("cancel order"); !run) {
      return run.error();
    }
    if (sqlite3_changes(db_) != 1) continue;  // not reserved any more: unchanged
    records::MarkCancelled(order, now_ms);
  }
  std::erase_if(*cancelled,
                [](const OrderRecord& order) { return order.state != OrderState::kCancelled; });
  std::vector<records::EventDraft> events;
  for (const OrderRecord& order : *cancelled) {
    events.push_back({order.order_id, order.activity_id, kEventCancelled});
  }
  if (auto written = WriteEvents(events, now_ms); !written) return written.error();
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return cancelled;
}

Result<PayOutcome> SqliteStore::PayOrder(std::string_view order_id, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status().error();
  Stmt query(db_, "SELECT state, activity_id FROM orders WHERE order_id = ?");
  auto row = query.Bind(order_id).Step("read order");
  if (!row) return std::move(row).error();
  if (!*row) return records::NoOrder(order_id);
  const PayOutcome outcome = records::PayOutcomeFor(OrderStateFrom(query.Text(0)));
  const std::string activity_id = query.Text(1);
  std::optional<records::EventDraft> event;
  if (outcome == PayOutcome::kPaid) {
    Stmt pay(db_, records::kMarkPaid);
    if (auto run = pay.Bind(now_ms).Bind(order_id).Run("pay order"); !run) return run.error();
    event = records::EventDraft{order_id, activity_id, kEventPaid};
  } else if (outcome == PayOutcome::kRefused) {
    Stmt flag(db_, records::kFlagRefund);
    if (auto run = flag.Bind(order_id).Run("flag refund"); !run) return run.error();
    if (sqlite3_changes(db_) == 1) {
      event = records::EventDraft{order_id, activity_id, kEventRefundDue};
    }
  }
  if (event) {
    if (auto written = WriteEvents(std::span(&*event, 1), now_ms); !written) {
      return written.error();
    }
  }
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return outcome;
}

Result<std::vector<OrderRecord>> SqliteStore::OrdersOfActivity(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  Stmt query(db_,
             std::string(records::kSelectOrder) + std::string(records::kWhereActivityOldestFirst));
  query.Bind(activity_id);
  return ReadAll(query, &records::ReadOrder<Stmt>, "orders of activity");
}

Result<OrderPage> SqliteStore::OrdersPage(std::string_view activity_id, std::string_view cursor,
                                          int64_t limit, OrderStates states) {
  if (auto valid = records::CheckOrdersPage(limit, states); !valid) return valid.error();
  auto after = records::DecodeOrderCursor(activity_id, cursor);
  if (!after) return std::move(after).error();
  std::lock_guard lock(mutex_);
  Stmt query(db_, std::string(records::kSelectOrder) + std::string(records::kWhereActivityPage));
  query.Bind(activity_id)
      .Bind(std::string_view(*after))
      .Bind(records::StatesMask(states))
      .Bind(limit + 1);
  auto rows = ReadAll(query, &records::ReadOrder<Stmt>, "a page of orders");
  if (!rows) return std::move(rows).error();
  return records::PageOf(activity_id, std::move(*rows), limit);
}

Result<OrderCounts> SqliteStore::CountOrders(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  Stmt query(db_, records::kCountOrders);
  auto row = query.Bind(activity_id).Step("count orders");
  if (!row) return std::move(row).error();
  return OrderCounts{query.Int(0), query.Int(1), query.Int(2)};
}

Result<OrderReport> SqliteStore::ReportOrders(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  OrderReport report;
  Stmt span(db_, records::kReportSpan);
  auto row = span.Bind(activity_id).Step("report orders");
  if (!row) return std::move(row).error();
  report.orders = span.Int(0);
  report.first_ms = span.Int(1);
  report.last_ms = span.Int(2);
  report.refund_due = span.Int(3);
  report.compensation_due = span.Int(4);
  report.step_s = records::ReportStepSeconds(report.first_ms, report.last_ms);
  Stmt buckets(db_, records::ReportBucketsSql(report.first_ms, report.step_s));
  buckets.Bind(activity_id);
  for (;;) {
    auto next = buckets.Step("report orders");
    if (!next) return std::move(next).error();
    if (!*next) break;
    report.buckets.push_back({buckets.Int(0) / 1000, buckets.Int(1), buckets.Int(2)});
  }
  Stmt states(db_, records::kReportStates);
  states.Bind(activity_id);
  for (;;) {
    auto next = states.Step("report orders");
    if (!next) return std::move(next).error();
    if (!*next) break;
    report.states.push_back({states.Text(0), states.Int(1), states.Int(2)});
  }
  Stmt prizes(db_, records::kReportPrizes);
  prizes.Bind(activity_id);
  for (;;) {
    auto next = prizes.Step("report orders");
    if (!next) return std::move(next).error();
    if (!*next) break;
    report.prizes.emplace_back(prizes.Text(0), prizes.Int(1));
  }
  Stmt refused(db_, records::kReportRefused);
  auto counted = refused.Bind(activity_id).Step("report orders");
  if (!counted) return std::move(counted).error();
  report.refused = refused.Int(0);
  Stmt answers(db_, records::kReportAnswers);
  answers.Bind(activity_id);
  for (;;) {
    auto next = answers.Step("report orders");
    if (!next) return std::move(next).error();
    if (!*next) break;
    report.answers.emplace_back(answers.Text(0), answers.Int(1));
  }
  return report;
}

base::Status SqliteStore::AddAnswers(std::span<const AnswerCount> counts) {
  if (auto valid = records::CheckAnswers(counts); !valid) return valid;
  if (counts.empty()) return {};
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status();
  Stmt add(db_, records::kAddAnswerSqlite);
  for (const AnswerCount& answer : counts) {
    add.Reset();
    auto done =
        add.Bind(answer.activity_id).Bind(answer.word).Bind(answer.count).Step("add answers");
    if (!done) return std::move(done).error();
  }
  return tx.Commit();
}

Result<OrderAudit> SqliteStore::AuditOrders(std::string_view activity_id, int64_t per_user_limit) {
  std::lock_guard lock(mutex_);
  OrderAudit audit;
  Stmt over(db_, records::kUsersOverLimit);
  over.Bind(activity_id).Bind(per_user_limit);
  for (;;) {
    auto row = over.Step("audit orders");
    if (!row) return std::move(row).error();
    if (!*row) break;
    audit.users_over_limit.emplace_back(over.Text(0), over.Int(1));
  }
  Stmt duplicates(db_, records::kDuplicateIntents);
  auto row = duplicates.Bind(activity_id).Step("audit orders");
  if (!row) return std::move(row).error();
  audit.duplicate_intents = duplicates.Int(0);
  return audit;
}

base::Status SqliteStore::RecordRefused(std::span<const RefusedOrder> orders, int64_t now_ms) {
  if (auto valid = records::CheckRefused(orders); !valid) return valid;
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status();
  // An order refused before (dead-lettered again after a retry) has its event.
  Stmt exists(db_, records::kEventExists);
  std::vector<records::EventDraft> events;
  for (const RefusedOrder& order : orders) {
    exists.Reset();
    auto found = exists.Bind(records::EventId(order.order_id, kEventRefused)).Step("read event");
    if (!found) return std::move(found).error();
    if (*found) continue;
    events.push_back({order.order_id, order.activity_id, kEventRefused});
  }
  if (auto written = WriteEvents(events, now_ms); !written) return written;
  return tx.Commit();
}

Result<std::vector<OrderEvent>> SqliteStore::EventsAfter(int64_t after, int64_t limit) {
  if (auto valid = records::CheckEventsRead(after, limit); !valid) return valid.error();
  std::lock_guard lock(mutex_);
  Stmt query(db_, records::kSelectEventsAfter);
  query.Bind(after).Bind(limit);
  return ReadAll(query, &records::ReadEvent<Stmt>, "read events");
}

Result<int64_t> SqliteStore::DeliveryCursor(std::string_view receiver) {
  std::lock_guard lock(mutex_);
  Stmt query(db_, records::kSelectDeliveryCursor);
  auto row = query.Bind(records::CutTo(receiver, records::kMaxReceiverBytes)).Step("read cursor");
  if (!row) return std::move(row).error();
  return *row ? query.Int(0) : int64_t{0};
}

base::Status SqliteStore::SaveDelivery(const DeliveryUpdate& update, int64_t now_ms) {
  const std::string_view receiver = records::CutTo(update.receiver, records::kMaxReceiverBytes);
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (!tx.status()) return tx.status();
  Stmt cursor(db_,
              "INSERT INTO webhook_cursors (receiver, after_seq, updated_ms) VALUES (?, ?, ?) ON "
              "CONFLICT (receiver) DO UPDATE SET after_seq = MAX(after_seq, excluded.after_seq), "
              "updated_ms = excluded.updated_ms");
  if (auto run = cursor.Bind(receiver).Bind(update.cursor).Bind(now_ms).Run("save cursor"); !run) {
    return run;
  }
  Stmt park(db_,
            "INSERT INTO webhook_parked (receiver, seq, activity_id, attempts, last_error, "
            "parked_ms, retry) VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT (receiver, seq) DO UPDATE "
            "SET attempts = attempts + excluded.attempts, last_error = excluded.last_error, "
            "parked_ms = excluded.parked_ms, retry = 0");
  for (const ParkedEvent& parked : update.parked) {
    park.Reset();
    if (auto run = park.Bind(receiver)
                       .Bind(parked.event.seq)
                       .Bind(parked.event.activity_id)
                       .Bind(parked.attempts)
                       .Bind(records::CutTo(parked.last_error, records::kMaxDeliveryErrorBytes))
                       .Bind(now_ms)
                       .Run("park event");
        !run) {
      return run;
    }
  }
  Stmt unpark(db_, records::kUnpark);
  for (int64_t seq : update.delivered) {
    unpark.Reset();
    if (auto run = unpark.Bind(receiver).Bind(seq).Run("unpark event"); !run) return run;
  }
  return tx.Commit();
}

Result<std::vector<ParkedEvent>> SqliteStore::ParkedEvents(std::string_view receiver,
                                                           int64_t limit) {
  std::lock_guard lock(mutex_);
  Stmt query(db_, records::kSelectParked);
  query.Bind(receiver).Bind(receiver).Bind(limit);
  return ReadAll(query, &records::ReadParked<Stmt>, "parked events");
}

Result<int64_t> SqliteStore::RequestRetry(std::string_view receiver) {
  std::lock_guard lock(mutex_);
  Stmt update(db_, records::kRequestRetry);
  if (auto run = update.Bind(receiver).Bind(receiver).Run("request retry"); !run) {
    return run.error();
  }
  return static_cast<int64_t>(sqlite3_changes(db_));
}

}  // namespace flashsale::store
