#pragma once
// The record's rules, stated once for every backend: the column lists and the SQL both dialects
// run alike, how a row becomes an ActivityRecord or an OrderRecord, how an update merges into an
// activity, what added stock must satisfy, and the errors a caller sees. A backend keeps only its
// dialect (schema, locking, batched writes) and its driver, and calls these.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "base/strings.h"
#include "store/store.h"

namespace flashsale::store::records {

// A value bound to a `?` placeholder, in either driver.
using SqlValue = std::variant<int64_t, double, std::string_view>;

// ---- Activities ----

inline constexpr std::string_view kSelectActivity =
    "SELECT id, title, kind, start_ms, end_ms, per_user_limit, open, total_units, user_rate, "
    "user_burst, address_rate, address_burst, version, created_ms, updated_ms, lottery, "
    "payment_window_ms, webhook_urls, waiting_room FROM activities";

// The values: ActivityInsertValues.
inline constexpr std::string_view kInsertActivity =
    "INSERT INTO activities (id, title, kind, start_ms, end_ms, per_user_limit, open, total_units, "
    "user_rate, user_burst, address_rate, address_burst, version, created_ms, updated_ms, lottery, "
    "payment_window_ms, webhook_urls, waiting_room) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, "
    "?, ?, ?, ?, ?, ?)";

// The values: ActivityUpdateValues.
inline constexpr std::string_view kUpdateActivity =
    "UPDATE activities SET title = ?, start_ms = ?, end_ms = ?, per_user_limit = ?, open = ?, "
    "user_rate = ?, user_burst = ?, address_rate = ?, address_burst = ?, payment_window_ms = ?, "
    "webhook_urls = ?, waiting_room = ?, version = version + 1, updated_ms = ? WHERE id = ?";

// ? units, ? now_ms, ? id.
inline constexpr std::string_view kAddStock =
    "UPDATE activities SET total_units = total_units + ?, version = version + 1, updated_ms = ? "
    "WHERE id = ?";

// ? activity_id, ? item_id, ? now_ms.
inline constexpr std::string_view kInsertItem =
    "INSERT INTO activity_items (activity_id, item_id, added_ms) VALUES (?, ?, ?)";

// An activity's webhook URLs as the column keeps them: one a line (a URL holds no line break,
// core::Validate), and back; "" is none.
std::string JoinWebhookUrls(const std::vector<std::string>& urls);
std::vector<std::string> SplitWebhookUrls(std::string_view text);

// Sets the waiting room of a row just read from its column (core::EncodeWaitingRoom); a column that
// does not decode leaves the activity closed, and says so in the log, rather than selling without
// the room the operator set.
void SetWaitingRoomFromColumn(core::Activity& activity, std::string_view text);

// `row` has Text(i), Int(i) and Double(i) over the columns of kSelectActivity.
template <typename Row>
ActivityRecord ReadActivity(const Row& row) {
  ActivityRecord record;
  core::Activity& a = record.activity;
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
  a.webhook_urls = SplitWebhookUrls(row.Text(17));
  SetWaitingRoomFromColumn(a, row.Text(18));
  return record;
}

// For kInsertActivity; `lottery` is EncodeLottery(a.lottery), `webhooks`
// JoinWebhookUrls(a.webhook_urls) and `room` core::EncodeWaitingRoom(a.waiting_room); all must
// outlive the values.
std::array<SqlValue, 18> ActivityInsertValues(const core::Activity& a, const std::string& lottery,
                                              const std::string& webhooks, const std::string& room,
                                              int64_t now_ms);
// For kUpdateActivity: `merged` as MergeUpdate returned it, `webhooks` its joined URLs, `room` its
// encoded waiting room.
std::array<SqlValue, 14> ActivityUpdateValues(const core::Activity& merged,
                                              const std::string& webhooks, const std::string& room,
                                              std::string_view id, int64_t now_ms);

// The activity `current` with `update` applied, validated (kInvalidArgument otherwise). Items are
// not part of it: stock is added by AddStock only.
base::Result<core::Activity> MergeUpdate(const ActivityRecord& current,
                                         const ActivityUpdate& update);

// kInvalidArgument unless `units` (and `items`, for itemised stock) may be added to `current`.
base::Status CheckAddedStock(std::string_view id, const ActivityRecord& current, int64_t units,
                             std::span<const std::string> items);

// ---- Orders ----

inline constexpr std::string_view kSelectOrder =
    "SELECT order_id, activity_id, user_id, quantity, items, state, single_unit, created_ms, "
    "persisted_ms, stream_id, draw_no, state_ms, refund_due, compensation_due FROM orders";

// The columns an insert writes, in the order of OrderInsertValues.
inline constexpr std::string_view kOrderInsertColumns =
    "(order_id, activity_id, user_id, quantity, items, state, single_unit, created_ms, "
    "persisted_ms, stream_id, draw_no)";
inline constexpr std::string_view kOrderInsertRow = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

// Appended to kSelectOrder. ? user_id, ? limit.
inline constexpr std::string_view kWhereUserNewestFirst =
    " WHERE user_id = ? ORDER BY created_ms DESC, order_id DESC LIMIT ?";
// ? activity_id.
inline constexpr std::string_view kWhereActivityOldestFirst =
    " WHERE activity_id = ? ORDER BY created_ms, order_id";
// ? activity_id, ? created_before_ms, ? limit.
inline constexpr std::string_view kWhereUnpaidBefore =
    " WHERE activity_id = ? AND state = 'reserved' AND created_ms < ? ORDER BY created_ms, "
    "order_id LIMIT ?";

// ? now_ms, ? order_id.
inline constexpr std::string_view kCancelReserved =
    "UPDATE orders SET state = 'cancelled', state_ms = ? WHERE order_id = ? AND state = "
    "'reserved'";
inline constexpr std::string_view kMarkPaid =
    "UPDATE orders SET state = 'paid', state_ms = ? WHERE order_id = ?";
// ? order_id; changes nothing when it is flagged already (one event per flag).
inline constexpr std::string_view kFlagRefund =
    "UPDATE orders SET refund_due = 1 WHERE order_id = ? AND refund_due = 0";

// `row` has Text(i) and Int(i) over the columns of kSelectOrder.
template <typename Row>
OrderRecord ReadOrder(const Row& row) {
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

// For kOrderInsertRow; `items` is base::JoinWords(order.items) and must outlive the values.
std::array<SqlValue, 11> OrderInsertValues(const OrderRecord& order, const std::string& items,
                                           int64_t now_ms);

// An order cancelled at now_ms, as kCancelReserved wrote it.
void MarkCancelled(OrderRecord& order, int64_t now_ms);

// What paying an order in `state` does: pay it (kPaid, run kMarkPaid), nothing (kAlreadyPaid),
// or refuse it and flag a refund (kRefused, run kFlagRefund).
PayOutcome PayOutcomeFor(OrderState state);

// ---- The export (Store::OrdersPage): an activity's orders by order id, page by page ----

// ? activity_id, ? the order id after which the page starts ('' for the first), ? the states as a
// mask (StatesMask), ? limit. The index orders_by_activity_id (activity_id, order_id) serves it in
// order: no sort, whatever the activity's size.
inline constexpr std::string_view kWhereActivityPage =
    " WHERE activity_id = ? AND order_id > ? AND (? & CASE state WHEN 'reserved' THEN 1 WHEN "
    "'paid' THEN 2 WHEN 'cancelled' THEN 4 ELSE 0 END) <> 0 ORDER BY order_id LIMIT ?";

int64_t StatesMask(OrderStates states);

// The cursor of the page after `last_order_id` of `activity_id`: base64url of "1\n<activity
// id>\n<order id>\n". A position, not a secret (the admin API reads every order anyway); it
// names its activity so that one used on another activity is refused rather than followed.
std::string EncodeOrderCursor(std::string_view activity_id, std::string_view last_order_id);
// The order id a cursor starts after ('' for an empty cursor); kInvalidArgument for text that is
// not a cursor EncodeOrderCursor gave for `activity_id`.
base::Result<std::string> DecodeOrderCursor(std::string_view activity_id, std::string_view cursor);
// kInvalidArgument unless 1 <= limit <= kMaxOrdersPerPage and `states` names one at least.
base::Status CheckOrdersPage(int64_t limit, OrderStates states);
// A page from the rows read with `limit` + 1: the next cursor when there were more than `limit`.
OrderPage PageOf(std::string_view activity_id, std::vector<OrderRecord> rows, int64_t limit);

// ---- Order events (the outbox, Store::EventsAfter) ----

// One event to write: the order, its activity and its new state. The id is EventId of the two.
struct EventDraft {
  std::string_view order_id;
  std::string_view activity_id;
  std::string_view state;
};

// "<order id>/<state>": an order reaches each state once, so the id names the change.
std::string EventId(std::string_view order_id, std::string_view state);

// The event of an order InsertOrders inserted: "won" for a lottery win, "reserved" for a sale's
// order, else the state it was inserted in (an order applied again as the record held it).
std::string_view InsertedEventState(const OrderRecord& order);

// Events are numbered under the one row of order_event_seq: a writer raises it by the number of
// its events (? count) and reads the new last number, holding the row to its commit, so numbers
// are visible in the order they were taken.
inline constexpr std::string_view kBumpEventSeq =
    "UPDATE order_event_seq SET last_seq = last_seq + ? WHERE id = 1";
inline constexpr std::string_view kReadEventSeq =
    "SELECT last_seq FROM order_event_seq WHERE id = 1";

// The row of an event: ? seq, ? event_id, ? order_id, ? activity_id, ? state, ? at_ms.
inline constexpr std::string_view kInsertEvent =
    "INSERT INTO order_events (seq, event_id, order_id, activity_id, state, at_ms) VALUES (?, ?, "
    "?, ?, ?, ?)";

// ? event_id.
inline constexpr std::string_view kEventExists = "SELECT 1 FROM order_events WHERE event_id = ?";

// ? after, ? limit.
inline constexpr std::string_view kSelectEventsAfter =
    "SELECT seq, event_id, order_id, activity_id, state, at_ms FROM order_events WHERE seq > ? "
    "ORDER BY seq LIMIT ?";

// kInvalidArgument for a refused order whose ids are empty or over 64 bytes.
base::Status CheckRefused(std::span<const RefusedOrder> orders);

inline constexpr int64_t kMaxEventsPerRead = 10000;
// kInvalidArgument unless 1 <= limit <= kMaxEventsPerRead and after >= 0.
base::Status CheckEventsRead(int64_t after, int64_t limit);

// `row` has Text(i) and Int(i) over the columns of kSelectEventsAfter.
template <typename Row>
OrderEvent ReadEvent(const Row& row) {
  OrderEvent event;
  event.seq = row.Int(0);
  event.event_id = row.Text(1);
  event.order_id = row.Text(2);
  event.activity_id = row.Text(3);
  event.state = row.Text(4);
  event.at_ms = row.Int(5);
  return event;
}

// Flags an order for compensation unless it is flagged already (one event per flag). ? order_id.
inline constexpr std::string_view kFlagCompensation =
    "UPDATE orders SET compensation_due = 1 WHERE order_id = ? AND compensation_due = 0";
// ? order_id -> activity_id.
inline constexpr std::string_view kActivityOfOrder =
    "SELECT activity_id FROM orders WHERE order_id = ?";

// ---- Webhook deliveries (Store::DeliveryCursor, SaveDelivery, ParkedEvents, RequestRetry) ----

inline constexpr size_t kMaxReceiverBytes = 512;
inline constexpr size_t kMaxDeliveryErrorBytes = 1000;
// `text` cut to at most `bytes` bytes (not inside a UTF-8 sequence).
std::string_view CutTo(std::string_view text, size_t bytes);

// ? receiver -> after_seq.
inline constexpr std::string_view kSelectDeliveryCursor =
    "SELECT after_seq FROM webhook_cursors WHERE receiver = ?";
// ? receiver, ? seq.
inline constexpr std::string_view kUnpark =
    "DELETE FROM webhook_parked WHERE receiver = ? AND seq = ?";
// ? receiver, ? receiver, ? limit (an empty receiver: every one).
inline constexpr std::string_view kSelectParked =
    "SELECT p.receiver, e.seq, e.event_id, e.order_id, e.activity_id, e.state, e.at_ms, "
    "p.attempts, p.last_error, p.parked_ms, p.retry FROM webhook_parked p JOIN order_events e ON "
    "e.seq = p.seq WHERE (? = '' OR p.receiver = ?) ORDER BY p.receiver, p.seq LIMIT ?";
// ? receiver, ? receiver.
inline constexpr std::string_view kRequestRetry =
    "UPDATE webhook_parked SET retry = 1 WHERE (? = '' OR receiver = ?) AND retry = 0";

template <typename Row>
ParkedEvent ReadParked(const Row& row) {
  ParkedEvent parked;
  parked.receiver = row.Text(0);
  parked.event.seq = row.Int(1);
  parked.event.event_id = row.Text(2);
  parked.event.order_id = row.Text(3);
  parked.event.activity_id = row.Text(4);
  parked.event.state = row.Text(5);
  parked.event.at_ms = row.Int(6);
  parked.attempts = row.Int(7);
  parked.last_error = row.Text(8);
  parked.parked_ms = row.Int(9);
  parked.retry = row.Int(10) != 0;
  return parked;
}

// ---- Write marks (Store::WrittenSeqs): the highest write sequence persisted per activity ----

// An activity's highest OrderRecord::written in one batch.
struct WrittenMark {
  std::string_view activity_id;
  core::WriteSeq written;
};

// The batch's marks to raise: per activity (by activity id), the highest `written` of its orders;
// activities whose orders all carry {0, 0} are left out. kInvalidArgument for a
// negative epoch or seq. The views point into `orders`.
base::Result<std::vector<WrittenMark>> HighestWritten(std::span<const OrderRecord> orders);

// -> (activity_id, epoch, seq) of every mark, by activity id.
inline constexpr std::string_view kSelectWrittenSeqs =
    "SELECT activity_id, epoch, seq FROM activity_writes ORDER BY activity_id";

// ---- Audit (Store::AuditOrders): both backends look for a double sale in the same way ----

// ? activity_id, ? per_user_limit -> (user_id, units) of users holding more than the limit.
inline constexpr std::string_view kUsersOverLimit =
    "SELECT user_id, CAST(SUM(quantity) AS SIGNED) FROM orders WHERE activity_id = ? AND state <> "
    "'cancelled' GROUP BY user_id HAVING SUM(quantity) > ? ORDER BY user_id LIMIT 10";

// ? activity_id -> the rows beyond the first one of every stream entry (order intent).
inline constexpr std::string_view kDuplicateIntents =
    "SELECT CAST(COALESCE(SUM(n - 1), 0) AS SIGNED) FROM (SELECT COUNT(*) AS n FROM orders WHERE "
    "activity_id = ? AND stream_id <> '' GROUP BY stream_id HAVING COUNT(*) > 1) AS repeated";

// ? activity_id -> (rows, live units, cancelled units). CAST: MySQL sums to DECIMAL.
inline constexpr std::string_view kCountOrders =
    "SELECT COUNT(*), CAST(COALESCE(SUM(CASE WHEN state <> 'cancelled' THEN quantity END), 0) AS "
    "SIGNED), CAST(COALESCE(SUM(CASE WHEN state = 'cancelled' THEN quantity END), 0) AS SIGNED) "
    "FROM orders WHERE activity_id = ?";

// ---- The report (Store::ReportOrders) ----

// ? activity_id: COUNT, first and last created_ms, refunds and compensations due.
inline constexpr std::string_view kReportSpan =
    "SELECT COUNT(*), CAST(COALESCE(MIN(created_ms), 0) AS SIGNED), CAST(COALESCE(MAX(created_ms), "
    "0) AS SIGNED), CAST(COALESCE(SUM(refund_due), 0) AS SIGNED), "
    "CAST(COALESCE(SUM(compensation_due), 0) AS SIGNED) FROM orders WHERE activity_id = ?";
// ? activity_id: state, orders, units.
inline constexpr std::string_view kReportStates =
    "SELECT state, COUNT(*), CAST(COALESCE(SUM(quantity), 0) AS SIGNED) FROM orders WHERE "
    "activity_id = ? GROUP BY state ORDER BY state";
// ? activity_id: prize id (a win's one item), wins not cancelled.
inline constexpr std::string_view kReportPrizes =
    "SELECT items, COUNT(*) FROM orders WHERE activity_id = ? AND draw_no > 0 AND state <> "
    "'cancelled' GROUP BY items ORDER BY items";
// ? activity_id: orders refused by the dead-letter step (the index order_events_refused).
inline constexpr std::string_view kReportRefused =
    "SELECT COUNT(*) FROM order_events WHERE activity_id = ? AND state = 'refused'";
// ? activity_id: the answers given, by word, most first (Store::AddAnswers).
inline constexpr std::string_view kReportAnswers =
    "SELECT word, total FROM activity_answers WHERE activity_id = ? ORDER BY total DESC, word";
// Store::AddAnswers: ? activity_id, ? word, ? count added to the total. The upsert is spelled
// differently by the two databases.
inline constexpr std::string_view kAddAnswerSqlite =
    "INSERT INTO activity_answers (activity_id, word, total) VALUES (?, ?, ?) "
    "ON CONFLICT (activity_id, word) DO UPDATE SET total = total + excluded.total";
inline constexpr std::string_view kAddAnswerMysql =
    "INSERT INTO activity_answers (activity_id, word, total) VALUES (?, ?, ?) "
    "ON DUPLICATE KEY UPDATE total = total + VALUES(total)";
// kInvalidArgument for a count Store::AddAnswers does not take.
base::Status CheckAnswers(std::span<const AnswerCount> counts);

// The bucket width, in whole seconds, for orders created from first_ms to last_ms: 1, or wider
// so that there are at most kMaxReportBuckets.
int64_t ReportStepSeconds(int64_t first_ms, int64_t last_ms);
// ? activity_id: the bucket's first ms, orders, units; by bucket. Buckets of `step_s` seconds
// from the second of `first_ms` (both are numbers this code computed, written into the text so
// that both dialects group by the same plain expression).
std::string ReportBucketsSql(int64_t first_ms, int64_t step_s);

// ---- Errors ----

base::Error NoActivity(std::string_view id);                                  // kNotFound
base::Error NoOrder(std::string_view order_id);                               // kNotFound
base::Error ActivityExists(std::string_view id);                              // kAlreadyExists
base::Error ItemExists(std::string_view activity_id, std::string_view item);  // kAlreadyExists
base::Error HasOrders(std::string_view id, int64_t orders);                   // kInvalidArgument

// Deleting an activity that sold nothing: ? activity_id for each.
inline constexpr std::string_view kCountActivityOrders =
    "SELECT COUNT(*) FROM orders WHERE activity_id = ?";
inline constexpr std::string_view kDeleteItems = "DELETE FROM activity_items WHERE activity_id = ?";
inline constexpr std::string_view kDeleteActivity = "DELETE FROM activities WHERE id = ?";
inline constexpr std::string_view kDeleteWrittenMark =
    "DELETE FROM activity_writes WHERE activity_id = ?";

}  // namespace flashsale::store::records
