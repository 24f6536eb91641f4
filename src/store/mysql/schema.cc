#include "store/mysql/schema.h"

#include <array>
#include <span>

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

constexpr std::array<std::span<const std::string_view>, 4> kMigrations = {kMigration1, kMigration2,
                                                                          kMigration3, kMigration4};

// One name per database on the server: LEFT(SHA1(..)) keeps it within GET_LOCK's 64 characters.
constexpr std::string_view kMigrationLock =
    "CONCAT('flashsale-migrate-', LEFT(SHA1(DATABASE()), 32))";

}  // namespace

base::Status Migrate(Connection& conn, std::string_view where) {
  Statement take(conn, fmt::format("SELECT GET_LOCK({}, ?)", kMigrationLock),
                 "take the migration lock");
  if (auto run = take.Execute({kMigrationLockTimeoutS}); !run) return run;
  if (take.rows().empty() || take.rows()[0].IsNull(0)) {
    return MakeError(ErrorCode::kInternal, "mysql GET_LOCK on {} failed", where);
  }
  if (take.rows()[0].Int(0) != 1) {
    return MakeError(ErrorCode::kUnavailable,
                     "mysql migrate {}: another migration held the lock for {} s", where,
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
}

Result<int> SchemaVersion(Connection& conn) {
  Statement query(conn, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                  "read schema version");
  if (auto run = query.Execute({}); !run) return run.error();
  return static_cast<int>(query.rows().at(0).Int(0));
}

}  // namespace flashsale::store::mysql
