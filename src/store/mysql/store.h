#pragma once
// The MySQL/MariaDB store (MariaDB Connector/C; tested against MariaDB 10.11): the rules of
// store/records.h in MySQL's dialect. One connection, one call at a time (a mutex, as
// SqliteStore), prepared statements for every value that comes from outside, every wait bounded
// (store/mysql/connection.h). The URL: store/mysql/url.h.
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
// in all (nothing of a victim's transaction remains). On MariaDB Galera a certification conflict
// (another node committed a write to the same rows or unique keys first) arrives as the same error
// and is retried the same way; a node outside the primary component refuses with kUnavailable.
// Reads on a Galera node are causal (wsrep_sync_wait = 1, connection.cc): they see what any node
// committed before them. Two
// writers of the same orders are kept from the usual cause, the next-key locks InnoDB takes on a
// unique-key clash: InsertOrders reads whether a committed order clashes before it inserts.
//
// Errors: a server that cannot be reached, a lost connection, a timeout, a third deadlock or a lock
// wait over 10 s: kUnavailable (a message naming the server as Describe() does, never the
// password); a duplicate key: kAlreadyExists; input the schema cannot hold (an order field over its
// column's size): kInvalidArgument; anything else: kInternal with the server's message.
//
// Schema (store/mysql/schema.cc): the same logical schema as SqliteStore, InnoDB, utf8mb4 with
// binary collation: ids compare byte for byte as in SQLite, except that trailing spaces do not
// count (PAD SPACE; no valid id holds a space). SQLite's partial unique index (one live order per
// user in a limit-1 activity) is a unique key over two generated columns that are NULL unless the
// order is single-unit and not cancelled.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "store/mysql/url.h"
#include "store/store.h"

namespace flashsale::store {

namespace mysql {
class Connection;  // store/mysql/connection.h
}  // namespace mysql

class MySqlStore final : public Store {
 public:
  // Parses the URL and connects (kInvalidArgument for a bad URL, kUnavailable if the server cannot
  // be reached or refuses the account or database); call Migrate() before use.
  static base::Result<std::unique_ptr<MySqlStore>> Open(const std::string& url);
  ~MySqlStore() override;
  MySqlStore(const MySqlStore&) = delete;
  MySqlStore& operator=(const MySqlStore&) = delete;

  std::string Describe() const override { return endpoint_.Describe(); }
  // Idempotent and safe when several processes migrate at once (store/mysql/schema.h).
  base::Status Migrate() override;
  base::Result<int> SchemaVersion() override;
  // mysql_ping: a round trip, without reconnecting.
  base::Status Ping() override;
  // The cipher of the session as the server sees it (SHOW SESSION STATUS LIKE 'Ssl_cipher'):
  // empty over plaintext. With ssl-mode (store/mysql/url.h) it is never empty.
  base::Result<std::string> TlsCipher();

  // Reads: one statement each, no lock taken (READ COMMITTED sees what is committed).
  base::Result<std::vector<ActivityRecord>> ListActivities() override;
  base::Result<ActivityRecord> GetActivity(std::string_view id, bool with_items) override;
  base::Result<OrderRecord> GetOrder(std::string_view order_id) override;
  // A negative limit is no limit, as in SQLite.
  base::Result<std::vector<OrderRecord>> OrdersOfUser(std::string_view user_id,
                                                      int64_t limit) override;
  base::Result<std::vector<OrderRecord>> OrdersOfActivity(std::string_view activity_id) override;
  base::Result<OrderPage> OrdersPage(std::string_view activity_id, std::string_view cursor,
                                     int64_t limit, OrderStates states) override;
  base::Result<OrderCounts> CountOrders(std::string_view activity_id) override;
  base::Result<OrderReport> ReportOrders(std::string_view activity_id) override;
  base::Status AddAnswers(std::span<const AnswerCount> counts) override;
  base::Result<OrderAudit> AuditOrders(std::string_view activity_id,
                                       int64_t per_user_limit) override;

  // Writes: one transaction each. Where SQLite's BEGIN IMMEDIATE keeps every other writer out,
  // these lock the rows they read and then change (SELECT ... FOR UPDATE) until the commit.
  // The activity is read back inside the transaction: once COMMIT succeeds, nothing can fail.
  base::Result<ActivityRecord> CreateActivity(const core::Activity& activity,
                                              int64_t now_ms) override;
  base::Result<ActivityRecord> UpdateActivity(std::string_view id, const ActivityUpdate& update,
                                              int64_t now_ms) override;
  base::Result<ActivityRecord> AddStock(std::string_view id, int64_t units,
                                        std::span<const std::string> items,
                                        int64_t now_ms) override;
  base::Status DeleteActivity(std::string_view id) override;
  // As Store::InsertOrders. Beyond SQLite: an order whose ids or stream id are over 64 bytes is
  // kInvalidArgument (for the whole batch, nothing written). Two stores inserting the same batch
  // at once each get kInserted or kDuplicate per order, and exactly one gets kInserted.
  using Store::InsertOrders;
  base::Result<std::vector<InsertOutcome>> InsertOrders(std::span<const OrderRecord> orders,
                                                        int64_t now_ms,
                                                        std::optional<int64_t> fence) override;
  base::Result<int64_t> AdvanceFence() override;
  base::Result<int64_t> ReadFence() override;
  base::Result<std::vector<std::pair<std::string, core::WriteSeq>>> WrittenSeqs() override;
  base::Status FlagCompensation(std::span<const std::string> order_ids, int64_t now_ms) override;
  // The expired orders stay locked until cancelled: a payment racing with the expiry waits.
  base::Result<std::vector<OrderRecord>> CancelUnpaid(std::string_view activity_id,
                                                      int64_t created_before_ms, int64_t limit,
                                                      int64_t now_ms) override;
  base::Result<PayOutcome> PayOrder(std::string_view order_id, int64_t now_ms) override;
  base::Status RecordRefused(std::span<const RefusedOrder> orders, int64_t now_ms) override;
  base::Result<std::vector<OrderEvent>> EventsAfter(int64_t after, int64_t limit) override;
  base::Result<int64_t> DeliveryCursor(std::string_view receiver) override;
  base::Status SaveDelivery(const DeliveryUpdate& update, int64_t now_ms) override;
  base::Result<std::vector<ParkedEvent>> ParkedEvents(std::string_view receiver,
                                                      int64_t limit) override;
  base::Result<int64_t> RequestRetry(std::string_view receiver) override;

 private:
  explicit MySqlStore(MySqlEndpoint endpoint);
  // Runs body(Connection&) on the connection (connecting first if there is none), with the retry
  // after a stale connection described above. The caller holds mutex_.
  template <typename Body>
  auto Run(const Body& body);

  std::mutex mutex_;  // one call at a time on the one connection
  const MySqlEndpoint endpoint_;
  std::unique_ptr<mysql::Connection> connection_;  // null until connected, and after a loss
};

}  // namespace flashsale::store
