#include "redis/inspect.h"

#include <boost/asio/use_awaitable.hpp>

#include "base/strings.h"

namespace flashsale::redis {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr int64_t kPage = 1000;
constexpr size_t kRestoreChunk = 250;

// The order ids of a whole stream, read in pages (XRANGE with an exclusive start).
asio::awaitable<base::Status> CollectOrderIds(Connection& connection, const std::string& key,
                                              std::set<std::string>& out) {
  std::string start = "-";
  const IntArg count(kPage);
  for (;;) {
    const Command range({"XRANGE", key, start, "+", "COUNT", count});
    auto reply = co_await Await(connection, range);
    if (!reply.ok()) co_return std::move(reply).error();
    if (!reply->is_array()) {
      co_return MakeError(ErrorCode::kProtocol, "XRANGE: unexpected {}", reply->Describe());
    }
    for (size_t i = 0; i < reply->size(); ++i) {
      ReplyView entry = (*reply)[i];
      if (!entry.is_array() || entry.size() != 2) continue;
      ReplyView fields = entry[1];
      for (size_t f = 0; f + 1 < fields.size(); f += 2) {
        if (fields[f].str() == "order_id") out.emplace(fields[f + 1].str());
      }
      start = "(" + std::string(entry[0].str());
    }
    if (static_cast<int64_t>(reply->size()) < kPage) co_return base::Status();
  }
}

}  // namespace

ActivityInspector::ActivityInspector(ScriptRunner& runner, std::string key_namespace)
    : runner_(runner),
      namespace_(std::move(key_namespace)),
      reappend_(runner.scripts().Get("order_reappend")),
      restore_(runner.scripts().Get("activity_restore_orders")),
      appended_(reappend_, "appended"),
      restored_(restore_, "restored") {}

asio::awaitable<Result<std::vector<OrderRecordEntry>>> ActivityInspector::Orders(
    std::string_view activity_id) {
  const SeckillKeys keys(namespace_, activity_id);
  std::vector<OrderRecordEntry> out;
  std::string cursor = "0";
  const IntArg count(kPage);
  do {
    const Command scan({"HSCAN", keys.orders(), cursor, "COUNT", count});
    auto reply = co_await Await(runner_.connection(), scan);
    if (!reply.ok()) co_return std::move(reply).error();
    if (!reply->is_array() || reply->size() != 2 || !(*reply)[1].is_array()) {
      co_return MakeError(ErrorCode::kProtocol, "HSCAN: unexpected {}", reply->Describe());
    }
    cursor = (*reply)[0].str();
    ReplyView pairs = (*reply)[1];
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
  const SeckillKeys keys(namespace_, activity_id);
  std::set<std::string> ids;
  for (const std::string* key : {&keys.stream(), &keys.dead()}) {
    auto collected = co_await CollectOrderIds(runner_.connection(), *key, ids);
    if (!collected.ok()) co_return std::move(collected).error();
  }
  co_return ids;
}

asio::awaitable<Result<bool>> ActivityInspector::Reappend(std::string_view activity_id,
                                                          std::string_view order_id) {
  const SeckillKeys keys(namespace_, activity_id);
  ScriptCall call(reappend_);
  call.Key("orders", keys.orders()).Key("stream", keys.stream()).Arg("order_id", order_id);
  auto reply = co_await Await(runner_, call);
  auto read = ScriptReply::Read(reappend_, reply);
  if (!read) co_return std::move(read).error();
  co_return read->Int(appended_) == 1;
}

asio::awaitable<Result<int64_t>> ActivityInspector::RestoreOrders(
    std::string_view activity_id, std::span<const RestoredOrder> orders) {
  const SeckillKeys keys(namespace_, activity_id);
  int64_t restored = 0;
  for (size_t start = 0; start < orders.size(); start += kRestoreChunk) {
    std::vector<std::string> args;
    for (size_t i = start; i < std::min(orders.size(), start + kRestoreChunk); ++i) {
      const RestoredOrder& order = orders[i];
      args.push_back(order.order_id);
      args.push_back(order.user_id);
      args.push_back(std::to_string(order.quantity));
      args.push_back(fmt::format("R|{}|{}|{}|{}", order.user_id, order.quantity, order.created_ms,
                                 base::JoinWords(order.items)));
    }
    ScriptCall call(restore_);
    call.Key("meta", keys.meta())
        .Key("buyers", keys.buyers())
        .Key("orders", keys.orders())
        .Key("user_orders", keys.user_orders())
        .Rest("orders", args);
    auto reply = co_await Await(runner_, call);
    auto read = ScriptReply::Read(restore_, reply);
    if (!read) co_return std::move(read).error();
    restored += read->Int(restored_);
  }
  co_return restored;
}

}  // namespace flashsale::redis
