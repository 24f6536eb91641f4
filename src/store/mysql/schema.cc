#include "store/mysql/schema.h"

#include <array>
#include <chrono>
#include <span>
#include <thread>

namespace flashsale::store::mysql {

using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr int64_t kMigrationLockTimeoutS = 20;

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

// Each activity's write mark: the highest write sequence (core/write_seq.h) of any order persisted
// for it, raised by InsertOrders and never lowered (Store::WrittenSeqs).
constexpr std::string_view kMigration5[] = {
    R"sql(
CREATE TABLE IF NOT EXISTS activity_writes (
  activity_id  VARCHAR(64) NOT NULL PRIMARY KEY,
  epoch        BIGINT NOT NULL,
  seq          BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql",
};

// The outbox: one event per change of an order's state, written in the change's transaction
// (Store::EventsAfter), numbered under the one row of order_event_seq (events.h).
constexpr std::string_view kMigration6[] = {
    R"sql(
CREATE TABLE IF NOT EXISTS order_events (
  seq          BIGINT NOT NULL PRIMARY KEY,
  event_id     VARCHAR(96) NOT NULL,
  order_id     VARCHAR(64) NOT NULL,
  activity_id  VARCHAR(64) NOT NULL,
  state        VARCHAR(24) NOT NULL,
  at_ms        BIGINT NOT NULL,
  UNIQUE KEY order_events_id (event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql",
    R"sql(
CREATE TABLE IF NOT EXISTS order_event_seq (
  id        TINYINT NOT NULL PRIMARY KEY,
  last_seq  BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql",
    "INSERT IGNORE INTO order_event_seq (id, last_seq) VALUES (1, 0)",
};

// Webhook deliveries (service/event_relay.h): each receiver's cursor, and the events it parked
// (kept, listed, retried on demand).
constexpr std::string_view kMigration7[] = {
    R"sql(
CREATE TABLE IF NOT EXISTS webhook_cursors (
  receiver    VARCHAR(512) NOT NULL PRIMARY KEY,
  after_seq   BIGINT NOT NULL,
  updated_ms  BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql",
    R"sql(
CREATE TABLE IF NOT EXISTS webhook_parked (
  receiver     VARCHAR(512) NOT NULL,
  seq          BIGINT NOT NULL,
  activity_id  VARCHAR(64) NOT NULL,
  attempts     BIGINT NOT NULL,
  last_error   TEXT NOT NULL,
  parked_ms    BIGINT NOT NULL,
  retry        TINYINT NOT NULL,
  PRIMARY KEY (receiver, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql",
};

// The export (Store::OrdersPage): an activity's orders by order id, a page at a time, read in the
// index's order. (orders_by_activity (activity_id, state) holds the primary key after its columns,
// as every InnoDB index does, so it is in order by order id only for one state at a time.)
constexpr std::string_view kMigration8[] = {
    "ALTER TABLE orders ADD KEY IF NOT EXISTS orders_by_activity_id (activity_id, order_id)",
};

// An activity's own webhook receivers (core::Activity::webhook_urls), one URL a line.
constexpr std::string_view kMigration9[] = {
    "ALTER TABLE activities ADD COLUMN IF NOT EXISTS webhook_urls TEXT NOT NULL DEFAULT ''",
};

// The report's answers (Store::AddAnswers), and its count of refused orders read from an index.
constexpr std::string_view kMigration10[] = {
    R"sql(
CREATE TABLE IF NOT EXISTS activity_answers (
  activity_id  VARCHAR(64) NOT NULL,
  word         VARCHAR(32) NOT NULL,
  total        BIGINT NOT NULL,
  PRIMARY KEY (activity_id, word)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql",
    "ALTER TABLE order_events ADD KEY IF NOT EXISTS order_events_by_activity (activity_id, state)",
};

// An activity's waiting room (core::Activity::waiting_room, core::EncodeWaitingRoom); '': none.
constexpr std::string_view kMigration11[] = {
    "ALTER TABLE activities ADD COLUMN IF NOT EXISTS waiting_room TEXT NOT NULL DEFAULT ''",
};

constexpr std::array<std::span<const std::string_view>, 11> kMigrations = {
    kMigration1, kMigration2, kMigration3, kMigration4,  kMigration5, kMigration6,
    kMigration7, kMigration8, kMigration9, kMigration10, kMigration11};

// ---- The migration lock ----
//
// Processes that migrate one database at once take turns under a lease: the one row of
// schema_lock names its holder and when the lease ends, and it is taken with a compare-and-set,
//   UPDATE schema_lock SET holder = <me>, until_ms = now + lease WHERE id = 1 AND (holder = '' OR
//   until_ms < now)
// autocommitted, which took it iff it changed the row. Why not GET_LOCK: Galera does not replicate
// it, so two nodes would each grant it. Why not a row locked with SELECT ... FOR UPDATE: the DDL of
// a migration commits the transaction that holds the row lock, and Galera's row locks are local to
// a node anyway. The compare-and-set is one replicated write: on a single server the row lock
// orders two attempts and the loser finds the row taken; on Galera two attempts on different nodes
// conflict in certification, and the loser gets a deadlock error (1213) and tries again. The holder
// renews the lease before each migration and stops if it was lost; a holder that dies keeps it
// until it ends (kLeaseMs, shorter than a waiter's 20 s, so a crash does not block the restart).
// A single statement slower than the lease could let a second migrator in: the statements are
// idempotent (IF NOT EXISTS), and the holder then stops at its next renewal.

constexpr int64_t kLeaseMs = 15'000;
constexpr auto kRetryPause = std::chrono::milliseconds(100);

constexpr std::string_view kCreateSchemaLock = R"sql(
CREATE TABLE IF NOT EXISTS schema_lock (
  id        INT NOT NULL PRIMARY KEY,
  holder    VARCHAR(64) NOT NULL,
  until_ms  BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
)sql";

constexpr std::string_view kNowMs = "CAST(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000 AS SIGNED)";

// A deadlock or certification conflict: nothing happened, and trying again may work.
bool Conflicted(Connection& conn, const base::Status& status) {
  if (status.ok() || !conn.deadlocked() || conn.broken()) return false;
  conn.ClearDeadlock();
  return true;
}

// One attempt: true if the lease is now `holder`'s.
Result<bool> TryTakeLease(Connection& conn, std::string_view holder) {
  if (auto made = conn.Exec(kCreateSchemaLock, "create schema_lock"); !made) {
    if (Conflicted(conn, made)) return false;
    return made.error();
  }
  if (auto row =
          conn.Exec("INSERT IGNORE INTO schema_lock (id, holder, until_ms) VALUES (1, '', 0)",
                    "create the migration lease");
      !row) {
    if (Conflicted(conn, row)) return false;
    return row.error();
  }
  Statement take(conn,
                 fmt::format("UPDATE schema_lock SET holder = ?, until_ms = {0} + ? WHERE id = 1 "
                             "AND (holder = '' OR until_ms < {0})",
                             kNowMs),
                 "take the migration lease");
  if (auto run = take.Execute({holder, kLeaseMs}); !run) {
    if (Conflicted(conn, run)) return false;
    return run.error();
  }
  return take.affected_rows() == 1;
}

// The lease for `holder`, waited for up to kMigrationLockTimeoutS.
base::Status TakeLease(Connection& conn, std::string_view holder, std::string_view where) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(kMigrationLockTimeoutS);
  for (;;) {
    auto taken = TryTakeLease(conn, holder);
    if (!taken) return std::move(taken).error();
    if (*taken) return {};
    if (std::chrono::steady_clock::now() >= deadline) {
      return MakeError(ErrorCode::kUnavailable,
                       "mysql migrate {}: another migration held the lock for {} s", where,
                       kMigrationLockTimeoutS);
    }
    std::this_thread::sleep_for(kRetryPause);
  }
}

// The lease extended by kLeaseMs; kUnavailable if it is no longer `holder`'s.
base::Status RenewLease(Connection& conn, std::string_view holder, std::string_view where) {
  // GREATEST: the row always changes, so the affected rows (changed rows) tell whether it is
  // still ours, also within the millisecond it was taken.
  Statement renew(conn,
                  fmt::format("UPDATE schema_lock SET until_ms = GREATEST(until_ms + 1, {} + ?) "
                              "WHERE id = 1 AND holder = ?",
                              kNowMs),
                  "renew the migration lease");
  if (auto run = renew.Execute({kLeaseMs, holder}); !run) return run;
  if (renew.affected_rows() != 1) {
    return MakeError(ErrorCode::kUnavailable,
                     "mysql migrate {}: the migration lease ran out and was taken by another "
                     "migrator",
                     where);
  }
  return {};
}

// A name no other migrator has: the server's UUID().
Result<std::string> NewHolder(Connection& conn) {
  Statement uuid(conn, "SELECT UUID()", "name the migrator");
  if (auto run = uuid.Execute({}); !run) return run.error();
  return uuid.rows().at(0).Text(0);
}

// Gives the lease back, if the connection is still usable (else it runs out).
struct LeaseRelease {
  Connection& conn;
  std::string holder;
  ~LeaseRelease() {
    if (conn.broken()) return;
    Statement give(conn,
                   "UPDATE schema_lock SET holder = '', until_ms = 0 WHERE id = 1 AND holder = ?",
                   "release the migration lease");
    (void)give.Execute({std::string_view(holder)});
  }
};

base::Status ApplyMigrations(Connection& conn, std::string_view holder, std::string_view where) {
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
    if (auto renewed = RenewLease(conn, holder, where); !renewed) return renewed;
    for (std::string_view statement : kMigrations[i]) {
      if (auto status = conn.Exec(statement, fmt::format("migration {}", version)); !status) {
        return status;
      }
    }
    if (auto run = record.Execute({version}); !run) return run;
  }
  return {};
}

}  // namespace

base::Status Migrate(Connection& conn, std::string_view where) {
  auto holder = NewHolder(conn);
  if (!holder) return std::move(holder).error();
  if (auto taken = TakeLease(conn, *holder, where); !taken) return taken;
  LeaseRelease release{conn, *holder};
  return ApplyMigrations(conn, *holder, where);
}

Result<int> SchemaVersion(Connection& conn) {
  Statement query(conn, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                  "read schema version");
  if (auto run = query.Execute({}); !run) return run.error();
  return static_cast<int>(query.rows().at(0).Int(0));
}

}  // namespace flashsale::store::mysql
