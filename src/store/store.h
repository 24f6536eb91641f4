#pragma once
// The system of record: activity definitions (and, with the order pipeline, orders). One
// interface, two backends: SQLite (the embedded default) and MySQL/MariaDB.
//
// Calls block. They run on the service's database thread, never on an I/O thread, so a slow
// database never stalls the purchase path (which does not touch the database at all).
// Implementations are safe to call from several threads, one call at a time.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "core/activity.h"
#include "core/write_seq.h"

namespace flashsale::store {

struct ActivityRecord {
  // For kCounted, activity.stock is total_units; for kItemised, activity.items holds every item
  // id ever added when asked for (GetActivity(id, true)), else it is empty.
  core::Activity activity;
  int64_t total_units = 0;  // units ever loaded or added
  int64_t version = 1;      // bumped on every change of the record
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
};

// A partial update: only the fields that are set change.
struct ActivityUpdate {
  std::optional<std::string> title;
  std::optional<int64_t> start_ms;
  std::optional<int64_t> end_ms;
  std::optional<int64_t> per_user_limit;
  std::optional<bool> open;
  std::optional<core::RateLimit> user_rate;
  std::optional<core::RateLimit> address_rate;
  std::optional<int64_t> payment_window_ms;
  std::optional<std::vector<std::string>> webhook_urls;
  // Set to nullopt inside: the room is turned off.
  std::optional<std::optional<core::WaitingRoom>> waiting_room;
};

enum class OrderState { kReserved, kPaid, kCancelled };
std::string_view ToString(OrderState state);       // "reserved" | "paid" | "cancelled"
OrderState OrderStateFrom(std::string_view text);  // the inverse; unknown text is kReserved

// One order as the record holds it; written from an order intent of the activity's stream.
// A lottery definition as the record keeps it (a JSON text column); empty text for a sale.
std::string EncodeLottery(const std::optional<core::Lottery>& lottery);
// The inverse; kInvalidArgument for text that is not a lottery this code wrote.
base::Result<std::optional<core::Lottery>> DecodeLottery(std::string_view text);
// Sets the lottery of a row just read from its column; a column that does not decode leaves the
// activity closed, and says so in the log, rather than selling a lottery's stock as a sale.
void SetLotteryFromColumn(core::Activity& activity, std::string_view text);

struct OrderRecord {
  std::string order_id;
  std::string activity_id;
  std::string user_id;
  int64_t quantity = 1;
  std::vector<std::string> items;  // itemised stock: the item ids taken
  OrderState state = OrderState::kReserved;
  // The activity's per-user limit is 1: the record then holds at most one live (not cancelled)
  // order per user and activity, a unique key that catches a double sale (S3-5).
  bool single_unit = false;
  // A lottery win: the user's draw number (1, 2, ...), unique per activity and user, so a win
  // recorded twice under two order ids is refused as a conflict. 0 for a sale.
  int64_t draw_no = 0;
  int64_t created_ms = 0;    // when Redis reserved it
  int64_t persisted_ms = 0;  // when it reached the record (set by InsertOrders)
  int64_t state_ms = 0;      // when it was paid or cancelled (0: still reserved)
  bool refund_due = false;   // a payment arrived after it was cancelled: to be refunded
  // Its units were sold twice (Redis lost it and resold them before the lost-write repair): the
  // buyer is owed a compensation. Never deleted.
  bool compensation_due = false;
  std::string stream_id;  // the intent's entry id in the activity's stream
  // The activity's write sequence of the Redis call that reserved it, from its stream entry: Redis
  // held at least this when the entry was read. InsertOrders keeps the highest per activity
  // (WrittenSeqs). {0, 0}: not known (an intent written by an older version, or one appended
  // again from its Redis record); it raises nothing. Not a column of the orders table.
  core::WriteSeq written;
};

// What InsertOrders did with each order.
enum class InsertOutcome {
  kInserted,   // new
  kDuplicate,  // an order with this id is there already: a redelivery, nothing to do
  kConflict,   // a different live order of this user in a limit-1 activity is there: refused
};

enum class PayOutcome {
  kPaid,         // reserved -> paid now
  kAlreadyPaid,  // paid before (a retried confirmation)
  kRefused,      // cancelled (expired) before the payment came: flagged for a refund
};

struct OrderCounts {
  int64_t orders = 0;  // rows, any state
  int64_t units = 0;   // units of live (reserved or paid) orders
  int64_t cancelled_units = 0;
};

// What an audit of one activity's orders found that must never be there.
struct OrderAudit {
  // Users whose live orders hold more units than the per-user limit (at most 10, by user id),
  // with the units they hold.
  std::vector<std::pair<std::string, int64_t>> users_over_limit;
  // Rows more than one per order intent: rows written from a stream entry another row was
  // written from too (an intent recorded twice under two order ids).
  int64_t duplicate_intents = 0;
};

// One change of an order's state, as the record's outbox (table order_events) holds it: written
// in the same transaction as the change itself, so a change that commits has its event and one
// that rolls back has none.
struct OrderEvent {
  // The cursor: increasing in commit order over the whole record (numbers are taken under one lock
  // row held to the commit, so an event with a higher number never becomes visible before one
  // with a lower number). Gaps are possible.
  int64_t seq = 0;
  std::string event_id;  // stable: "<order id>/<state>", the same for every delivery of it
  std::string order_id;
  std::string activity_id;
  std::string state;  // one of the kEvent* names below
  int64_t at_ms = 0;  // when the change was made
};

// The states an event names: an order reserved (a sale) or won (a lottery) when the record took
// it, paid, cancelled (expired unpaid), flagged for a refund (paid after it expired) or for a
// compensation (sold twice), and refused by the order pipeline's dead-letter step.
inline constexpr std::string_view kEventReserved = "reserved";
inline constexpr std::string_view kEventWon = "won";
inline constexpr std::string_view kEventPaid = "paid";
inline constexpr std::string_view kEventCancelled = "cancelled";
inline constexpr std::string_view kEventRefundDue = "refund_due";
inline constexpr std::string_view kEventCompensationDue = "compensation_due";
inline constexpr std::string_view kEventRefused = "refused";

// An order the dead-letter step refused: it has no row in the record (RecordRefused).
struct RefusedOrder {
  std::string order_id;
  std::string activity_id;
};

// A webhook delivery of an event the relay (service/event_relay.h) gave up on for now: kept,
// listed, retried on demand, never dropped.
struct ParkedEvent {
  std::string receiver;  // the receiver's URL
  OrderEvent event;
  // Deliveries tried and failed; 0: never tried, held behind an earlier parked event of its
  // activity (so a receiver gets an activity's events in order).
  int64_t attempts = 0;
  std::string last_error;
  int64_t parked_ms = 0;
  bool retry = false;  // an operator asked for it to be tried again (RequestRetry)
};

// What the relay did for one receiver in one step, saved in one transaction.
struct DeliveryUpdate {
  std::string receiver;
  int64_t cursor = 0;  // every event up to this seq handled (delivered or parked); never lowered
  // Parked now, or again: receiver, event.seq, event.activity_id, attempts (added to those
  // before), last_error. Its retry request, if any, is done.
  std::vector<ParkedEvent> parked;
  std::vector<int64_t> delivered;  // seqs of parked events delivered now: no longer parked
};

// The export (issue 35, point 3): a set of order states to read, and one page of an activity's
// orders read by cursor (Store::OrdersPage).
struct OrderStates {
  bool reserved = true;
  bool paid = true;
  bool cancelled = true;
  bool Has(OrderState state) const;
  bool Empty() const { return !reserved && !paid && !cancelled; }
};

struct OrderPage {
  std::vector<OrderRecord> orders;  // by order id, byte for byte
  // The cursor of the next page (opaque text); empty: this page was the last.
  std::string next;
};

inline constexpr int64_t kMaxOrdersPerPage = 10000;

// The report after a sale (issue 35, point 4; Store::ReportOrders): what the record holds of one
// activity's orders, counted by the database (GROUP BY), bounded in size.
struct ReportBucket {
  int64_t second = 0;  // the bucket's first second (created_ms / 1000)
  int64_t orders = 0;  // orders created in the bucket, any state
  int64_t units = 0;
};
struct StateTotal {
  std::string state;  // "reserved" | "paid" | "cancelled"
  int64_t orders = 0;
  int64_t units = 0;
};
// At most this many buckets: a sale longer than kMaxReportBuckets seconds is bucketed by a wider
// step (whole seconds).
inline constexpr int64_t kMaxReportBuckets = 3600;
struct OrderReport {
  int64_t orders = 0;    // rows, any state
  int64_t first_ms = 0;  // the first and last order's created_ms; 0 when there is none
  int64_t last_ms = 0;
  int64_t step_s = 1;                 // each bucket's width in seconds
  std::vector<ReportBucket> buckets;  // by second; seconds without an order are absent
  std::vector<StateTotal> states;     // by state name; states without an order are absent
  int64_t refund_due = 0;             // orders flagged for a refund
  int64_t compensation_due = 0;       // orders flagged for a compensation
  std::vector<std::pair<std::string, int64_t>> prizes;  // live lottery wins per prize id, by id
  int64_t refused = 0;  // orders the dead-letter step refused (order_events, state refused)
  // The answers the service gave the activity's buyers, by status word ("reserved", "sold_out",
  // "limit_reached", "rate_limited", ...), most first (Store::AddAnswers): refusals answered
  // before Redis or by it leave no order in the record, so they are counted here.
  std::vector<std::pair<std::string, int64_t>> answers;
};

// Answers given to one activity's buyers under one status word since the last count was added
// (Store::AddAnswers). The word is at most 32 bytes of the service's own status words.
struct AnswerCount {
  std::string activity_id;
  std::string word;
  int64_t count = 0;  // > 0
};

class Store {
 public:
  virtual ~Store() = default;

  // Creates or upgrades the schema to the newest version; idempotent.
  virtual base::Status Migrate() = 0;
  virtual base::Result<int> SchemaVersion() = 0;
  // Cheap round trip for readiness checks.
  virtual base::Status Ping() = 0;
  // "sqlite:/path/to.db", "mysql://user@host/db": for logs, without secrets.
  virtual std::string Describe() const = 0;

  virtual base::Result<std::vector<ActivityRecord>> ListActivities() = 0;
  // kNotFound if there is no such activity.
  virtual base::Result<ActivityRecord> GetActivity(std::string_view id, bool with_items) = 0;
  // kAlreadyExists if the id is taken. The activity must pass core::Validate.
  virtual base::Result<ActivityRecord> CreateActivity(const core::Activity& activity,
                                                      int64_t now_ms) = 0;
  // The updated record; the result must still pass core::Validate (else kInvalidArgument and
  // nothing changes).
  virtual base::Result<ActivityRecord> UpdateActivity(std::string_view id,
                                                      const ActivityUpdate& update,
                                                      int64_t now_ms) = 0;
  // Counted: `units` more; itemised: the given new item ids (units == items.size(); an id the
  // activity already has is kAlreadyExists and nothing is added).
  virtual base::Result<ActivityRecord> AddStock(std::string_view id, int64_t units,
                                                std::span<const std::string> items,
                                                int64_t now_ms) = 0;
  // Deletes an activity that sold nothing (no order row, live or cancelled) with its items and
  // its write mark (WrittenSeqs), in one transaction. kNotFound without it; kInvalidArgument when
  // it has orders (nothing changes).
  virtual base::Status DeleteActivity(std::string_view id) = 0;

  // Writes a batch of orders in ONE transaction, idempotently: for each order, an existence check
  // by id (S3-5's belt and braces), then an insert that ignores a unique-key clash (INSERT
  // IGNORE / ON CONFLICT DO NOTHING). One outcome per order, in order. An error means nothing
  // of the batch was written.
  //
  // With `fence`: the batch is written only if the record's fence (AdvanceFence) is still at
  // that epoch, checked inside the same transaction; else kFailedPrecondition (detail kFenced)
  // and nothing is written. An order consumer passes the epoch it read its batch under, so a
  // batch read from a Redis before it restarted or failed over is never written after the
  // lost-write repair counted without it.
  //
  // In the same transaction, each activity's write mark (WrittenSeqs) is raised to the highest
  // `written` among the batch's orders of that activity, whatever their outcome (each was read
  // from Redis, which proves Redis held that sequence); never lowered, and {0, 0} raises nothing.
  // A negative epoch or seq is kInvalidArgument, nothing written.
  base::Result<std::vector<InsertOutcome>> InsertOrders(std::span<const OrderRecord> orders,
                                                        int64_t now_ms) {
    return InsertOrders(orders, now_ms, std::nullopt);
  }
  virtual base::Result<std::vector<InsertOutcome>> InsertOrders(std::span<const OrderRecord> orders,
                                                                int64_t now_ms,
                                                                std::optional<int64_t> fence) = 0;
  // The record's fence: advances it by one (in its own transaction, waiting for inserts in
  // flight under the old epoch) and returns the new epoch.
  virtual base::Result<int64_t> AdvanceFence() = 0;
  // The record's fence as it is now.
  virtual base::Result<int64_t> ReadFence() = 0;
  // Every activity's write mark: the highest write sequence (OrderRecord::written) of any order
  // InsertOrders persisted for it, by activity id. An activity without one (no order with a known
  // sequence yet, or deleted) is absent.
  virtual base::Result<std::vector<std::pair<std::string, core::WriteSeq>>> WrittenSeqs() = 0;
  // Flags orders for compensation (compensation_due) at now_ms; unknown ids are skipped, and an
  // order flagged before is left as it is (one event per order flagged now).
  virtual base::Status FlagCompensation(std::span<const std::string> order_ids, int64_t now_ms) = 0;
  // kNotFound if there is no such order.
  virtual base::Result<OrderRecord> GetOrder(std::string_view order_id) = 0;
  // The user's orders, newest first, at most `limit`.
  virtual base::Result<std::vector<OrderRecord>> OrdersOfUser(std::string_view user_id,
                                                              int64_t limit) = 0;
  virtual base::Result<OrderCounts> CountOrders(std::string_view activity_id) = 0;
  // The expire job: cancels, in one transaction, up to `limit` orders of the activity still
  // reserved that were created before `created_before_ms` (compare-and-set: an order paid
  // meanwhile stays paid). The orders cancelled by this call.
  virtual base::Result<std::vector<OrderRecord>> CancelUnpaid(std::string_view activity_id,
                                                              int64_t created_before_ms,
                                                              int64_t limit, int64_t now_ms) = 0;
  // A payment: reserved -> paid (compare-and-set). A payment for a cancelled order is refused and
  // the order flagged for a refund; never turned back into a sale. kNotFound: no such order.
  virtual base::Result<PayOutcome> PayOrder(std::string_view order_id, int64_t now_ms) = 0;
  // The dead-letter step: one event "refused" per order, in one transaction. Idempotent by the
  // event's id (an order refused again adds nothing). An order id or activity id over 64 bytes
  // is kInvalidArgument, nothing written.
  virtual base::Status RecordRefused(std::span<const RefusedOrder> orders, int64_t now_ms) = 0;
  // The outbox: events with a seq above `after`, by seq, at most `limit` (1..10000, else
  // kInvalidArgument). Every other call that changes an order writes its events (InsertOrders: one
  // "reserved" or "won" per order inserted, or the state it was inserted in; CancelUnpaid,
  // PayOrder, FlagCompensation: one per order they changed).
  virtual base::Result<std::vector<OrderEvent>> EventsAfter(int64_t after, int64_t limit) = 0;
  // Webhook deliveries (service/event_relay.h). The receiver's delivery cursor (0: none yet).
  virtual base::Result<int64_t> DeliveryCursor(std::string_view receiver) = 0;
  // Saves one step of the relay (DeliveryUpdate) in one transaction. A receiver over 512 bytes or
  // an error text over 1000 bytes is cut to size.
  virtual base::Status SaveDelivery(const DeliveryUpdate& update, int64_t now_ms) = 0;
  // Parked events of `receiver` (empty: of every receiver), by receiver then seq, at most `limit`.
  virtual base::Result<std::vector<ParkedEvent>> ParkedEvents(std::string_view receiver,
                                                              int64_t limit) = 0;
  // Asks for the parked events of `receiver` (empty: every receiver) to be tried again; the
  // number of them newly asked for.
  virtual base::Result<int64_t> RequestRetry(std::string_view receiver) = 0;
  // One page of the activity's orders in `states`, by order id, at most `limit` (1 to
  // kMaxOrdersPerPage), after `cursor` (empty: from the first; else a page's `next`). Keyset
  // pagination on the order id, which never changes: an order that was in the record when the
  // first page was read is on exactly one page, whatever is written between pages (a state that
  // changes in between shows as it is when its page is read; an order written in between is on a
  // later page if its id sorts after the cursor). kInvalidArgument for a cursor that is not one a
  // page of this activity gave (tampered, cut, or another activity's), a bad limit or no state.
  virtual base::Result<OrderPage> OrdersPage(std::string_view activity_id, std::string_view cursor,
                                             int64_t limit, OrderStates states) = 0;
  // The report of the activity's orders (OrderReport); an activity with no order has an empty one.
  virtual base::Result<OrderReport> ReportOrders(std::string_view activity_id) = 0;
  // Adds each count to its activity's total for its word, in one transaction (every instance
  // adds what it answered since its last call; the report reads the sums). kInvalidArgument, and
  // nothing written, for an id over 64 bytes, a word empty or over 32, or a count below 1.
  virtual base::Status AddAnswers(std::span<const AnswerCount> counts) = 0;
  // Every order of the activity, any state, oldest first (for reconciliation).
  virtual base::Result<std::vector<OrderRecord>> OrdersOfActivity(std::string_view activity_id) = 0;
  // Looks for a double sale in the record: see OrderAudit. For `flashsale load --verify`.
  virtual base::Result<OrderAudit> AuditOrders(std::string_view activity_id,
                                               int64_t per_user_limit) = 0;
};

// Opens the store a URL names, sqlite:/path/to.db or mysql://user[:password]@host[:port]/db, and
// migrates it to the newest schema. kInvalidArgument for any other URL.
base::Result<std::unique_ptr<Store>> OpenStore(const std::string& url);

}  // namespace flashsale::store
