#pragma once
// The embedded default store: one SQLite file in WAL mode (readers never block the writer), with a
// busy timeout so a locked database is an error after a bounded wait, never a hang.

#include <memory>
#include <mutex>
#include <string>

#include "store/records.h"
#include "store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace flashsale::store {

class SqliteStore final : public Store {
 public:
  // Opens (creating if needed) the database file; call Migrate() before use.
  static base::Result<std::unique_ptr<SqliteStore>> Open(const std::string& path);
  ~SqliteStore() override;

  base::Status Migrate() override;
  base::Result<int> SchemaVersion() override;
  base::Status Ping() override;
  std::string Describe() const override { return "sqlite:" + path_; }

  base::Result<std::vector<ActivityRecord>> ListActivities() override;
  base::Result<ActivityRecord> GetActivity(std::string_view id, bool with_items) override;
  base::Result<ActivityRecord> CreateActivity(const core::Activity& activity,
                                              int64_t now_ms) override;
  base::Result<ActivityRecord> UpdateActivity(std::string_view id, const ActivityUpdate& update,
                                              int64_t now_ms) override;
  base::Result<ActivityRecord> AddStock(std::string_view id, int64_t units,
                                        std::span<const std::string> items,
                                        int64_t now_ms) override;
  base::Status DeleteActivity(std::string_view id) override;
  using Store::InsertOrders;
  base::Result<std::vector<InsertOutcome>> InsertOrders(std::span<const OrderRecord> orders,
                                                        int64_t now_ms,
                                                        std::optional<int64_t> fence) override;
  base::Result<int64_t> AdvanceFence() override;
  base::Result<int64_t> ReadFence() override;
  base::Result<std::vector<std::pair<std::string, core::WriteSeq>>> WrittenSeqs() override;
  base::Status FlagCompensation(std::span<const std::string> order_ids, int64_t now_ms) override;
  base::Result<OrderRecord> GetOrder(std::string_view order_id) override;
  base::Result<std::vector<OrderRecord>> OrdersOfUser(std::string_view user_id,
                                                      int64_t limit) override;
  base::Result<OrderCounts> CountOrders(std::string_view activity_id) override;
  base::Result<OrderReport> ReportOrders(std::string_view activity_id) override;
  base::Status AddAnswers(std::span<const AnswerCount> counts) override;
  base::Result<std::vector<OrderRecord>> OrdersOfActivity(std::string_view activity_id) override;
  base::Result<OrderPage> OrdersPage(std::string_view activity_id, std::string_view cursor,
                                     int64_t limit, OrderStates states) override;
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
  base::Result<OrderAudit> AuditOrders(std::string_view activity_id,
                                       int64_t per_user_limit) override;

 private:
  SqliteStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  base::Result<ActivityRecord> GetLocked(std::string_view id, bool with_items);
  // Writes the events of the caller's transaction (the caller holds mutex_ and the transaction).
  base::Status WriteEvents(std::span<const records::EventDraft> events, int64_t now_ms);

  std::mutex mutex_;  // one statement at a time on the one connection
  sqlite3* db_;
  std::string path_;
  // InsertOrders' statements, prepared on first use and kept (finalized in the destructor).
  sqlite3_stmt* read_fence_ = nullptr;
  sqlite3_stmt* insert_order_ = nullptr;
  sqlite3_stmt* order_exists_ = nullptr;
  sqlite3_stmt* raise_written_ = nullptr;
  sqlite3_stmt* bump_event_seq_ = nullptr;  // WriteEvents' statements, kept alike
  sqlite3_stmt* read_event_seq_ = nullptr;
  sqlite3_stmt* insert_event_ = nullptr;
};

}  // namespace flashsale::store
