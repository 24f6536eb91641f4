#include "store/mysql/insert_orders.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "base/strings.h"
#include "store/mysql/events.h"
#include "store/records.h"

namespace flashsale::store::mysql {

using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr size_t kMaxIdBytes = 64;        // VARCHAR(64) ids
constexpr size_t kMaxTextBytes = 65'535;  // TEXT

// What the schema cannot hold, refused before anything is written (strict mode would refuse it
// too, but INSERT IGNORE turns such errors into warnings).
base::Status ValidateOrder(const OrderRecord& order) {
  for (const auto& [name, value] :
       {std::pair<std::string_view, std::string_view>{"order id", order.order_id},
        {"activity id", order.activity_id},
        {"user id", order.user_id},
        {"stream id", order.stream_id}}) {
    if (value.size() > kMaxIdBytes) {
      return MakeError(ErrorCode::kInvalidArgument, "order '{}': {} is over {} bytes",
                       order.order_id.substr(0, kMaxIdBytes), name, kMaxIdBytes);
    }
  }
  size_t items_bytes = order.items.empty() ? 0 : order.items.size() - 1;
  for (const auto& item : order.items) items_bytes += item.size();
  if (items_bytes > kMaxTextBytes) {
    return MakeError(ErrorCode::kInvalidArgument, "order '{}': items are over {} bytes",
                     order.order_id, kMaxTextBytes);
  }
  return {};
}

// INSERT IGNORE downgrades every error to a warning, and only a duplicate key may be ignored: any
// other warning (a value truncated, a check failed) is an error, and the transaction rolls back.
base::Status CheckOnlyDuplicatesIgnored(Connection& conn, const Statement& insert,
                                        std::string_view order_id) {
  if (insert.warnings() == 0) return {};
  auto warnings = conn.TextRows("SHOW WARNINGS", "read warnings");
  if (!warnings) return std::move(warnings).error();
  for (const auto& row : *warnings) {  // Level, Code, Message
    if (row.size() < 3 || row[0] == "Note") continue;
    unsigned code = 0;
    std::from_chars(row[1].data(), row[1].data() + row[1].size(), code);
    if (IsDuplicateKey(code)) continue;
    return conn.Fail(fmt::format("insert order '{}'", order_id), code, row[2]);
  }
  return {};
}

// ---- InsertOrders ----
//
// A batch is written in a handful of round trips whatever its size (InsertBatched): one query for
// the ids that exist, one for the committed live orders of the batch's users, and one multi-row
// INSERT IGNORE per chunk; the outcomes are decided in memory, exactly as the checks of the
// row-by-row way would decide them one order after another (an order sees the ones before it in
// its batch, as a statement sees its own transaction's writes). That agreement holds as long as
// no other writer commits a clashing order meanwhile and every value fits its column: then every
// row is inserted, with no warning. Anything else (a concurrent writer's order ignored as a
// duplicate, a value the server refused with a warning) and the transaction is rolled back whole
// and the batch is written the row-by-row way (InsertOneByOne), which tells those cases apart.

constexpr size_t kMaxIdsPerQuery = 1000;
constexpr size_t kMaxRowsPerInsert = 1000;
constexpr size_t kMaxBytesPerInsert = 4 << 20;  // well under the server's max_allowed_packet

const std::string kInsertIgnore =
    fmt::format("INSERT IGNORE INTO orders {} VALUES ", records::kOrderInsertColumns);

// The columns' collation (utf8mb4_bin) is PAD SPACE: trailing spaces do not count when ids are
// compared. In-memory sets of ids compare them the same way.
std::string_view Unpadded(std::string_view id) {
  while (!id.empty() && id.back() == ' ') id.remove_suffix(1);
  return id;
}

bool IsLive(const OrderRecord& order) {
  return order.single_unit && order.state != OrderState::kCancelled;
}

// "prefix (?, ?, ...)" with `count` placeholders, then `suffix`.
std::string WithPlaceholders(std::string_view prefix, size_t count, std::string_view suffix) {
  std::string sql(prefix);
  sql += '(';
  for (size_t i = 0; i < count; ++i) sql += i == 0 ? "?" : ", ?";
  sql += ')';
  sql += suffix;
  return sql;
}

// Statements of one call that differ only in their number of placeholders: all full chunks share
// one, prepared once.
class StatementsBySize {
 public:
  StatementsBySize(Connection& conn, std::string_view what) : conn_(conn), what_(what) {}
  template <typename MakeSql>
  Statement& Get(size_t size, const MakeSql& make_sql) {
    auto& statement = statements_[size];
    if (!statement) statement = std::make_unique<Statement>(conn_, make_sql(size), what_);
    return *statement;
  }

 private:
  Connection& conn_;
  std::string_view what_;
  std::map<size_t, std::unique_ptr<Statement>> statements_;
};

// ---- The batched way, in steps ----

// Ids compared as the columns compare them.
using IdSet = std::unordered_set<std::string>;
// (activity, user) -> the order holding the one live key.
using LiveOrders = std::map<std::pair<std::string, std::string>, std::string>;

// 1. Which ids of the batch exist (committed; READ COMMITTED).
Result<IdSet> FindExisting(Connection& conn, std::span<const OrderRecord> orders) {
  IdSet existing;
  StatementsBySize queries(conn, "check orders");
  const auto sql = [](size_t n) {
    return WithPlaceholders("SELECT order_id FROM orders WHERE order_id IN ", n, "");
  };
  std::vector<Param> params;
  for (size_t start = 0; start < orders.size(); start += kMaxIdsPerQuery) {
    const size_t end = std::min(orders.size(), start + kMaxIdsPerQuery);
    params.clear();
    for (size_t i = start; i < end; ++i) params.emplace_back(orders[i].order_id);
    Statement& query = queries.Get(params.size(), sql);
    if (auto run = query.Execute(params); !run) return run.error();
    for (const Row& row : query.rows()) existing.emplace(Unpadded(row.Text(0)));
  }
  return existing;
}

// 2. Which users of the batch already have a committed live order in the activity, and which
// order that is (a batch is one activity's, in practice: one query per activity and chunk). The
// live order may be the very order of the batch, written by another consumer between the two
// reads: that is a duplicate, not a conflict.
Result<LiveOrders> FindLive(Connection& conn, std::span<const OrderRecord> orders,
                            const IdSet& existing) {
  std::map<std::string_view, std::vector<std::string_view>> users_by_activity;
  for (const OrderRecord& order : orders) {
    if (IsLive(order) && !existing.contains(std::string(Unpadded(order.order_id)))) {
      users_by_activity[order.activity_id].push_back(order.user_id);
    }
  }
  LiveOrders live;
  StatementsBySize queries(conn, "check live orders");
  const auto sql = [](size_t n) {
    return WithPlaceholders(
        "SELECT live_user_id, order_id FROM orders WHERE live_activity_id = ? AND live_user_id IN ",
        n, "");
  };
  std::vector<Param> params;
  for (const auto& [activity, users] : users_by_activity) {
    for (size_t start = 0; start < users.size(); start += kMaxIdsPerQuery) {
      const size_t end = std::min(users.size(), start + kMaxIdsPerQuery);
      params.assign({activity});
      for (size_t i = start; i < end; ++i) params.emplace_back(users[i]);
      Statement& query = queries.Get(end - start, sql);
      if (auto run = query.Execute(params); !run) return run.error();
      for (const Row& row : query.rows()) {
        live.emplace(std::pair(std::string(Unpadded(activity)), std::string(Unpadded(row.Text(0)))),
                     std::string(Unpadded(row.Text(1))));
      }
    }
  }
  return live;
}

struct Plan {
  std::vector<InsertOutcome> outcomes;  // one per order of the batch
  std::vector<size_t> to_insert;        // the indexes of the orders to insert
};

// 3. The outcomes, order by order, as the row-by-row checks would find them (an order sees the
// ones before it in its batch, as a statement sees its own transaction's writes).
Plan PlanOutcomes(std::span<const OrderRecord> orders, const IdSet& existing, LiveOrders live) {
  Plan plan;
  plan.outcomes.reserve(orders.size());
  std::unordered_set<std::string_view> planned_ids;
  for (size_t i = 0; i < orders.size(); ++i) {
    const OrderRecord& order = orders[i];
    const std::string_view id = Unpadded(order.order_id);
    if (planned_ids.contains(id) || existing.contains(std::string(id))) {
      plan.outcomes.push_back(InsertOutcome::kDuplicate);
      continue;
    }
    if (IsLive(order)) {
      // Also an earlier order of this batch: the one live key per user and activity.
      auto [it, fresh] = live.emplace(
          std::pair(std::string(Unpadded(order.activity_id)), std::string(Unpadded(order.user_id))),
          std::string(id));
      if (!fresh) {
        plan.outcomes.push_back(it->second == id ? InsertOutcome::kDuplicate
                                                 : InsertOutcome::kConflict);
        continue;
      }
    }
    planned_ids.insert(id);
    plan.to_insert.push_back(i);
    plan.outcomes.push_back(InsertOutcome::kInserted);
  }
  return plan;
}

// The end of the chunk of `to_insert` that starts at `start`: at most kMaxRowsPerInsert rows and,
// beyond its first row, about kMaxBytesPerInsert.
size_t ChunkEnd(std::span<const OrderRecord> orders, std::span<const size_t> to_insert,
                std::span<const std::string> items, size_t start) {
  size_t end = start;
  size_t bytes = 0;
  while (end < to_insert.size() && end - start < kMaxRowsPerInsert &&
         (end == start || bytes < kMaxBytesPerInsert)) {
    const OrderRecord& order = orders[to_insert[end]];
    bytes += order.order_id.size() + order.activity_id.size() + order.user_id.size() +
             items[end].size() + order.stream_id.size() + 64;
    ++end;
  }
  return end;
}

// 4. The inserts, in chunks, one multi-row INSERT IGNORE each. False unless every row went in
// without a warning.
Result<bool> InsertChunks(Connection& conn, std::span<const OrderRecord> orders,
                          std::span<const size_t> to_insert, int64_t now_ms) {
  std::vector<std::string> items(to_insert.size());
  for (size_t k = 0; k < to_insert.size(); ++k) {
    items[k] = base::JoinWords(orders[to_insert[k]].items);
  }
  StatementsBySize inserts(conn, "insert orders");
  const auto sql = [](size_t rows) {
    std::string text(kInsertIgnore);
    for (size_t r = 0; r < rows; ++r) {
      if (r > 0) text += ", ";
      text += records::kOrderInsertRow;
    }
    return text;
  };
  std::vector<Param> params;
  for (size_t start = 0; start < to_insert.size();) {
    const size_t end = ChunkEnd(orders, to_insert, items, start);
    params.clear();
    for (size_t k = start; k < end; ++k) {
      const auto values = records::OrderInsertValues(orders[to_insert[k]], items[k], now_ms);
      params.insert(params.end(), values.begin(), values.end());
    }
    Statement& insert = inserts.Get(end - start, sql);
    if (auto run = insert.Execute(params); !run) return run.error();
    if (insert.warnings() != 0 || insert.affected_rows() != end - start) return false;
    start = end;
  }
  return true;
}

// The outcomes, or nothing when the batch did not go in cleanly (the caller rolls back and goes
// row by row). Runs inside the caller's transaction.
Result<std::optional<std::vector<InsertOutcome>>> InsertBatched(Connection& conn,
                                                                std::span<const OrderRecord> orders,
                                                                int64_t now_ms) {
  auto existing = FindExisting(conn, orders);
  if (!existing) return std::move(existing).error();
  auto live = FindLive(conn, orders, *existing);
  if (!live) return std::move(live).error();
  Plan plan = PlanOutcomes(orders, *existing, std::move(*live));
  auto clean = InsertChunks(conn, orders, plan.to_insert, now_ms);
  if (!clean) return std::move(clean).error();
  if (!*clean) return std::optional<std::vector<InsertOutcome>>();
  return std::optional<std::vector<InsertOutcome>>(std::move(plan.outcomes));
}

// The row-by-row way: per order, an existence check by id, a check for a committed live order of
// the user, the insert, and when it was ignored, the existence check again. Runs inside the
// caller's transaction.
Result<std::vector<InsertOutcome>> InsertOneByOne(Connection& conn,
                                                  std::span<const OrderRecord> orders,
                                                  int64_t now_ms) {
  Statement exists(conn, "SELECT 1 FROM orders WHERE order_id = ?", "check order");
  Statement live(conn,
                 "SELECT order_id FROM orders WHERE live_activity_id = ? AND live_user_id = ?",
                 "check live order");
  Statement insert(conn, std::string(kInsertIgnore) + std::string(records::kOrderInsertRow),
                   "insert order");
  std::vector<InsertOutcome> outcomes;
  outcomes.reserve(orders.size());
  for (const OrderRecord& order : orders) {
    if (auto run = exists.Execute({order.order_id}); !run) return run.error();
    if (!exists.rows().empty()) {
      outcomes.push_back(InsertOutcome::kDuplicate);
      continue;
    }
    // A committed live order of this user is a conflict without trying the insert: a clash
    // found by the insert takes a next-key lock on the unique key, and two writers holding such
    // locks deadlock as soon as either inserts into the gap before it (where every order
    // without a live key goes when the clash is with the smallest key).
    if (IsLive(order)) {
      if (auto run = live.Execute({order.activity_id, order.user_id}); !run) return run.error();
      if (!live.rows().empty()) {
        // This very order, committed by another writer since the existence check: a duplicate.
        const bool same = Unpadded(live.rows()[0].Text(0)) == Unpadded(order.order_id);
        outcomes.push_back(same ? InsertOutcome::kDuplicate : InsertOutcome::kConflict);
        continue;
      }
    }
    const std::string items = base::JoinWords(order.items);
    if (auto run = insert.Execute(records::OrderInsertValues(order, items, now_ms)); !run) {
      return run.error();
    }
    if (auto only = CheckOnlyDuplicatesIgnored(conn, insert, order.order_id); !only) {
      return only.error();
    }
    if (insert.affected_rows() == 1) {
      outcomes.push_back(InsertOutcome::kInserted);
      continue;
    }
    // Ignored. Either another writer committed this very order after the checks above (its
    // insert held ours until then; READ COMMITTED lets this second check see it), or the
    // one-live-order-per-user key refused a different order of the same user, committed since.
    if (auto run = exists.Execute({order.order_id}); !run) return run.error();
    outcomes.push_back(exists.rows().empty() ? InsertOutcome::kConflict
                                             : InsertOutcome::kDuplicate);
  }
  return outcomes;
}

// Raises an activity's write mark to (epoch, seq) unless it is at that or higher (epoch first,
// then seq). `seq` is set from the old epoch and seq, and `epoch` reads neither, so the result is
// the same whether the server assigns left to right (MySQL) or all at once (MariaDB's
// SIMULTANEOUS_ASSIGNMENT). The parameters: RaiseMarkParams.
constexpr std::string_view kRaiseWrittenMark =
    "INSERT INTO activity_writes (activity_id, epoch, seq) VALUES (?, ?, ?) ON DUPLICATE KEY "
    "UPDATE seq = IF(? > epoch OR (? = epoch AND ? > seq), ?, seq), epoch = GREATEST(epoch, ?)";

std::array<Param, 8> RaiseMarkParams(const records::WrittenMark& mark) {
  const int64_t epoch = mark.written.epoch;
  const int64_t seq = mark.written.seq;
  return {mark.activity_id, epoch, seq, epoch, epoch, seq, seq, epoch};
}

}  // namespace

base::Status ValidateOrders(std::span<const OrderRecord> orders) {
  for (const OrderRecord& order : orders) {
    if (auto valid = ValidateOrder(order); !valid) return valid;
  }
  return {};
}

Result<std::vector<InsertOutcome>> InsertOrders(Connection& conn,
                                                std::span<const OrderRecord> orders, int64_t now_ms,
                                                std::optional<int64_t> fence) {
  auto marks = records::HighestWritten(orders);
  if (!marks) return std::move(marks).error();
  // The events of the orders inserted, last in the transaction: the events' lock row is held for
  // the shortest time.
  const auto write_events = [&](const std::vector<InsertOutcome>& outcomes) -> base::Status {
    std::vector<records::EventDraft> events;
    for (size_t i = 0; i < orders.size(); ++i) {
      if (outcomes[i] != InsertOutcome::kInserted) continue;
      events.push_back(
          {orders[i].order_id, orders[i].activity_id, records::InsertedEventState(orders[i])});
    }
    return WriteEvents(conn, events, now_ms);
  };
  const auto check_fence = [&]() -> base::Status {
    if (!fence) return {};
    Statement read(conn, "SELECT epoch FROM fence WHERE id = 1 LOCK IN SHARE MODE", "read fence");
    if (auto run = read.Execute(std::span<const Param>()); !run) return run.error();
    const int64_t epoch = read.rows().empty() ? 0 : read.rows()[0].Int(0);
    if (epoch != *fence) {
      return MakeError(ErrorCode::kFailedPrecondition, base::ErrorDetail::kFenced,
                       "fenced: the batch was read under epoch {}, the record is at {}", *fence,
                       epoch);
    }
    return {};
  };
  // Each activity's write mark, raised (or left, never lowered) in the transaction that writes
  // the orders, after the fence check; one statement per activity of the batch (one, in
  // practice), prepared once per call.
  Statement raise(conn, std::string(kRaiseWrittenMark), "raise write mark");
  const auto raise_marks = [&]() -> base::Status {
    for (const records::WrittenMark& mark : *marks) {
      if (auto run = raise.Execute(RaiseMarkParams(mark)); !run) return run;
    }
    return {};
  };
  {
    Transaction tx(conn);
    if (!tx.status()) return tx.status().error();
    if (auto fenced = check_fence(); !fenced) return fenced.error();
    if (auto raised = raise_marks(); !raised) return raised.error();
    auto batched = InsertBatched(conn, orders, now_ms);
    if (!batched) return std::move(batched).error();
    if (*batched) {
      if (auto written = write_events(**batched); !written) return written.error();
      if (auto commit = tx.Commit(); !commit) return commit.error();
      return std::move(**batched);
    }
    // Not clean: rolled back whole, locks and all (a failed rollback must not be followed by
    // START TRANSACTION, which would commit what it failed to undo), and done row by row.
    if (auto rolled = conn.Exec("ROLLBACK", "rollback"); !rolled) return rolled.error();
  }
  Transaction tx(conn);
  if (!tx.status()) return tx.status().error();
  if (auto fenced = check_fence(); !fenced) return fenced.error();
  if (auto raised = raise_marks(); !raised) return raised.error();
  auto outcomes = InsertOneByOne(conn, orders, now_ms);
  if (!outcomes) return outcomes;
  if (auto written = write_events(*outcomes); !written) return written.error();
  if (auto commit = tx.Commit(); !commit) return commit.error();
  return outcomes;
}

}  // namespace flashsale::store::mysql
