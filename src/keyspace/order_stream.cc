#include "keyspace/order_stream.h"

#include <fmt/format.h>

#include <array>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>

#include "base/ids.h"
#include "base/strings.h"
#include "core/activity.h"
#include "keyspace/activity_scripts.h"

namespace flashsale::keyspace {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

// Entries from an array of [id, [field, value, ...]]; deleted entries (nil fields) are skipped.
Result<std::vector<StreamEntry>> ParseEntries(redis::ReplyView entries) {
  std::vector<StreamEntry> out;
  if (entries.is_nil()) return out;
  if (!entries.is_array()) {
    return MakeError(ErrorCode::kProtocol, "stream entries: unexpected {}", entries.Describe());
  }
  out.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    redis::ReplyView entry = entries[i];
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string()) {
      return MakeError(ErrorCode::kProtocol, "stream entry: unexpected {}", entry.Describe());
    }
    if (entry[1].is_nil()) continue;
    redis::ReplyView fields = entry[1];
    int packed = 0;
    for (size_t f = 0; f + 1 < fields.size(); f += 2) {
      if (fields[f].str() == kPackedIntentField) ++packed;
    }
    if (packed <= 1) {
      StreamEntry parsed;
      parsed.id = entry[0].str();
      for (size_t f = 0; f + 1 < fields.size(); f += 2) {
        AddEntryField(fields[f].str(), fields[f + 1].str(), parsed.fields);
      }
      out.push_back(std::move(parsed));
      continue;
    }
    // A batch's intents: one StreamEntry each, with the entry's write sequence (any other field
    // would be another writer's, and is not theirs to carry).
    std::string_view write_seq;
    for (size_t f = 0; f + 1 < fields.size(); f += 2) {
      if (fields[f].str() == kWriteSeqField) write_seq = fields[f + 1].str();
    }
    int part = 0;
    for (size_t f = 0; f + 1 < fields.size(); f += 2) {
      if (fields[f].str() != kPackedIntentField) continue;
      StreamEntry parsed;
      parsed.id = entry[0].str();
      parsed.part = part++;
      AddEntryField(fields[f].str(), fields[f + 1].str(), parsed.fields);
      if (!write_seq.empty()) parsed.fields.emplace_back(kWriteSeqField, write_seq);
      out.push_back(std::move(parsed));
    }
  }
  return out;
}

redis::Command Build(std::vector<std::string_view> args) { return redis::Command(args); }

bool ParseInt(std::string_view text, int64_t& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

// A number field that may be absent: 0 when it is, kUnreadableNumber unless a whole number >= 1.
int64_t OptionalNumber(std::string_view text) {
  if (text.empty()) return 0;
  int64_t value = 0;
  return ParseInt(text, value) && value >= 1 ? value : OrderIntent::kUnreadableNumber;
}

std::vector<OrderIntent> DecodeAll(const std::vector<StreamEntry>& entries) {
  std::vector<OrderIntent> intents;
  intents.reserve(entries.size());
  for (const StreamEntry& entry : entries) intents.push_back(DecodeOrderIntent(entry));
  return intents;
}

}  // namespace

void AddEntryField(std::string_view name, std::string_view value,
                   std::vector<std::pair<std::string, std::string>>& fields) {
  if (name != kPackedIntentField) {
    fields.emplace_back(name, value);
    return;
  }
  // order_id|user_id|quantity|ts|limit|draw|items: six separators, items the rest.
  static constexpr std::array<std::string_view, 6> kNames = {"order_id", "user_id", "quantity",
                                                             "ts",       "limit",   "draw"};
  std::array<std::string_view, 7> parts;
  std::string_view rest = value;
  for (size_t i = 0; i < kNames.size(); ++i) {
    const size_t bar = rest.find('|');
    if (bar == std::string_view::npos) {
      fields.emplace_back(name, value);
      return;
    }
    parts[i] = rest.substr(0, bar);
    rest.remove_prefix(bar + 1);
  }
  parts[6] = rest;
  for (size_t i = 0; i < 4; ++i) fields.emplace_back(kNames[i], parts[i]);
  fields.emplace_back("items", parts[6]);
  for (size_t i = 4; i < kNames.size(); ++i) {
    if (!parts[i].empty()) fields.emplace_back(kNames[i], parts[i]);
  }
}

std::string_view OrderIdOfField(std::string_view name, std::string_view value) {
  if (name == "order_id") return value;
  if (name != kPackedIntentField) return {};
  const size_t bar = value.find('|');
  return bar == std::string_view::npos ? std::string_view() : value.substr(0, bar);
}

std::string OrderIntent::IntentId() const {
  return part == 0 ? entry_id : fmt::format("{}/{}", entry_id, part);
}

OrderIntent DecodeOrderIntent(const StreamEntry& entry) {
  OrderIntent intent;
  intent.entry_id = entry.id;
  intent.part = entry.part;
  intent.order_id = entry.Field("order_id");
  intent.user_id = entry.Field("user_id");
  if (!base::IsValidId(intent.order_id)) {
    intent.unreadable = fmt::format("unreadable intent: order_id '{}'", intent.order_id);
    return intent;
  }
  if (!base::IsValidId(intent.user_id)) {
    intent.unreadable = fmt::format("unreadable intent: user_id '{}'", intent.user_id);
    return intent;
  }
  if (!ParseInt(entry.Field("quantity"), intent.quantity) || intent.quantity < 1 ||
      intent.quantity > core::kMaxQuantityPerPurchase) {
    intent.unreadable = fmt::format("unreadable intent: quantity '{}'", entry.Field("quantity"));
    return intent;
  }
  if (!ParseInt(entry.Field("ts"), intent.created_ms)) {
    intent.unreadable = fmt::format("unreadable intent: ts '{}'", entry.Field("ts"));
    return intent;
  }
  intent.items = base::SplitWords(entry.Field("items"));
  intent.limit = OptionalNumber(entry.Field("limit"));
  intent.draw = OptionalNumber(entry.Field("draw"));
  // "wepoch.wseq"; absent or unreadable (an older version's entry): not known, {0, 0}.
  if (const std::string_view written = entry.Field(kWriteSeqField); !written.empty()) {
    const size_t dot = written.find('.');
    core::WriteSeq seq;
    if (dot != std::string_view::npos && ParseInt(written.substr(0, dot), seq.epoch) &&
        ParseInt(written.substr(dot + 1), seq.seq) && seq.epoch >= 0 && seq.seq >= 0) {
      intent.written = seq;
    }
  }
  return intent;
}

std::string_view StreamEntry::Field(std::string_view name) const {
  for (const auto& [key, value] : fields) {
    if (key == name) return value;
  }
  return {};
}

OrderStream::OrderStream(redis::ScriptRunner& runner, std::string key_namespace)
    : runner_(runner),
      namespace_(std::move(key_namespace)),
      dead_letter_(runner.scripts().Get("order_dead_letter")),
      retry_dead_(runner.scripts().Get("order_retry_dead")),
      moved_(dead_letter_, "moved"),
      released_(dead_letter_, "released"),
      retry_code_(retry_dead_, "code"),
      entry_id_(retry_dead_, "entry_id") {}

asio::awaitable<base::Status> EnsureStreamGroup(redis::ScriptRunner& runner, std::string_view key,
                                                std::string_view meta_key, std::string_view group) {
  const redis::Script& script = runner.scripts().Get("stream_group_ensure");
  const redis::IntField created(script, "created");
  redis::ScriptCall call(script);
  call.Key("stream", key).Key("meta", meta_key).Arg("group", group);
  auto reply = co_await redis::Await(runner, call);
  auto read = redis::ScriptReply::Read(script, reply);
  if (!read) co_return std::move(read).error();
  if (read->Int(created) < 0) {  // 1 created, 0 it existed: both fine
    co_return MakeError(ErrorCode::kNotFound, "no activity for stream '{}' (deleted)", key);
  }
  co_return base::Status();
}

asio::awaitable<Result<std::vector<StreamEntry>>> ReadGroupNew(redis::Connection& connection,
                                                               std::string_view key,
                                                               std::string_view group,
                                                               std::string_view consumer,
                                                               int64_t count) {
  const redis::IntArg n(count);
  const redis::Command read =
      Build({"XREADGROUP", "GROUP", group, consumer, "COUNT", n, "STREAMS", key, ">"});
  auto reply = co_await redis::Await(connection, read);
  if (!reply.ok()) co_return std::move(reply).error();
  if (reply->is_nil()) co_return std::vector<StreamEntry>{};
  if (!reply->is_array() || reply->size() != 1 || (*reply)[0].size() != 2) {
    co_return MakeError(ErrorCode::kProtocol, "XREADGROUP: unexpected {}", reply->Describe());
  }
  co_return ParseEntries((*reply)[0][1]);
}

asio::awaitable<Result<std::vector<StreamEntry>>> AutoClaim(redis::Connection& connection,
                                                            std::string_view key,
                                                            std::string_view group,
                                                            std::string_view consumer,
                                                            int64_t min_idle_ms, int64_t count) {
  const redis::IntArg idle(min_idle_ms);
  const redis::IntArg n(count);
  const redis::Command claim = Build({"XAUTOCLAIM", key, group, consumer, idle, "0-0", "COUNT", n});
  auto reply = co_await redis::Await(connection, claim);
  if (!reply.ok()) co_return std::move(reply).error();
  // [next cursor, entries, ids of deleted entries (removed from the pending list by Redis)]
  if (!reply->is_array() || reply->size() < 2) {
    co_return MakeError(ErrorCode::kProtocol, "XAUTOCLAIM: unexpected {}", reply->Describe());
  }
  co_return ParseEntries((*reply)[1]);
}

asio::awaitable<base::Status> OrderStream::EnsureGroup(std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  co_return co_await EnsureStreamGroup(runner_, keys.stream(), keys.meta(), kGroup);
}

asio::awaitable<Result<std::vector<OrderIntent>>> OrderStream::ReadNew(std::string_view activity_id,
                                                                       std::string_view consumer,
                                                                       int64_t count) {
  const ActivityKeys keys(namespace_, activity_id);
  auto entries =
      co_await ReadGroupNew(runner_.connection(), keys.stream(), kGroup, consumer, count);
  if (!entries.ok()) co_return std::move(entries).error();
  co_return DecodeAll(*entries);
}

asio::awaitable<Result<std::vector<OrderIntent>>> OrderStream::Claim(std::string_view activity_id,
                                                                     std::string_view consumer,
                                                                     int64_t min_idle_ms,
                                                                     int64_t count) {
  const ActivityKeys keys(namespace_, activity_id);
  auto entries =
      co_await AutoClaim(runner_.connection(), keys.stream(), kGroup, consumer, min_idle_ms, count);
  if (!entries.ok()) co_return std::move(entries).error();
  co_return DecodeAll(*entries);
}

asio::awaitable<Result<int64_t>> OrderStream::Ack(std::string_view activity_id,
                                                  std::span<const std::string> ids,
                                                  bool forget_failures) {
  if (ids.empty()) co_return int64_t{0};
  const ActivityKeys keys(namespace_, activity_id);
  std::vector<std::string_view> args = {"XACK", keys.stream(), kGroup};
  args.insert(args.end(), ids.begin(), ids.end());
  const redis::Command ack(args);
  if (!forget_failures) {
    auto reply = co_await redis::Await(runner_.connection(), ack);
    if (!reply.ok()) co_return std::move(reply).error();
    co_return reply->is_integer() ? reply->integer() : int64_t{0};
  }
  // Failure counts of entries that made it after all go too (one more command per batch).
  args[0] = "HDEL";
  args[1] = keys.failures();
  args.erase(args.begin() + 2);
  const redis::Command forget(args);
  auto reply = co_await redis::Await(runner_.connection(), ack);
  auto forgotten = co_await redis::Await(runner_.connection(), forget);
  if (!reply.ok()) co_return std::move(reply).error();
  if (!forgotten.ok()) co_return std::move(forgotten).error();
  co_return reply->is_integer() ? reply->integer() : int64_t{0};
}

asio::awaitable<Result<int64_t>> OrderStream::Touch(std::string_view activity_id,
                                                    std::string_view consumer,
                                                    std::span<const std::string> ids) {
  if (ids.empty()) co_return int64_t{0};
  const ActivityKeys keys(namespace_, activity_id);
  std::vector<std::string_view> args = {"XCLAIM", keys.stream(), kGroup, consumer, "0"};
  args.insert(args.end(), ids.begin(), ids.end());
  args.push_back("JUSTID");  // JUSTID: the delivery count does not grow
  const redis::Command touch(args);
  auto reply = co_await redis::Await(runner_.connection(), touch);
  if (!reply.ok()) co_return std::move(reply).error();
  if (!reply->is_array()) {
    co_return MakeError(ErrorCode::kProtocol, "XCLAIM: unexpected {}", reply->Describe());
  }
  co_return static_cast<int64_t>(reply->size());
}

asio::awaitable<Result<int64_t>> OrderStream::RecordFailure(std::string_view activity_id,
                                                            std::string_view entry_id) {
  const ActivityKeys keys(namespace_, activity_id);
  const redis::Command incr = Build({"HINCRBY", keys.failures(), entry_id, "1"});
  auto reply = co_await redis::Await(runner_.connection(), incr);
  if (!reply.ok()) co_return std::move(reply).error();
  co_return reply->integer();
}

asio::awaitable<Result<DeadLettered>> OrderStream::DeadLetter(std::string_view activity_id,
                                                              std::string_view entry_id,
                                                              std::span<const int> parts,
                                                              std::string_view error,
                                                              int64_t deliveries, int64_t now_ms) {
  std::vector<std::string> positions;  // 1-based among the entry's intents
  positions.reserve(parts.size());
  for (const int part : parts) positions.push_back(std::to_string(part + 1));
  const ActivityKeys keys(namespace_, activity_id);
  redis::ScriptCall call(dead_letter_);
  call.Key("stream", keys.stream())
      .Key("dead", keys.dead())
      .Key("failures", keys.failures())
      .Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Key("buyers", keys.buyers())
      .Key("orders", keys.orders())
      .Key("prizes", keys.prizes())
      .Arg("group", kGroup)
      .Arg("entry_id", entry_id)
      .Arg("error", error.substr(0, 1000))
      .Arg("deliveries", deliveries)
      .Arg("now_ms", now_ms)
      .Rest("part", positions);
  auto reply = co_await runner_.AsyncEval(call, asio::use_awaitable);
  // moved >= 1, or 0 no longer in the stream: either way it is out of the stream now.
  auto read = redis::ScriptReply::Read(dead_letter_, reply);
  if (!read) co_return std::move(read).error();
  co_return DeadLettered{.moved = read->Int(moved_), .released = read->Int(released_)};
}

asio::awaitable<Result<std::vector<StreamEntry>>> OrderStream::ListDead(
    std::string_view activity_id, int64_t count) {
  const ActivityKeys keys(namespace_, activity_id);
  const redis::IntArg n(count);
  const redis::Command range = Build({"XRANGE", keys.dead(), "-", "+", "COUNT", n});
  auto reply = co_await redis::Await(runner_.connection(), range);
  if (!reply.ok()) co_return std::move(reply).error();
  co_return ParseEntries(*reply);
}

asio::awaitable<Result<std::string>> OrderStream::RetryDead(std::string_view activity_id,
                                                            std::string_view dead_id) {
  const ActivityKeys keys(namespace_, activity_id);
  redis::ScriptCall call(retry_dead_);
  call.Key("dead", keys.dead())
      .Key("stream", keys.stream())
      .Key("orders", keys.orders())
      .Arg("dead_id", dead_id);
  auto reply = co_await runner_.AsyncEval(call, asio::use_awaitable);
  auto read = redis::ScriptReply::Read(retry_dead_, reply);
  if (!read) co_return std::move(read).error();
  const int64_t code = read->Int(retry_code_);
  if (code == 0) {
    co_return MakeError(ErrorCode::kNotFound, "no dead letter '{}' in activity '{}'", dead_id,
                        activity_id);
  }
  if (code == -1) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "dead letter '{}' of activity '{}' is not retried: its order's units went "
                        "back to stock when it was dead-lettered (the order shows as refused; the "
                        "buyer may buy again)",
                        dead_id, activity_id);
  }
  co_return std::string(read->Str(entry_id_));
}

asio::awaitable<Result<GroupInfo>> OrderStream::Info(std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  GroupInfo info;
  const redis::Command xlen = Build({"XLEN", keys.stream()});
  const redis::Command dead = Build({"XLEN", keys.dead()});
  const redis::Command exists = Build({"EXISTS", keys.stream()});
  const redis::Command groups = Build({"XINFO", "GROUPS", keys.stream()});
  auto length = co_await redis::Await(runner_.connection(), xlen);
  auto dead_length = co_await redis::Await(runner_.connection(), dead);
  auto present = co_await redis::Await(runner_.connection(), exists);
  if (!length.ok()) co_return std::move(length).error();
  if (!dead_length.ok()) co_return std::move(dead_length).error();
  if (!present.ok()) co_return std::move(present).error();
  info.length = length->integer();
  info.dead_letters = dead_length->integer();
  info.lag = info.length;  // no group yet: nothing was delivered
  // XINFO on a missing stream is an error reply, which would count as a Redis error although
  // nothing failed (an activity just created, or one whose consumers have not started).
  if (present->integer() == 0) co_return info;
  auto group_list = co_await redis::Await(runner_.connection(), groups);
  if (!group_list.ok()) {
    if (group_list.error().detail == base::ErrorDetail::kNoSuchKey) co_return info;  // just gone
    co_return std::move(group_list).error();
  }
  for (size_t g = 0; g < group_list->size(); ++g) {
    redis::ReplyView group = (*group_list)[g];
    bool ours = false;
    GroupInfo found = info;
    for (size_t f = 0; f + 1 < group.size(); f += 2) {
      const std::string_view name = group[f].str();
      redis::ReplyView value = group[f + 1];
      if (name == "name") ours = value.str() == kGroup;
      if (name == "pending" && value.is_integer()) found.pending = value.integer();
      if (name == "lag") found.lag = value.is_integer() ? value.integer() : -1;
      if (name == "last-delivered-id") found.last_delivered_id = value.str();
    }
    if (!ours) continue;
    // Redis's lag is entries-added minus the group's entries-read counter, which replication
    // does not keep: a node that was primary and became a replica keeps its counter while the
    // reads replicated to it (XCLAIM ... LASTID) move its last-delivered-id, so promoted back
    // (a failover and back) it reports a lag that never goes away. Nothing after the last
    // delivered id: nothing lags.
    if (found.lag != 0 && !found.last_delivered_id.empty()) {
      const std::string after = "(" + found.last_delivered_id;
      const redis::Command next = Build({"XRANGE", keys.stream(), after, "+", "COUNT", "1"});
      auto undelivered = co_await redis::Await(runner_.connection(), next);
      if (!undelivered.ok()) co_return std::move(undelivered).error();
      if (undelivered->is_array() && undelivered->size() == 0) found.lag = 0;
    }
    co_return found;
  }
  co_return info;
}

asio::awaitable<Result<int64_t>> OrderStream::Length(std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  const redis::Command xlen = Build({"XLEN", keys.stream()});
  auto length = co_await redis::Await(runner_.connection(), xlen);
  if (!length.ok()) co_return std::move(length).error();
  if (!length->is_integer()) {
    co_return MakeError(ErrorCode::kProtocol, "XLEN: unexpected {}", length->Describe());
  }
  co_return length->integer();
}

asio::awaitable<Result<int64_t>> OrderStream::Trim(std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  auto info = co_await Info(activity_id);
  if (!info.ok()) co_return std::move(info).error();
  std::string threshold = info->last_delivered_id;
  if (info->pending > 0) {
    const redis::Command pending = Build({"XPENDING", keys.stream(), kGroup});
    auto summary = co_await redis::Await(runner_.connection(), pending);
    if (!summary.ok()) co_return std::move(summary).error();
    if (!summary->is_array() || summary->size() < 2 || !(*summary)[1].is_string()) {
      co_return MakeError(ErrorCode::kProtocol, "XPENDING: unexpected {}", summary->Describe());
    }
    threshold = (*summary)[1].str();  // the oldest entry not yet in the database
  }
  if (threshold.empty() || threshold == "0-0") co_return int64_t{0};
  // MINID removes entries below the threshold only; '~' may remove fewer, never more.
  const redis::Command trim = Build({"XTRIM", keys.stream(), "MINID", "~", threshold});
  auto trimmed = co_await redis::Await(runner_.connection(), trim);
  if (!trimmed.ok()) co_return std::move(trimmed).error();
  co_return trimmed->integer();
}

}  // namespace flashsale::keyspace
