#pragma once
// The consumer side of the activities' order streams: the consumer group "persist" that the
// order pipeline reads with, claims from dead consumers, acknowledges after the database commit,
// the dead-letter stream, and trimming that never drops an entry not yet persisted.
//
// Every call is per activity (one stream, one Redis Cluster slot); none blocks the connection,
// so a consumer can share its connection with nothing else waiting behind a BLOCK.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "core/write_seq.h"
#include "redis/connection.h"
#include "redis/scripts.h"

namespace flashsale::keyspace {

// An order intent on an activity's stream is one packed field, as the reserve and draw scripts
// write it (one field costs Redis less per XADD than six: bench/stream_format.sh). This is the
// one description of the layout; the scripts encode it, AddEntryField and DecodeOrderIntent
// decode it:
//   o = "order_id|user_id|quantity|ts|limit|draw|items"
// limit: the per-user limit the order was sold under (empty: not known, an intent appended again
// from its record); draw: a lottery win's draw number (empty for a sale); items: the item ids
// (or the prize), space-separated, last as the only part that may hold spaces. Ids never hold
// '|' (base::IsValidId). Entries older versions wrote name the same values as fields.
// An entry holds one intent, or several: a reserve call's batch is one entry with an `o` field
// per reservation, in their order. The pipeline's unit of work stays the entry (read, claimed,
// acknowledged and counted as a whole); its intents are written one by one and it is
// acknowledged once all of them are in the record.
inline constexpr std::string_view kPackedIntentField = "o";
// The write sequence of the call that wrote the entry, "<wepoch>.<wseq>" (sale_reserve.lua):
// every intent read from the entry carries it as a field of this name, and the record keeps the
// highest it persisted per activity (store::Store::InsertOrders). Absent in entries of older
// versions and in intents appended again from their record.
inline constexpr std::string_view kWriteSeqField = "s";

struct StreamEntry {
  std::string id;
  // As read, except that a packed intent appears as its named fields (order_id user_id quantity
  // ts items, then limit and draw when not empty), so readers see one shape.
  std::vector<std::pair<std::string, std::string>> fields;
  // An entry of several intents is read as one StreamEntry each, with the entry's id: this one's
  // place among them (0-based).
  int part = 0;
  std::string_view Field(std::string_view name) const;  // empty if absent
};

// Appends the field name=value to `fields`, a packed intent as its named fields (an `o` that is
// not a packed intent is kept as it is, for the consumer to refuse as unreadable).
void AddEntryField(std::string_view name, std::string_view value,
                   std::vector<std::pair<std::string, std::string>>& fields);
// An order intent as the order pipeline reads it from an activity's stream: the layout above,
// decoded once, here. An intent that cannot be read is a value too (`unreadable` says why, naming
// the field), for the consumer to count against its entry and dead-letter; never an exception,
// never dropped. Whether it fits its activity (a win's draw number and one prize, the limit a
// sale's one-live-order key needs) is the consumer's to judge (service::OrderRecordOf).
struct OrderIntent {
  // A number field present but not a whole number of at least 1 (limit, draw).
  static constexpr int64_t kUnreadableNumber = -1;

  std::string entry_id;  // the stream entry it came from
  int part = 0;          // its place among the entry's intents (0-based)
  // Empty when the intent was read (then the fields below hold it); else why not, e.g.
  // "unreadable intent: quantity 'x'".
  std::string unreadable;
  std::string order_id;  // a valid id (base::IsValidId)
  std::string user_id;   // a valid id
  int64_t quantity = 0;  // 1 to core::kMaxQuantityPerPurchase
  int64_t created_ms = 0;
  std::vector<std::string> items;  // the item ids (a sale), or the prize (a lottery win)
  // The per-user limit the order was sold under; 0: not known (an intent appended again from its
  // record); kUnreadableNumber.
  int64_t limit = 0;
  // A lottery win's draw number; 0: none (a sale); kUnreadableNumber.
  int64_t draw = 0;
  // The write sequence of the call that wrote the entry (kWriteSeqField); {0, 0}: not known
  // (absent or unreadable: an older version's entry).
  core::WriteSeq written;

  bool readable() const { return unreadable.empty(); }
  // The id the record keeps for this intent (its duplicate check, Store::AuditOrders): the
  // entry's id, with "/part" for the second intent of an entry on.
  std::string IntentId() const;
};

// The intent an entry (one StreamEntry per intent, its fields as AddEntryField gives them) holds.
OrderIntent DecodeOrderIntent(const StreamEntry& entry);

// The order id of an entry's field, or empty if the field names none: `order_id`, or the first
// part of a packed intent.
std::string_view OrderIdOfField(std::string_view name, std::string_view value);

// Consumer-group primitives on any stream key, shared by the order streams and the lotteries'
// admission queues. None blocks the connection (no BLOCK).
// Creates the group (reading from the stream's start, creating the stream) unless it exists, in
// a script (stream_group_ensure.lua), so that a group already there is no error reply; only while
// the activity's `meta_key` exists (else kNotFound, nothing created: the activity was deleted).
boost::asio::awaitable<base::Status> EnsureStreamGroup(redis::ScriptRunner& runner,
                                                       std::string_view key,
                                                       std::string_view meta_key,
                                                       std::string_view group);
// XREADGROUP ... >: up to `count` entries never delivered to the group.
boost::asio::awaitable<base::Result<std::vector<StreamEntry>>> ReadGroupNew(
    redis::Connection& connection, std::string_view key, std::string_view group,
    std::string_view consumer, int64_t count);
// XAUTOCLAIM from the start: up to `count` entries pending for at least `min_idle_ms`, now
// delivered to `consumer`.
boost::asio::awaitable<base::Result<std::vector<StreamEntry>>> AutoClaim(
    redis::Connection& connection, std::string_view key, std::string_view group,
    std::string_view consumer, int64_t min_idle_ms, int64_t count);

struct GroupInfo {
  int64_t length = 0;   // entries in the stream (after trimming)
  int64_t pending = 0;  // delivered, not acknowledged
  // Not yet delivered to the group (-1: Redis could not say); 0 whenever no entry follows the
  // last delivered one, whatever Redis's counter says (see Info).
  int64_t lag = 0;
  int64_t dead_letters = 0;  // entries in the dead-letter stream
  std::string last_delivered_id;
};

// What a dead letter moved (OrderSource::DeadLetter).
struct DeadLettered {
  int64_t moved = 0;     // intents moved (0: the entry was gone)
  int64_t released = 0;  // units of their orders returned to stock
};

// What the order pipeline's consumer (service::OrderConsumer) does with the activities' order
// streams, through the consumer group kGroup: read and claim intents, acknowledge them once the
// record has them, count failures, dead-letter, trim. OrderStream below is it on Redis;
// tests/support/order_source_double.h is it in process, for the consumer's unit tests.
class OrderSource {
 public:
  static constexpr std::string_view kGroup = "persist";

  virtual ~OrderSource() = default;

  // Creates the group (reading from the stream's start) unless it exists; kNotFound (nothing
  // created) once the activity is deleted.
  virtual boost::asio::awaitable<base::Status> EnsureGroup(std::string_view activity_id) = 0;
  // Up to `count` entries never delivered to the group, as their intents (an entry of several
  // intents gives one each, in order, with the entry's id). Error detail kNoGroup: the stream was
  // made again without the group.
  virtual boost::asio::awaitable<base::Result<std::vector<OrderIntent>>> ReadNew(
      std::string_view activity_id, std::string_view consumer, int64_t count) = 0;
  // Up to `count` entries pending for at least `min_idle_ms` (their consumer presumed dead), now
  // delivered to `consumer`, as their intents. Entries deleted meanwhile are acknowledged.
  virtual boost::asio::awaitable<base::Result<std::vector<OrderIntent>>> Claim(
      std::string_view activity_id, std::string_view consumer, int64_t min_idle_ms,
      int64_t count) = 0;
  // Acknowledges the entries `ids`: only ever after the database committed their intents. With
  // `forget_failures`, their failure counts (RecordFailure) go too, one more command; a caller may
  // leave it out when no entry of `ids` was delivered before (read as new, none failed since).
  virtual boost::asio::awaitable<base::Result<int64_t>> Ack(std::string_view activity_id,
                                                            std::span<const std::string> ids,
                                                            bool forget_failures) = 0;
  // Resets the idle time of entries this consumer still works on, so no one claims them. The
  // number of them still pending in the group (fewer than asked: some are no longer this
  // consumer's to write, e.g. the stream was lost and made again; error detail kNoGroup: the
  // group is gone).
  virtual boost::asio::awaitable<base::Result<int64_t>> Touch(std::string_view activity_id,
                                                              std::string_view consumer,
                                                              std::span<const std::string> ids) = 0;
  // Counts one failed delivery of an entry; the count so far.
  virtual boost::asio::awaitable<base::Result<int64_t>> RecordFailure(
      std::string_view activity_id, std::string_view entry_id) = 0;
  // Moves the intents of the entry at `parts` (OrderIntent::part; empty: every one) to the
  // dead-letter stream, one dead letter each, with `error`, and acknowledges the entry (its other
  // intents must be in the record), and returns the units of each order moved to stock if that
  // order is still reserved (the order then shows as refused).
  virtual boost::asio::awaitable<base::Result<DeadLettered>> DeadLetter(
      std::string_view activity_id, std::string_view entry_id, std::span<const int> parts,
      std::string_view error, int64_t deliveries, int64_t now_ms) = 0;
  // Trims entries before the oldest one not yet acknowledged by the group, i.e. only entries the
  // database has. Returns the number removed.
  virtual boost::asio::awaitable<base::Result<int64_t>> Trim(std::string_view activity_id) = 0;
  virtual boost::asio::awaitable<base::Result<GroupInfo>> Info(std::string_view activity_id) = 0;
  // The stream's length (0 for none), for the consumer's burst deferral.
  virtual boost::asio::awaitable<base::Result<int64_t>> Length(std::string_view activity_id) = 0;
};

// The order streams on Redis: XREADGROUP, XAUTOCLAIM, XACK, XCLAIM, HINCRBY on the failure
// counts, order_dead_letter.lua, XTRIM MINID, XINFO; and the dead letters listed and retried
// (the admin API).
class OrderStream final : public OrderSource {
 public:
  OrderStream(redis::ScriptRunner& runner, std::string key_namespace);

  boost::asio::awaitable<base::Status> EnsureGroup(std::string_view activity_id) override;
  boost::asio::awaitable<base::Result<std::vector<OrderIntent>>> ReadNew(
      std::string_view activity_id, std::string_view consumer, int64_t count) override;
  boost::asio::awaitable<base::Result<std::vector<OrderIntent>>> Claim(std::string_view activity_id,
                                                                       std::string_view consumer,
                                                                       int64_t min_idle_ms,
                                                                       int64_t count) override;
  boost::asio::awaitable<base::Result<int64_t>> Ack(std::string_view activity_id,
                                                    std::span<const std::string> ids,
                                                    bool forget_failures) override;
  boost::asio::awaitable<base::Result<int64_t>> Touch(std::string_view activity_id,
                                                      std::string_view consumer,
                                                      std::span<const std::string> ids) override;
  boost::asio::awaitable<base::Result<int64_t>> RecordFailure(std::string_view activity_id,
                                                              std::string_view entry_id) override;
  // One script, order_dead_letter.lua.
  boost::asio::awaitable<base::Result<DeadLettered>> DeadLetter(
      std::string_view activity_id, std::string_view entry_id, std::span<const int> parts,
      std::string_view error, int64_t deliveries, int64_t now_ms) override;
  boost::asio::awaitable<base::Result<int64_t>> Trim(std::string_view activity_id) override;
  boost::asio::awaitable<base::Result<GroupInfo>> Info(std::string_view activity_id) override;
  boost::asio::awaitable<base::Result<int64_t>> Length(std::string_view activity_id) override;

  // The dead letters, as their entries' fields (an operator's view: what Redis holds).
  boost::asio::awaitable<base::Result<std::vector<StreamEntry>>> ListDead(
      std::string_view activity_id, int64_t count);
  // Puts a dead letter back on the stream; its new entry id, or kNotFound, or kInvalidArgument
  // when the order's units went back to stock as it was dead-lettered (the letter stays).
  boost::asio::awaitable<base::Result<std::string>> RetryDead(std::string_view activity_id,
                                                              std::string_view dead_id);

 private:
  redis::ScriptRunner& runner_;
  std::string namespace_;
  const redis::Script& dead_letter_;
  const redis::Script& retry_dead_;
  redis::IntField moved_;  // reply fields (RETURNS)
  redis::IntField released_;
  redis::IntField retry_code_;
  redis::StrField entry_id_;
};

}  // namespace flashsale::keyspace
