#pragma once
// The schema of MySqlStore: SqliteStore's logical schema (schema_migrations, activities,
// activity_items, orders, fence, activity_writes) in MySQL's dialect, InnoDB, utf8mb4 with binary
// collation, brought up to date by versioned migrations.

#include <string_view>

#include "base/result.h"
#include "store/mysql/connection.h"

namespace flashsale::store::mysql {

// Applies the migrations not applied yet. Idempotent, and safe when several processes migrate one
// database at once, on one server or on the nodes of a Galera cluster: they take turns under a
// lease row taken with a compare-and-set (schema.cc says why not GET_LOCK), waited for up to 20 s.
// MySQL commits DDL at once, so the statements of a migration are written to be re-run (CREATE
// ... IF NOT EXISTS) should a migration stop half-way. `where` names the server in messages.
base::Status Migrate(Connection& conn, std::string_view where);

// The highest migration applied (0 before the first).
base::Result<int> SchemaVersion(Connection& conn);

}  // namespace flashsale::store::mysql
