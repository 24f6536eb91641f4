#include "store/mysql/store.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <limits>
#include <random>
#include <thread>
#include <type_traits>

#include "store/mysql/connection.h"
#include "store/mysql/events.h"
#include "store/mysql/insert_orders.h"
#include "store/mysql/schema.h"
#include "store/records.h"

namespace flashsale::store {

using base::ErrorCode;
using base::MakeError;
using base::Result;
using mysql::Connection;
using mysql::Row;
using mysql::Statement;
using mysql::Transaction;

namespace {

constexpr int kDeadlockAttempts = 8;  // runs of a call whose transaction deadlocks

// The pause before run `attempt` (2, 3, ...) of a deadlocked call: growing, with a random part, so
// that two writers that conflicted (on Galera: in certification, which fails the loser at commit,
// after all its work) do not meet again at the same moment. At most ~0.5 s over all the runs.
std::chrono::milliseconds DeadlockPause(int attempt) {
  thread_local std::minstd_rand jitter{std::random_device{}()};
  return std::chrono::milliseconds(5 * attempt + static_cast<int>(jitter() % 10));
}

// The activity, its row locked until the transaction ends when `for_update` (a read-modify-write
// must not interleave with another's: SQLite gets that from BEGIN IMMEDIATE).
Result<ActivityRecord> GetActivityOn(Connection& conn, std::string_view id, bool with_items,
                                     bool for_update) {
  Statement query(
      conn,
      std::string(records::kSelectActivity) + " WHERE id = ?" + (for_update ? " FOR UPDATE" : ""),
      "get activity");
  if (auto run = query.Execute({id}); !run) return run.error();
  if (query.rows().empty()) return records::NoActivity(id);
  ActivityRecord record = records::ReadActivity(query.rows().front());
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
  Statement insert(conn, std::string(records::kInsertItem), "insert item");
  for (const auto& item : items) {
    if (auto run = insert.Execute({activity_id, item, now_ms}); !run) {
      if (run.error().code == ErrorCode::kAlreadyExists) {
        return records::ItemExists(activity_id, item);
      }
      return run;
    }
  }
  return {};
}

// The activity as the transaction wrote it, then the commit: read inside the transaction, so that
// once COMMIT succeeds nothing is left that could fail.
Result<ActivityRecord> ReadBackAndCommit(Connection& conn, Transaction& tx, std::string_view id,
                                         bool with_items) {
  auto record = GetActivityOn(conn, id, with_items, false);
  if (!record) return record;
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return record;
}

// A read-modify-write of activity `id` in one transaction: its row locked (FOR UPDATE) from the
// read to the commit, so that it does not interleave with another's (SQLite gets that from BEGIN
// IMMEDIATE); `change(current)` writes; the activity as written is returned.
template <typename Change>
Result<ActivityRecord> ChangeActivity(Connection& conn, std::string_view id, const Change& change) {
  Transaction tx(conn);
  if (!tx.status()) return tx.status().error();
  auto current = GetActivityOn(conn, id, false, true);
  if (!current) return current;
  if (auto changed = change(*current); !changed) return changed.error();
  return ReadBackAndCommit(conn, tx, id, false);
}

// The rows of `query` as records.
template <typename Record>
std::vector<Record> ReadAll(const Statement& query, Record (*read)(const Row&)) {
  std::vector<Record> records;
  records.reserve(query.rows().size());
  for (const Row& row : query.rows()) records.push_back(read(row));
  return records;
}

}  // namespace

MySqlStore::MySqlStore(MySqlEndpoint endpoint) : endpoint_(std::move(endpoint)) {}

MySqlStore::~MySqlStore() = default;

Result<std::unique_ptr<MySqlStore>> MySqlStore::Open(const std::string& url) {
  auto endpoint = ParseMySqlUrl(url);
  if (!endpoint) return std::move(endpoint).error();
  mysql::InitLibrary();
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
    if (!result.ok() && connection_->deadlocked() && ++deadlocks < kDeadlockAttempts) {
      std::this_thread::sleep_for(DeadlockPause(deadlocks + 1));
      continue;
    }
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
  return Run([&](Connection& conn) { return mysql::Migrate(conn, Describe()); });
}

Result<int> MySqlStore::SchemaVersion() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) { return mysql::SchemaVersion(conn); });
}

base::Status MySqlStore::Ping() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) { return conn.Ping(); });
}

Result<std::string> MySqlStore::TlsCipher() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::string> {
    auto rows = conn.TextRows("SHOW SESSION STATUS LIKE 'Ssl_cipher'", "read the TLS cipher");
    if (!rows) return std::move(rows).error();
    if (rows->size() != 1 || rows->front().size() != 2) return std::string();
    return rows->front()[1];
  });
}

Result<std::vector<ActivityRecord>> MySqlStore::ListActivities() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<ActivityRecord>> {
    Statement query(conn, std::string(records::kSelectActivity) + " ORDER BY created_ms, id",
                    "list activities");
    if (auto run = query.Execute({}); !run) return run.error();
    return ReadAll(query, &records::ReadActivity<Row>);
  });
}

Result<ActivityRecord> MySqlStore::GetActivity(std::string_view id, bool with_items) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) { return GetActivityOn(conn, id, with_items, false); });
}

Result<ActivityRecord> MySqlStore::CreateActivity(const core::Activity& a, int64_t now_ms) {
  if (auto valid = core::Validate(a); !valid) return valid.error();
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<ActivityRecord> {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    Statement insert(conn, std::string(records::kInsertActivity), "create activity");
    const std::string lottery = EncodeLottery(a.lottery);
    const std::string webhooks = records::JoinWebhookUrls(a.webhook_urls);
    const std::string room = core::EncodeWaitingRoom(a.waiting_room);
    if (auto run =
            insert.Execute(records::ActivityInsertValues(a, lottery, webhooks, room, now_ms));
        !run) {
      if (run.error().code == ErrorCode::kAlreadyExists) return records::ActivityExists(a.id);
      return run.error();
    }
    if (auto items = InsertItems(conn, a.id, a.items, now_ms); !items) return items.error();
    return ReadBackAndCommit(conn, tx, a.id, true);
  });
}

Result<ActivityRecord> MySqlStore::UpdateActivity(std::string_view id, const ActivityUpdate& update,
                                                  int64_t now_ms) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) {
    return ChangeActivity(conn, id, [&](const ActivityRecord& current) -> base::Status {
      auto merged = records::MergeUpdate(current, update);
      if (!merged) return std::move(merged).error();
      Statement write(conn, std::string(records::kUpdateActivity), "update activity");
      const std::string webhooks = records::JoinWebhookUrls(merged->webhook_urls);
      const std::string room = core::EncodeWaitingRoom(merged->waiting_room);
      return write.Execute(records::ActivityUpdateValues(*merged, webhooks, room, id, now_ms));
    });
  });
}

Result<ActivityRecord> MySqlStore::AddStock(std::string_view id, int64_t units,
                                            std::span<const std::string> items, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) {
    return ChangeActivity(conn, id, [&](const ActivityRecord& current) -> base::Status {
      if (auto valid = records::CheckAddedStock(id, current, units, items); !valid) return valid;
      if (auto inserted = InsertItems(conn, id, items, now_ms); !inserted) return inserted;
      Statement write(conn, std::string(records::kAddStock), "add stock");
      return write.Execute({units, now_ms, id});
    });
  });
}

base::Status MySqlStore::DeleteActivity(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto deleted = Run([&](Connection& conn) -> Result<bool> {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    auto current = GetActivityOn(conn, id, false, true);  // the row locked until the commit
    if (!current) return std::move(current).error();
    Statement count(conn, std::string(records::kCountActivityOrders), "count orders");
    if (auto run = count.Execute({id}); !run) return run.error();
    const int64_t orders = count.rows().at(0).Int(0);
    if (orders > 0) return records::HasOrders(id, orders);
    Statement items(conn, std::string(records::kDeleteItems), "delete items");
    if (auto run = items.Execute({id}); !run) return run.error();
    Statement activity(conn, std::string(records::kDeleteActivity), "delete activity");
    if (auto run = activity.Execute({id}); !run) return run.error();
    Statement mark(conn, std::string(records::kDeleteWrittenMark), "delete write mark");
    if (auto run = mark.Execute({id}); !run) return run.error();
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return true;
  });
  if (!deleted) return std::move(deleted).error();
  return {};
}

Result<std::vector<InsertOutcome>> MySqlStore::InsertOrders(std::span<const OrderRecord> orders,
                                                            int64_t now_ms,
                                                            std::optional<int64_t> fence) {
  if (auto valid = mysql::ValidateOrders(orders); !valid) return valid.error();
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) { return mysql::InsertOrders(conn, orders, now_ms, fence); });
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
    if (auto run = read.Execute(std::span<const mysql::Param>()); !run) return run.error();
    if (read.rows().empty()) return MakeError(ErrorCode::kInternal, "no fence row");
    const int64_t epoch = read.rows()[0].Int(0);
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return epoch;
  });
}

Result<int64_t> MySqlStore::ReadFence() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<int64_t> {
    Statement read(conn, "SELECT epoch FROM fence WHERE id = 1", "read fence");
    if (auto run = read.Execute(std::span<const mysql::Param>()); !run) return run.error();
    return read.rows().empty() ? int64_t{0} : read.rows()[0].Int(0);
  });
}

Result<std::vector<std::pair<std::string, core::WriteSeq>>> MySqlStore::WrittenSeqs() {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<std::pair<std::string, core::WriteSeq>>> {
    Statement query(conn, std::string(records::kSelectWrittenSeqs), "read write marks");
    if (auto run = query.Execute(std::span<const mysql::Param>()); !run) return run.error();
    std::vector<std::pair<std::string, core::WriteSeq>> marks;
    marks.reserve(query.rows().size());
    for (const Row& row : query.rows()) {
      marks.emplace_back(row.Text(0), core::WriteSeq{row.Int(1), row.Int(2)});
    }
    return marks;
  });
}

base::Status MySqlStore::FlagCompensation(std::span<const std::string> order_ids, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> base::Status {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    Statement flag(conn, std::string(records::kFlagCompensation), "flag compensation");
    Statement activity(conn, std::string(records::kActivityOfOrder), "read order");
    std::vector<std::string> activities;  // of the orders flagged now, for their events
    std::vector<std::string_view> flagged;
    for (const auto& id : order_ids) {
      if (auto run = flag.Execute({id}); !run) return run.error();
      if (flag.affected_rows() != 1) continue;
      if (auto run = activity.Execute({id}); !run) return run.error();
      if (activity.rows().empty()) continue;
      activities.push_back(activity.rows()[0].Text(0));
      flagged.push_back(id);
    }
    std::vector<records::EventDraft> events;
    for (size_t i = 0; i < flagged.size(); ++i) {
      events.push_back({flagged[i], activities[i], kEventCompensationDue});
    }
    if (auto written = mysql::WriteEvents(conn, events, now_ms); !written) return written;
    return tx.Commit();
  });
}

Result<OrderRecord> MySqlStore::GetOrder(std::string_view order_id) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<OrderRecord> {
    Statement query(conn, std::string(records::kSelectOrder) + " WHERE order_id = ?", "get order");
    if (auto run = query.Execute({order_id}); !run) return run.error();
    if (query.rows().empty()) return records::NoOrder(order_id);
    return records::ReadOrder(query.rows().front());
  });
}

Result<std::vector<OrderRecord>> MySqlStore::OrdersOfUser(std::string_view user_id, int64_t limit) {
  const int64_t bounded = limit < 0 ? std::numeric_limits<int64_t>::max() : limit;
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<OrderRecord>> {
    Statement query(conn,
                    fmt::format("{}{}", records::kSelectOrder, records::kWhereUserNewestFirst),
                    "orders of user");
    if (auto run = query.Execute({user_id, bounded}); !run) return run.error();
    return ReadAll(query, &records::ReadOrder<Row>);
  });
}

Result<std::vector<OrderRecord>> MySqlStore::CancelUnpaid(std::string_view activity_id,
                                                          int64_t created_before_ms, int64_t limit,
                                                          int64_t now_ms) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<OrderRecord>> {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    Statement query(
        conn, fmt::format("{}{} FOR UPDATE", records::kSelectOrder, records::kWhereUnpaidBefore),
        "unpaid orders");
    if (auto run = query.Execute({activity_id, created_before_ms, limit}); !run) {
      return run.error();
    }
    std::vector<OrderRecord> cancelled = ReadAll(query, &records::ReadOrder<Row>);
    Statement cancel(conn, std::string(records::kCancelReserved), "cancel order");
    std::vector<records::EventDraft> events;
    for (OrderRecord& order : cancelled) {
      if (auto run = cancel.Execute({now_ms, order.order_id}); !run) return run.error();
      records::MarkCancelled(order, now_ms);
      events.push_back({order.order_id, order.activity_id, kEventCancelled});
    }
    if (auto written = mysql::WriteEvents(conn, events, now_ms); !written) return written.error();
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return cancelled;
  });
}

Result<PayOutcome> MySqlStore::PayOrder(std::string_view order_id, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<PayOutcome> {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    Statement query(conn, "SELECT state, activity_id FROM orders WHERE order_id = ? FOR UPDATE",
                    "read order");
    if (auto run = query.Execute({order_id}); !run) return run.error();
    if (query.rows().empty()) return records::NoOrder(order_id);
    const PayOutcome outcome = records::PayOutcomeFor(OrderStateFrom(query.rows()[0].Text(0)));
    const std::string activity_id = query.rows()[0].Text(1);
    std::vector<records::EventDraft> events;
    if (outcome == PayOutcome::kPaid) {
      Statement pay(conn, std::string(records::kMarkPaid), "pay order");
      if (auto run = pay.Execute({now_ms, order_id}); !run) return run.error();
      events.push_back({order_id, activity_id, kEventPaid});
    } else if (outcome == PayOutcome::kRefused) {
      Statement flag(conn, std::string(records::kFlagRefund), "flag refund");
      if (auto run = flag.Execute({order_id}); !run) return run.error();
      if (flag.affected_rows() == 1) events.push_back({order_id, activity_id, kEventRefundDue});
    }
    if (auto written = mysql::WriteEvents(conn, events, now_ms); !written) return written.error();
    if (auto commit = tx.Commit(); !commit) return commit.error();
    return outcome;
  });
}

Result<std::vector<OrderRecord>> MySqlStore::OrdersOfActivity(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<OrderRecord>> {
    Statement query(conn,
                    fmt::format("{}{}", records::kSelectOrder, records::kWhereActivityOldestFirst),
                    "orders of activity");
    if (auto run = query.Execute({activity_id}); !run) return run.error();
    return ReadAll(query, &records::ReadOrder<Row>);
  });
}

Result<OrderPage> MySqlStore::OrdersPage(std::string_view activity_id, std::string_view cursor,
                                         int64_t limit, OrderStates states) {
  if (auto valid = records::CheckOrdersPage(limit, states); !valid) return valid.error();
  auto after = records::DecodeOrderCursor(activity_id, cursor);
  if (!after) return std::move(after).error();
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<OrderPage> {
    Statement query(conn, fmt::format("{}{}", records::kSelectOrder, records::kWhereActivityPage),
                    "a page of orders");
    if (auto run = query.Execute(
            {activity_id, std::string_view(*after), records::StatesMask(states), limit + 1});
        !run) {
      return run.error();
    }
    return records::PageOf(activity_id, ReadAll(query, &records::ReadOrder<Row>), limit);
  });
}

Result<OrderCounts> MySqlStore::CountOrders(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<OrderCounts> {
    Statement query(conn, std::string(records::kCountOrders), "count orders");
    if (auto run = query.Execute({activity_id}); !run) return run.error();
    const Row& row = query.rows().at(0);
    return OrderCounts{row.Int(0), row.Int(1), row.Int(2)};
  });
}

Result<OrderReport> MySqlStore::ReportOrders(std::string_view activity_id) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<OrderReport> {
    OrderReport report;
    Statement span(conn, std::string(records::kReportSpan), "report orders");
    if (auto run = span.Execute({activity_id}); !run) return run.error();
    const Row& row = span.rows().at(0);
    report.orders = row.Int(0);
    report.first_ms = row.Int(1);
    report.last_ms = row.Int(2);
    report.refund_due = row.Int(3);
    report.compensation_due = row.Int(4);
    report.step_s = records::ReportStepSeconds(report.first_ms, report.last_ms);
    Statement buckets(conn, records::ReportBucketsSql(report.first_ms, report.step_s),
                      "report orders");
    if (auto run = buckets.Execute({activity_id}); !run) return run.error();
    for (const Row& bucket : buckets.rows()) {
      report.buckets.push_back({bucket.Int(0) / 1000, bucket.Int(1), bucket.Int(2)});
    }
    Statement states(conn, std::string(records::kReportStates), "report orders");
    if (auto run = states.Execute({activity_id}); !run) return run.error();
    for (const Row& state : states.rows()) {
      report.states.push_back({state.Text(0), state.Int(1), state.Int(2)});
    }
    Statement prizes(conn, std::string(records::kReportPrizes), "report orders");
    if (auto run = prizes.Execute({activity_id}); !run) return run.error();
    for (const Row& prize : prizes.rows()) report.prizes.emplace_back(prize.Text(0), prize.Int(1));
    Statement refused(conn, std::string(records::kReportRefused), "report orders");
    if (auto run = refused.Execute({activity_id}); !run) return run.error();
    report.refused = refused.rows().at(0).Int(0);
    Statement answers(conn, std::string(records::kReportAnswers), "report orders");
    if (auto run = answers.Execute({activity_id}); !run) return run.error();
    for (const Row& answer : answers.rows()) {
      report.answers.emplace_back(answer.Text(0), answer.Int(1));
    }
    return report;
  });
}

base::Status MySqlStore::AddAnswers(std::span<const AnswerCount> counts) {
  if (auto valid = records::CheckAnswers(counts); !valid) return valid;
  if (counts.empty()) return {};
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> base::Status {
    Transaction tx(conn);
    if (!tx.status()) return tx.status();
    Statement add(conn, std::string(records::kAddAnswerMysql), "add answers");
    for (const AnswerCount& answer : counts) {
      if (auto run = add.Execute({answer.activity_id, answer.word, answer.count}); !run) return run;
    }
    return tx.Commit();
  });
}

Result<OrderAudit> MySqlStore::AuditOrders(std::string_view activity_id, int64_t per_user_limit) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<OrderAudit> {
    OrderAudit audit;
    Statement over(conn, std::string(records::kUsersOverLimit), "audit orders");
    if (auto run = over.Execute({activity_id, per_user_limit}); !run) return run.error();
    for (const Row& row : over.rows()) audit.users_over_limit.emplace_back(row.Text(0), row.Int(1));
    Statement duplicates(conn, std::string(records::kDuplicateIntents), "audit orders");
    if (auto run = duplicates.Execute({activity_id}); !run) return run.error();
    audit.duplicate_intents = duplicates.rows().at(0).Int(0);
    return audit;
  });
}

base::Status MySqlStore::RecordRefused(std::span<const RefusedOrder> orders, int64_t now_ms) {
  if (auto valid = records::CheckRefused(orders); !valid) return valid;
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> base::Status {
    Transaction tx(conn);
    if (!tx.status()) return tx.status();
    // An order refused before (dead-lettered again after a retry) has its event.
    Statement exists(conn, std::string(records::kEventExists), "read event");
    std::vector<records::EventDraft> events;
    for (const RefusedOrder& order : orders) {
      if (auto run = exists.Execute({records::EventId(order.order_id, kEventRefused)}); !run) {
        return run;
      }
      if (!exists.rows().empty()) continue;
      events.push_back({order.order_id, order.activity_id, kEventRefused});
    }
    if (auto written = mysql::WriteEvents(conn, events, now_ms); !written) return written;
    return tx.Commit();
  });
}

Result<std::vector<OrderEvent>> MySqlStore::EventsAfter(int64_t after, int64_t limit) {
  if (auto valid = records::CheckEventsRead(after, limit); !valid) return valid.error();
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<OrderEvent>> {
    Statement query(conn, std::string(records::kSelectEventsAfter), "read events");
    if (auto run = query.Execute({after, limit}); !run) return run.error();
    return ReadAll(query, &records::ReadEvent<Row>);
  });
}

Result<int64_t> MySqlStore::DeliveryCursor(std::string_view receiver) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<int64_t> {
    Statement query(conn, std::string(records::kSelectDeliveryCursor), "read cursor");
    if (auto run = query.Execute({records::CutTo(receiver, records::kMaxReceiverBytes)}); !run) {
      return run.error();
    }
    return query.rows().empty() ? int64_t{0} : query.rows()[0].Int(0);
  });
}

base::Status MySqlStore::SaveDelivery(const DeliveryUpdate& update, int64_t now_ms) {
  const std::string_view receiver = records::CutTo(update.receiver, records::kMaxReceiverBytes);
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> base::Status {
    Transaction tx(conn);
    if (!tx.status()) return tx.status();
    Statement cursor(conn,
                     "INSERT INTO webhook_cursors (receiver, after_seq, updated_ms) VALUES (?, ?, "
                     "?) ON DUPLICATE KEY UPDATE after_seq = GREATEST(after_seq, "
                     "VALUES(after_seq)), updated_ms = VALUES(updated_ms)",
                     "save cursor");
    if (auto run = cursor.Execute({receiver, update.cursor, now_ms}); !run) return run;
    Statement park(conn,
                   "INSERT INTO webhook_parked (receiver, seq, activity_id, attempts, last_error, "
                   "parked_ms, retry) VALUES (?, ?, ?, ?, ?, ?, 0) ON DUPLICATE KEY UPDATE "
                   "attempts = attempts + VALUES(attempts), last_error = VALUES(last_error), "
                   "parked_ms = VALUES(parked_ms), retry = 0",
                   "park event");
    for (const ParkedEvent& parked : update.parked) {
      if (auto run = park.Execute(
              {receiver, parked.event.seq, std::string_view(parked.event.activity_id),
               parked.attempts, records::CutTo(parked.last_error, records::kMaxDeliveryErrorBytes),
               now_ms});
          !run) {
        return run;
      }
    }
    Statement unpark(conn, std::string(records::kUnpark), "unpark event");
    for (int64_t seq : update.delivered) {
      if (auto run = unpark.Execute({receiver, seq}); !run) return run;
    }
    return tx.Commit();
  });
}

Result<std::vector<ParkedEvent>> MySqlStore::ParkedEvents(std::string_view receiver,
                                                          int64_t limit) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<std::vector<ParkedEvent>> {
    Statement query(conn, std::string(records::kSelectParked), "parked events");
    if (auto run = query.Execute({receiver, receiver, limit}); !run) return run.error();
    return ReadAll(query, &records::ReadParked<Row>);
  });
}

Result<int64_t> MySqlStore::RequestRetry(std::string_view receiver) {
  std::lock_guard lock(mutex_);
  return Run([&](Connection& conn) -> Result<int64_t> {
    Statement update(conn, std::string(records::kRequestRetry), "request retry");
    if (auto run = update.Execute({receiver, receiver}); !run) return run.error();
    return static_cast<int64_t>(update.affected_rows());
  });
}

}  // namespace flashsale::store
