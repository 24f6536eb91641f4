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
#include "redis/connection.h"
#include "redis/scripts.h"

namespace flashsale::keyspace {

// An order intent on an activity's stream is one packed field, as the reserve and draw scripts
// write it (one field costs Redis less per XADD than six: bench/stream_format.sh). This is the
// one description of the layout; the scripts encode it, AddEntryField decodes it:
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
  // The id the record keeps for this intent (its duplicate check, Store::AuditOrders): the
  // entry's id, with "/part" for the second intent of an entry on.
  std::string IntentId() const;
};

// Appends the field name=value to `fields`, a packed intent as its named fields (an `o` that is
// not a packed intent is kept as it is, for the consumer to refuse as unreadable).
void AddEntryField(std::string_view name, std::string_view value,
                   std::vector<std::pair<std::string, std::string>>& fields);
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

class OrderStream {
 public:
  static constexpr std::string_view kGroup = "persist";

  OrderStream(redis::ScriptRunner& runner, std::string key_namespace);

  // Creates the group (reading from the stream's start) unless it exists; kNotFound (nothing
  // created) once the activity is deleted.
  boost::asio::awaitable<base::Status> EnsureGroup(std::string_view activity_id);
  // Up to `count` entries never delivered to the group.
  boost::asio::awaitable<base::Result<std::vector<StreamEntry>>> ReadNew(
      std::string_view activity_id, std::string_view consumer, int64_t count);
  // Up to `count` entries pending for at least `min_idle_ms` (their consumer presumed dead),
  // now delivered to `consumer` (XAUTOCLAIM). Entries deleted meanwhile are acknowledged.
  boost::asio::awaitable<base::Result<std::vector<StreamEntry>>> Claim(std::string_view activity_id,
                                                                       std::string_view consumer,
                                                                       int64_t min_idle_ms,
                                                                       int64_t count);
  // XACK: only ever after the database committed the entries. With `forget_failures`, their
  // failure counts (RecordFailure) go too, one more command; a caller may leave it out when no
  // entry of `ids` was delivered before (read as new, none failed since).
  boost::asio::awaitable<base::Result<int64_t>> Ack(std::string_view activity_id,
                                                    std::span<const std::string> ids,
                                                    bool forget_failures = true);
  // Resets the idle time of entries this consumer still works on, so no one claims them. The
  // number of them still pending in the group (fewer than asked: some are no longer this
  // consumer's to write, e.g. the stream was lost and made again).
  boost::asio::awaitable<base::Result<int64_t>> Touch(std::string_view activity_id,
                                                      std::string_view consumer,
                                                      std::span<const std::string> ids);
  // Counts one failed delivery of an entry; the count so far.
  boost::asio::awaitable<base::Result<int64_t>> RecordFailure(std::string_view activity_id,
                                                              std::string_view entry_id);
  // Moves the intents of the entry at `parts` (StreamEntry::part; empty: every one) to the
  // dead-letter stream, one dead letter each, with `error`, and acknowledges the entry (its other
  // intents must be in the record), and returns the units of each order moved to stock if that
  // order is still reserved (one script, order_dead_letter.lua: the order then shows as
  // refused). The intents moved (0: the entry was gone) and the units returned.
  struct DeadLettered {
    int64_t moved = 0;
    int64_t released = 0;
  };
  boost::asio::awaitable<base::Result<DeadLettered>> DeadLetter(std::string_view activity_id,
                                                                std::string_view entry_id,
                                                                std::span<const int> parts,
                                                                std::string_view error,
                                                                int64_t deliveries, int64_t now_ms);
  boost::asio::awaitable<base::Result<std::vector<StreamEntry>>> ListDead(
      std::string_view activity_id, int64_t count);
  // Puts a dead letter back on the stream; its new entry id, or kNotFound, or kInvalidArgument
  // when the order's units went back to stock as it was dead-lettered (the letter stays).
  boost::asio::awaitable<base::Result<std::string>> RetryDead(std::string_view activity_id,
                                                              std::string_view dead_id);
  // Trims entries before the oldest one not yet acknowledged by the group, i.e. only entries the
  // database has. Returns the number removed.
  boost::asio::awaitable<base::Result<int64_t>> Trim(std::string_view activity_id);
  boost::asio::awaitable<base::Result<GroupInfo>> Info(std::string_view activity_id);
  // The stream's length (XLEN: 0 for none), for the consumer's burst deferral.
  boost::asio::awaitable<base::Result<int64_t>> Length(std::string_view activity_id);

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
