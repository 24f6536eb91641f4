#pragma once
// The MySQL/MariaDB store (MariaDB Connector/C; tested against MariaDB 10.11). One connection,
// one call at a time (a mutex, as SqliteStore), prepared statements for every value that comes
// from outside, every wait bounded: connect 5 s, each read and write 30 s, a row lock 10 s.
//
// URL (user, password, database and socket are percent-decoded, so write '@' ':' '/' '?' '%' of a
// password as %40 %3A %2F %3F %25):
//   mysql://user[:password]@host[:port]/database               TCP; port 3306 by default; an
//                                                              IPv6 host in brackets ([::1])
//   mysql://user[:password]@localhost/database?socket=/path    the server's unix socket (the
//                                                              host may also be left empty)
// No other query parameter is accepted. There is no TLS: use a unix socket or a trusted network.
//
// Connection loss. The connection is not reconnected behind a call's back (MYSQL_OPT_RECONNECT is
// off). When a call finds the connection broken (the server restarted, a network blip, an idle
// timeout), the connection is dropped and, if it had been opened by an earlier call, the call runs
// once more on a fresh one: nothing of it took effect, since a transaction whose connection dies
// before COMMIT is rolled back by the server. Otherwise the call fails with kUnavailable (and the
// next call connects again). The one exception is a connection lost while COMMIT was in flight:
// the transaction may or may not have been committed, so the call fails with kUnknownOutcome and
// is not retried. InsertOrders is idempotent by design (a redelivery reports kDuplicate), so its
// caller may simply retry it; for the activity calls, read the activity back first.
//
// Deadlocks. A transaction the server rolled back as a deadlock victim is run again, up to 3 runs
// in all (nothing of a victim's transaction remains). Two writers of the same orders are kept from
// the usual cause, the next-key locks InnoDB takes on a unique-key clash: InsertOrders reads
// whether a committed order clashes before it inserts.
//
// Errors: a server that cannot be reached, a lost connection, a timeout, a third deadlock or a lock
// wait over 10 s: kUnavailable (a message naming the server as Describe() does, never the
// password); a duplicate key: kAlreadyExists; input the schema cannot hold (an order field over its
// column's size): kInvalidArgument; anything else: kInternal with the server's message.
//
// Schema: the same logical schema as SqliteStore (schema_migrations, activities, activity_items,
// orders), InnoDB, utf8mb4 with binary collation: ids compare byte for byte as in SQLite, except
// that trailing spaces do not count (PAD SPACE; no valid id holds a space).
// SQLite's partial unique index (one live order per user in a limit-1 activity) is a unique key
// over two generated columns that are NULL unless the order is single-unit and not cancelled.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "store/store.h"

namespace flashsale::store {

namespace mysql_internal {
class Connection;  // one MariaDB connection (mysql_store.cc)
}  // namespace mysql_internal

// A parsed mysql:// URL.
struct MySqlEndpoint {
  std::string user;
  std::string password;
  std::string host;  // empty with a socket
  uint16_t port = 3306;
  std::string socket;  // a unix socket path, or empty for TCP
  std::string database;

  // "mysql://user@host:port/db" or "mysql://user@localhost/db?socket=/path": no password.
  std::string Describe() const;
};

// kInvalidArgument (naming the problem, never the password) unless `url` has the form above.
base::Result<MySqlEndpoint> ParseMySqlUrl(std::string_view url);

class MySqlStore final : public Store {
 public:
  // Parses the URL and connects (kInvalidArgument for a bad URL, kUnavailable if the server cannot
  // be reached or refuses the account or database); call Migrate() before use.
  static base::Result<std::unique_ptr<MySqlStore>> Open(const std::string& url);
  ~MySqlStore() override;
  MySqlStore(const MySqlStore&) = delete;
  MySqlStore& operator=(const MySqlStore&) = delete;

  // Idempotent, and safe when several processes migrate one database at once: they take turns
  // under a named server lock (GET_LOCK, waited for up to 20 s). MySQL commits DDL at once, so the
  // statements of a migration are written to be re-run (CREATE ... IF NOT EXISTS) should a
  // migration stop half-way.
  base::Status Migrate() override;
  base::Result<int> SchemaVersion() override;
  base::Status Ping() override;
  std::string Describe() const override { return endpoint_.Describe(); }

  base::Result<std::vector<ActivityRecord>> ListActivities() override;
  base::Result<ActivityRecord> GetActivity(std::string_view id, bool with_items) override;
  base::Result<ActivityRecord> CreateActivity(const core::SeckillActivity& activity,
                                              int64_t now_ms) override;
  base::Result<ActivityRecord> UpdateActivity(std::string_view id, const ActivityUpdate& update,
                                              int64_t now_ms) override;
  base::Result<ActivityRecord> AddStock(std::string_view id, int64_t units,
                                        std::span<const std::string> items,
                                        int64_t now_ms) override;
  // As Store::InsertOrders. Beyond SQLite: an order whose ids or stream id are over 64 bytes is
  // kInvalidArgument (for the whole batch, nothing written). Two stores inserting the same batch
  // at once each get kInserted or kDuplicate per order, and exactly one gets kInserted.
  using Store::InsertOrders;
  base::Result<std::vector<InsertOutcome>> InsertOrders(std::span<const OrderRecord> orders,
                                                        int64_t now_ms,
                                                        std::optional<int64_t> fence) override;
  base::Result<int64_t> AdvanceFence() override;
  base::Status FlagCompensation(std::span<const std::string> order_ids) override;
  base::Result<OrderRecord> GetOrder(std::string_view order_id) override;
  base::Result<std::vector<OrderRecord>> OrdersOfUser(std::string_view user_id,
                                                      int64_t limit) override;
  base::Result<OrderCounts> CountOrders(std::string_view activity_id) override;
  base::Result<std::vector<OrderRecord>> OrdersOfActivity(std::string_view activity_id) override;
  base::Result<std::vector<OrderRecord>> CancelUnpaid(std::string_view activity_id,
                                                      int64_t created_before_ms, int64_t limit,
                                                      int64_t now_ms) override;
  base::Result<PayOutcome> PayOrder(std::string_view order_id, int64_t now_ms) override;
  base::Result<OrderAudit> AuditOrders(std::string_view activity_id,
                                       int64_t per_user_limit) override;

 private:
  explicit MySqlStore(MySqlEndpoint endpoint);
  // Runs body(Connection&) on the connection (connecting first if there is none), with the retry
  // after a stale connection described above. The caller holds mutex_.
  template <typename Body>
  auto Run(const Body& body);

  std::mutex mutex_;  // one call at a time on the one connection
  const MySqlEndpoint endpoint_;
  std::unique_ptr<mysql_internal::Connection>
      connection_;  // null until connected, and after a connection loss
};

}  // namespace flashsale::store
