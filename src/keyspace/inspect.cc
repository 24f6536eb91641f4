#include "keyspace/inspect.h"

#include <boost/asio/use_awaitable.hpp>

#include "base/strings.h"
#include "keyspace/order_stream.h"

namespace flashsale::keyspace {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr int64_t kPage = 1000;
constexpr size_t kRestoreChunk = 250;

// The order ids of a whole stream, read in pages (XRANGE with an exclusive start).
asio::awaitable<base::Status> CollectOrderIds(redis::Connection& connection, const std::string& key,
                                              std::set<std::string>& out) {
  std::string start = "-";
  const redis::IntArg count(kPage);
  for (;;) {
    const redis::Command range({"XRANGE", key, start, "+", "COUNT", count});
    auto reply = co_await redis::Await(connection, range);
    if (!reply.ok()) co_return std::move(reply).error();
    if (!reply->is_array()) {
      co_return MakeError(ErrorCode::kProtocol, "XRANGE: unexpected {}", reply->Describe());
    }
    for (size_t i = 0; i < reply->size(); ++i) {
      redis::ReplyView entry = (*reply)[i];
      if (!entry.is_array() || entry.size() != 2) continue;
      redis::ReplyView fields = entry[1];
      for (size_t f = 0; f + 1 < fields.size(); f += 2) {
        const std::string_view id = OrderIdOfField(fields[f].str(), fields[f + 1].str());
        if (!id.empty()) out.emplace(id);
      }
      start = "(" + std::string(entry[0].str());
    }
    if (static_cast<int64_t>(reply->size()) < kPage) co_return base::Status();
  }
}

}  // namespace

ActivityInspector::ActivityInspector(redis::ScriptRunner& runner, std::string key_namespace)
    : runner_(runner),
      namespace_(std::move(key_namespace)),
      reappend_(runner.scripts().Get("order_reappend")),
      reapply_(runner.scripts().Get("activity_reapply_orders")),
      rebase_(runner.scripts().Get("activity_write_rebase")),
      appended_(reappend_, "appended"),
      applied_(reapply_, "applied"),
      units_(reapply_, "units"),
      present_(reapply_, "present"),
      short_units_(reapply_, "short_units"),
      short_order_id_(reapply_, "short_order_id"),
      rebase_code_(rebase_, "code"),
      rebase_epoch_(rebase_, "wepoch"),
      rebase_seq_(rebase_, "wseq") {}

asio::awaitable<Result<std::vector<OrderRecordEntry>>> ActivityInspector::Orders(
    std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  std::vector<OrderRecordEntry> out;
  std::string cursor = "0";
  const redis::IntArg count(kPage);
  do {
    const redis::Command scan({"HSCAN", keys.orders(), cursor, "COUNT", count});
    auto reply = co_await redis::Await(runner_.connection(), scan);
    if (!reply.ok()) co_return std::move(reply).error();
    if (!reply->is_array() || reply->size() != 2 || !(*reply)[1].is_array()) {
      co_return MakeError(ErrorCode::kProtocol, "HSCAN: unexpected {}", reply->Describe());
    }
    cursor = (*reply)[0].str();
    redis::ReplyView pairs = (*reply)[1];
    for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
      const std::string_view id = pairs[i].str();
      const std::string_view record = pairs[i + 1].str();
      if (record.size() < 2 || record[1] != '|') continue;
      OrderRecordEntry entry;
      entry.state = record[0];
      const size_t bar = record.find('|', 2);
      entry.user_id = record.substr(2, bar == std::string_view::npos ? 0 : bar - 2);
      // N records (draws that won nothing) are not orders; R and X parse as RecordedOrder.
      if (entry.state == 'N') continue;
      auto parsed = ParseOrderRecord(id, record);
      if (!parsed) continue;
      entry.order = std::move(*parsed);
      out.push_back(std::move(entry));
    }
  } while (cursor != "0");
  co_return out;
}

asio::awaitable<Result<std::set<std::string>>> ActivityInspector::OrderIdsInStreams(
    std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  std::set<std::string> ids;
  for (const std::string* key : {&keys.stream(), &keys.dead()}) {
    auto collected = co_await CollectOrderIds(runner_.connection(), *key, ids);
    if (!collected.ok()) co_return std::move(collected).error();
  }
  co_return ids;
}

asio::awaitable<Result<bool>> ActivityInspector::Reappend(std::string_view activity_id,
                                                          std::string_view order_id) {
  const ActivityKeys keys(namespace_, activity_id);
  redis::ScriptCall call(reappend_);
  call.Key("orders", keys.orders()).Key("stream", keys.stream()).Arg("order_id", order_id);
  auto reply = co_await redis::Await(runner_, call);
  auto read = redis::ScriptReply::Read(reappend_, reply);
  if (!read) co_return std::move(read).error();
  co_return read->Int(appended_) == 1;
}

asio::awaitable<Result<ReapplyResult>> ActivityInspector::ReapplyOrders(
    std::string_view activity_id, std::span<const RestoredOrder> orders) {
  const ActivityKeys keys(namespace_, activity_id);
  ReapplyResult total;
  for (size_t start = 0; start < orders.size(); start += kRestoreChunk) {
    std::vector<std::string> args;
    for (size_t i = start; i < std::min(orders.size(), start + kRestoreChunk); ++i) {
      const RestoredOrder& order = orders[i];
      args.push_back(order.order_id);
      args.push_back(order.user_id);
      args.push_back(std::to_string(order.quantity));
      args.push_back(std::to_string(order.draw_no));
      args.push_back(fmt::format("R|{}|{}|{}|{}", order.user_id, order.quantity, order.created_ms,
                                 base::JoinWords(order.items)));
    }
    redis::ScriptCall call(reapply_);
    call.Key("meta", keys.meta())
        .Key("stock", keys.stock())
        .Key("items", keys.items())
        .Key("buyers", keys.buyers())
        .Key("orders", keys.orders())
        .Key("prizes", keys.prizes())
        .Rest("orders", args);
    auto reply = co_await redis::Await(runner_, call);
    auto read = redis::ScriptReply::Read(reapply_, reply);
    if (!read) co_return std::move(read).error();
    total.applied += read->Int(applied_);
    total.units += read->Int(units_);
    total.present += read->Int(present_);
    total.short_units += read->Int(short_units_);
    for (size_t i = 0; i < read->Rows(); ++i) {
      total.short_orders.emplace_back(read->Str(short_order_id_, i));
    }
  }
  co_return total;
}

asio::awaitable<Result<RebaseResult>> ActivityInspector::Rebase(std::string_view activity_id,
                                                                int64_t epoch, WriteSeq seen) {
  const ActivityKeys keys(namespace_, activity_id);
  redis::ScriptCall call(rebase_);
  call.Key("meta", keys.meta())
      .Arg("epoch", epoch)
      .Arg("seen_epoch", seen.epoch)
      .Arg("seen_seq", seen.seq);
  auto reply = co_await redis::Await(runner_, call);
  auto read = redis::ScriptReply::Read(rebase_, reply);
  if (!read) co_return std::move(read).error();
  RebaseResult result;
  result.now = {read->Int(rebase_epoch_), read->Int(rebase_seq_)};
  switch (read->Int(rebase_code_)) {
    case 1:
      result.outcome = RebaseResult::Outcome::kRebased;
      break;
    case 0:
      result.outcome = RebaseResult::Outcome::kAlready;
      break;
    case -1:
      result.outcome = RebaseResult::Outcome::kBehind;
      break;
    default:
      result.outcome = RebaseResult::Outcome::kNotLoaded;
      break;
  }
  co_return result;
}

asio::awaitable<Result<std::vector<std::string>>> ActivityInspector::IdempotentOrderIds(
    std::string_view activity_id) {
  const ActivityKeys keys(namespace_, activity_id);
  const std::string pattern = keys.Idempotency("*");
  // SCAN has no key, and a server answers it from its own keys: on a cluster each primary is
  // scanned, its cursor followed on that node (a cursor means nothing to another node). The
  // activity's idempotency keys all carry its hash tag, so they share one slot, and scanning only
  // the primary that owns it would also find them, for less work (one node's keys instead of
  // all). Every primary is scanned all the same: a SCAN sent to a node that does not hold the
  // slot answers with nothing, not with MOVED, so a slot map that is stale (just after a
  // failover, the very moment this scan runs) or a slot in the middle of a migration (its keys
  // split between two nodes) would silently hide records; with every primary, a stale map shows
  // as an error (a node down), never as a gap. The cost is what one server holding the same keys
  // costs: each key is looked at once, on its own node.
  redis::Connection& connection = runner_.connection();
  auto nodes =
      co_await connection.AsyncPrimaries(connection.DefaultDeadline(), asio::use_awaitable);
  if (!nodes.ok()) co_return std::move(nodes).error();
  std::set<std::string> names;  // a key is on one node; a set all the same, for order and safety
  const redis::IntArg count(kPage);
  for (const redis::ServerNode& node : *nodes) {
    std::string cursor = "0";
    do {
      const redis::Command scan({"SCAN", cursor, "MATCH", pattern, "COUNT", count});
      auto reply = co_await connection.AsyncSendToNode(node, scan, connection.DefaultDeadline(),
                                                       asio::use_awaitable);
      if (!reply.ok()) co_return std::move(reply).error();
      if (!reply->is_array() || reply->size() != 2 || !(*reply)[1].is_array()) {
        co_return MakeError(ErrorCode::kProtocol, "SCAN on {}: unexpected {}", node.address,
                            reply->Describe());
      }
      cursor = (*reply)[0].str();
      for (size_t i = 0; i < (*reply)[1].size(); ++i) names.emplace((*reply)[1][i].str());
    } while (cursor != "0");
  }
  std::vector<std::string> ids;
  for (const auto& name : names) {
    const redis::Command get({"GET", name});
    auto reply = co_await redis::Await(runner_.connection(), get);
    if (!reply.ok()) co_return std::move(reply).error();
    if (!reply->is_string()) continue;  // expired meanwhile
    // "1|0|<order id>" (a sale) or "1|<draws>|<order id>|<user>" (a draw): only decided
    // successes name an order the buyer was told about.
    const std::string_view text = reply->str();
    if (!text.starts_with("1|")) continue;
    const size_t bar = text.find('|', 2);
    if (bar == std::string_view::npos) continue;
    std::string_view id = text.substr(bar + 1);
    id = id.substr(0, id.find('|'));
    if (!id.empty()) ids.emplace_back(id);
  }
  co_return ids;
}

}  // namespace flashsale::keyspace
