#pragma once
// An order source that holds its streams in process, for unit tests of the order consumer
// (service::OrderConsumer) with no Redis: the consumer group's bookkeeping as the Redis streams
// keep it (keyspace::OrderStream), reduced to what the consumer can observe. An entry is new
// until read, then pending for the consumer it was delivered to, then acknowledged; a pending
// entry idle for at least the claim's idle time (Idle, time the test lets pass) is claimed; a
// dead-lettered entry's intents go to the activity's dead letters and the entry is acknowledged.
// The intents are appended in the packed layout the scripts write and decoded by keyspace's own
// decoder (keyspace::AddEntryField, keyspace::DecodeOrderIntent), so an intent the scripts could
// not have written comes out unreadable as it would from Redis.
//
// Any operation can be made to fail once (FailNext); the failure is the call's result and nothing
// changes. Single-threaded: every call completes at once, on the caller's coroutine. It holds no
// stock: a dead letter releases no units.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "keyspace/order_stream.h"

namespace flashsale::testing {

class InProcessOrderSource final : public keyspace::OrderSource {
 public:
  // The operations, for FailNext.
  enum class Op { kEnsureGroup, kReadNew, kClaim, kAck, kTouch, kRecordFailure, kDeadLetter };

  struct DeadIntent {
    std::string entry_id;
    int part = 0;
    std::string order_id;  // empty for an intent that had none readable
    std::string error;
    int64_t deliveries = 0;
  };
  struct AckCall {
    std::vector<std::string> ids;
    bool forget_failures = false;
  };

  // Appends one entry to the activity's stream holding `packed` intents ("order_id|user_id|
  // quantity|ts|limit|draw|items", keyspace/order_stream.h), written by a call at `written`
  // ("wepoch.wseq"; empty: none). Its entry id ("<n>-0", increasing).
  std::string Append(std::string_view activity_id, const std::vector<std::string>& packed,
                     std::string_view written = "");
  // Time passing: every pending entry of the activity is idle `ms` longer.
  void Idle(std::string_view activity_id, int64_t ms);
  // The next call of `op` fails with `error` (nothing changes).
  void FailNext(Op op, base::Error error);
  // The activity is deleted: EnsureGroup answers kNotFound.
  void Delete(std::string_view activity_id);

  std::vector<std::string> Pending(std::string_view activity_id) const;
  // The entries acknowledged (or dead-lettered), in that order, trimmed since or not.
  std::vector<std::string> Acknowledged(std::string_view activity_id) const;
  const std::vector<DeadIntent>& DeadLetters(std::string_view activity_id);
  // The failed deliveries counted against the entry (RecordFailure, until acknowledged with
  // forget_failures or dead-lettered).
  int64_t Failures(std::string_view activity_id, std::string_view entry_id) const;
  // How many times the entry was delivered (read, then claimed).
  int64_t Deliveries(std::string_view activity_id, std::string_view entry_id) const;
  const std::vector<AckCall>& AckCalls(std::string_view activity_id);

  boost::asio::awaitable<base::Status> EnsureGroup(std::string_view activity_id) override;
  boost::asio::awaitable<base::Result<std::vector<keyspace::OrderIntent>>> ReadNew(
      std::string_view activity_id, std::string_view consumer, int64_t count) override;
  boost::asio::awaitable<base::Result<std::vector<keyspace::OrderIntent>>> Claim(
      std::string_view activity_id, std::string_view consumer, int64_t min_idle_ms,
      int64_t count) override;
  boost::asio::awaitable<base::Result<int64_t>> Ack(std::string_view activity_id,
                                                    std::span<const std::string> ids,
                                                    bool forget_failures) override;
  boost::asio::awaitable<base::Result<int64_t>> Touch(std::string_view activity_id,
                                                      std::string_view consumer,
                                                      std::span<const std::string> ids) override;
  boost::asio::awaitable<base::Result<int64_t>> RecordFailure(std::string_view activity_id,
                                                              std::string_view entry_id) override;
  boost::asio::awaitable<base::Result<keyspace::DeadLettered>> DeadLetter(
      std::string_view activity_id, std::string_view entry_id, std::span<const int> parts,
      std::string_view error, int64_t deliveries, int64_t now_ms) override;
  boost::asio::awaitable<base::Result<int64_t>> Trim(std::string_view activity_id) override;
  boost::asio::awaitable<base::Result<keyspace::GroupInfo>> Info(
      std::string_view activity_id) override;
  boost::asio::awaitable<base::Result<int64_t>> Length(std::string_view activity_id) override;

 private:
  enum class State { kNew, kPending, kAcknowledged };
  struct Entry {
    std::string id;
    std::vector<keyspace::OrderIntent> intents;
    State state = State::kNew;
    std::string consumer;
    int64_t idle_ms = 0;
    int64_t deliveries = 0;
  };
  struct Stream {
    bool deleted = false;
    bool group = false;
    std::deque<Entry> entries;  // by id (trimmed from the front)
    std::map<std::string, int64_t, std::less<>> failures;
    std::vector<DeadIntent> dead;
    std::vector<AckCall> acks;
    std::vector<std::string> acknowledged;  // in order, trimmed or not
    std::string last_delivered;
  };

  Stream& StreamOf(std::string_view activity_id);
  const Stream* FindStream(std::string_view activity_id) const;
  Entry* FindEntry(Stream& stream, std::string_view entry_id);
  // The failure queued for `op`, taken; none: ok.
  base::Status Take(Op op);
  // Delivers `entry` to `consumer`, appending its intents to `out`.
  static void Deliver(Entry& entry, std::string_view consumer,
                      std::vector<keyspace::OrderIntent>& out);

  std::map<std::string, Stream, std::less<>> streams_;
  std::map<Op, std::deque<base::Error>> failures_;
  int64_t next_id_ = 1000;
};

}  // namespace flashsale::testing
