#include "support/order_source_double.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace flashsale::testing {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;
using keyspace::OrderIntent;

std::string InProcessOrderSource::Append(std::string_view activity_id,
                                         const std::vector<std::string>& packed,
                                         std::string_view written) {
  Entry entry;
  entry.id = fmt::format("{}-0", next_id_++);
  for (size_t i = 0; i < packed.size(); ++i) {
    // As OrderStream reads an entry: one StreamEntry per intent, the call's write sequence on
    // each.
    keyspace::StreamEntry read{.id = entry.id, .part = static_cast<int>(i)};
    keyspace::AddEntryField(keyspace::kPackedIntentField, packed[i], read.fields);
    if (!written.empty()) read.fields.emplace_back(keyspace::kWriteSeqField, written);
    entry.intents.push_back(keyspace::DecodeOrderIntent(read));
  }
  StreamOf(activity_id).entries.push_back(std::move(entry));
  return StreamOf(activity_id).entries.back().id;
}

void InProcessOrderSource::Idle(std::string_view activity_id, int64_t ms) {
  for (Entry& entry : StreamOf(activity_id).entries) {
    if (entry.state == State::kPending) entry.idle_ms += ms;
  }
}

void InProcessOrderSource::FailNext(Op op, base::Error error) {
  failures_[op].push_back(std::move(error));
}

void InProcessOrderSource::Delete(std::string_view activity_id) {
  StreamOf(activity_id).deleted = true;
}

std::vector<std::string> InProcessOrderSource::Pending(std::string_view activity_id) const {
  std::vector<std::string> ids;
  if (const Stream* stream = FindStream(activity_id)) {
    for (const Entry& entry : stream->entries) {
      if (entry.state == State::kPending) ids.push_back(entry.id);
    }
  }
  return ids;
}

std::vector<std::string> InProcessOrderSource::Acknowledged(std::string_view activity_id) const {
  const Stream* stream = FindStream(activity_id);
  return stream != nullptr ? stream->acknowledged : std::vector<std::string>{};
}

const std::vector<InProcessOrderSource::DeadIntent>& InProcessOrderSource::DeadLetters(
    std::string_view activity_id) {
  return StreamOf(activity_id).dead;
}

int64_t InProcessOrderSource::Failures(std::string_view activity_id,
                                       std::string_view entry_id) const {
  const Stream* stream = FindStream(activity_id);
  if (stream == nullptr) return 0;
  const auto found = stream->failures.find(entry_id);
  return found == stream->failures.end() ? 0 : found->second;
}

int64_t InProcessOrderSource::Deliveries(std::string_view activity_id,
                                         std::string_view entry_id) const {
  if (const Stream* stream = FindStream(activity_id)) {
    for (const Entry& entry : stream->entries) {
      if (entry.id == entry_id) return entry.deliveries;
    }
  }
  return 0;
}

const std::vector<InProcessOrderSource::AckCall>& InProcessOrderSource::AckCalls(
    std::string_view activity_id) {
  return StreamOf(activity_id).acks;
}

asio::awaitable<base::Status> InProcessOrderSource::EnsureGroup(std::string_view activity_id) {
  if (auto failed = Take(Op::kEnsureGroup); !failed) co_return failed;
  Stream& stream = StreamOf(activity_id);
  if (stream.deleted) {
    co_return MakeError(ErrorCode::kNotFound, "no activity '{}' (deleted)", activity_id);
  }
  stream.group = true;
  co_return base::Status();
}

asio::awaitable<Result<std::vector<OrderIntent>>> InProcessOrderSource::ReadNew(
    std::string_view activity_id, std::string_view consumer, int64_t count) {
  if (auto failed = Take(Op::kReadNew); !failed) co_return std::move(failed).error();
  Stream& stream = StreamOf(activity_id);
  if (!stream.group) {
    co_return MakeError(ErrorCode::kRemote, base::ErrorDetail::kNoGroup,
                        "NOGROUP no group '{}' for '{}'", kGroup, activity_id);
  }
  std::vector<OrderIntent> out;
  int64_t taken = 0;
  for (Entry& entry : stream.entries) {
    if (taken == count) break;
    if (entry.state != State::kNew) continue;
    Deliver(entry, consumer, out);
    stream.last_delivered = entry.id;
    ++taken;
  }
  co_return out;
}

asio::awaitable<Result<std::vector<OrderIntent>>> InProcessOrderSource::Claim(
    std::string_view activity_id, std::string_view consumer, int64_t min_idle_ms, int64_t count) {
  if (auto failed = Take(Op::kClaim); !failed) co_return std::move(failed).error();
  std::vector<OrderIntent> out;
  int64_t taken = 0;
  for (Entry& entry : StreamOf(activity_id).entries) {
    if (taken == count) break;
    if (entry.state != State::kPending || entry.idle_ms < min_idle_ms) continue;
    Deliver(entry, consumer, out);
    ++taken;
  }
  co_return out;
}

asio::awaitable<Result<int64_t>> InProcessOrderSource::Ack(std::string_view activity_id,
                                                           std::span<const std::string> ids,
                                                           bool forget_failures) {
  if (auto failed = Take(Op::kAck); !failed) co_return std::move(failed).error();
  Stream& stream = StreamOf(activity_id);
  stream.acks.push_back({{ids.begin(), ids.end()}, forget_failures});
  int64_t acknowledged = 0;
  for (const std::string& id : ids) {
    Entry* entry = FindEntry(stream, id);
    if (entry != nullptr && entry->state == State::kPending) {
      entry->state = State::kAcknowledged;
      stream.acknowledged.push_back(entry->id);
      ++acknowledged;
    }
    if (forget_failures) stream.failures.erase(id);
  }
  co_return acknowledged;
}

asio::awaitable<Result<int64_t>> InProcessOrderSource::Touch(std::string_view activity_id,
                                                             std::string_view consumer,
                                                             std::span<const std::string> ids) {
  if (auto failed = Take(Op::kTouch); !failed) co_return std::move(failed).error();
  Stream& stream = StreamOf(activity_id);
  int64_t still_ours = 0;
  for (const std::string& id : ids) {
    Entry* entry = FindEntry(stream, id);
    if (entry == nullptr || entry->state != State::kPending || entry->consumer != consumer) {
      continue;
    }
    entry->idle_ms = 0;
    ++still_ours;
  }
  co_return still_ours;
}

asio::awaitable<Result<int64_t>> InProcessOrderSource::RecordFailure(std::string_view activity_id,
                                                                     std::string_view entry_id) {
  if (auto failed = Take(Op::kRecordFailure); !failed) co_return std::move(failed).error();
  Stream& stream = StreamOf(activity_id);
  co_return ++stream.failures[std::string(entry_id)];
}

asio::awaitable<Result<keyspace::DeadLettered>> InProcessOrderSource::DeadLetter(
    std::string_view activity_id, std::string_view entry_id, std::span<const int> parts,
    std::string_view error, int64_t deliveries, int64_t /*now_ms*/) {
  if (auto failed = Take(Op::kDeadLetter); !failed) co_return std::move(failed).error();
  Stream& stream = StreamOf(activity_id);
  Entry* entry = FindEntry(stream, entry_id);
  keyspace::DeadLettered result;
  if (entry == nullptr || entry->state == State::kAcknowledged) co_return result;
  for (const OrderIntent& intent : entry->intents) {
    if (!parts.empty() && std::find(parts.begin(), parts.end(), intent.part) == parts.end()) {
      continue;
    }
    stream.dead.push_back({.entry_id = entry->id,
                           .part = intent.part,
                           .order_id = intent.order_id,
                           .error = std::string(error),
                           .deliveries = deliveries});
    ++result.moved;
  }
  entry->state = State::kAcknowledged;
  stream.acknowledged.push_back(entry->id);
  stream.failures.erase(entry->id);
  co_return result;
}

asio::awaitable<Result<int64_t>> InProcessOrderSource::Trim(std::string_view activity_id) {
  Stream& stream = StreamOf(activity_id);
  int64_t removed = 0;
  while (!stream.entries.empty() && stream.entries.front().state == State::kAcknowledged) {
    stream.entries.pop_front();
    ++removed;
  }
  co_return removed;
}

asio::awaitable<Result<keyspace::GroupInfo>> InProcessOrderSource::Info(
    std::string_view activity_id) {
  const Stream& stream = StreamOf(activity_id);
  keyspace::GroupInfo info;
  info.length = static_cast<int64_t>(stream.entries.size());
  for (const Entry& entry : stream.entries) {
    if (entry.state == State::kPending) ++info.pending;
    if (entry.state == State::kNew) ++info.lag;
  }
  info.dead_letters = static_cast<int64_t>(stream.dead.size());
  info.last_delivered_id = stream.last_delivered;
  co_return info;
}

asio::awaitable<Result<int64_t>> InProcessOrderSource::Length(std::string_view activity_id) {
  co_return static_cast<int64_t>(StreamOf(activity_id).entries.size());
}

InProcessOrderSource::Stream& InProcessOrderSource::StreamOf(std::string_view activity_id) {
  auto found = streams_.find(activity_id);
  if (found == streams_.end()) found = streams_.emplace(std::string(activity_id), Stream{}).first;
  return found->second;
}

const InProcessOrderSource::Stream* InProcessOrderSource::FindStream(
    std::string_view activity_id) const {
  const auto found = streams_.find(activity_id);
  return found == streams_.end() ? nullptr : &found->second;
}

InProcessOrderSource::Entry* InProcessOrderSource::FindEntry(Stream& stream,
                                                             std::string_view entry_id) {
  for (Entry& entry : stream.entries) {
    if (entry.id == entry_id) return &entry;
  }
  return nullptr;
}

base::Status InProcessOrderSource::Take(Op op) {
  auto found = failures_.find(op);
  if (found == failures_.end() || found->second.empty()) return {};
  base::Error error = std::move(found->second.front());
  found->second.pop_front();
  return error;
}

void InProcessOrderSource::Deliver(Entry& entry, std::string_view consumer,
                                   std::vector<OrderIntent>& out) {
  entry.state = State::kPending;
  entry.consumer = consumer;
  entry.idle_ms = 0;
  ++entry.deliveries;
  out.insert(out.end(), entry.intents.begin(), entry.intents.end());
}

}  // namespace flashsale::testing
