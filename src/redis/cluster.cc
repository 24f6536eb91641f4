#include "redis/cluster.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <charconv>
#include <optional>

namespace flashsale::redis {

namespace asio = boost::asio;
using base::Error;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

// CRC16-CCITT as XMODEM computes it (polynomial 0x1021, initial value 0, no reflection, no final
// xor), by a table of the 256 byte values built at compile time.
constexpr std::array<uint16_t, 256> MakeCrcTable() {
  std::array<uint16_t, 256> table{};
  for (int byte = 0; byte < 256; ++byte) {
    auto crc = static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[static_cast<size_t>(byte)] = crc;
  }
  return table;
}
constexpr std::array<uint16_t, 256> kCrcTable = MakeCrcTable();

uint16_t Crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (char c : bytes) {
    crc = static_cast<uint16_t>((crc << 8) ^
                                kCrcTable[((crc >> 8) ^ static_cast<uint8_t>(c)) & 0xFF]);
  }
  return crc;
}

constexpr std::string_view kAsking = "*1\r\n$6\r\nASKING\r\n";

bool EqualsUpper(std::string_view text, std::string_view upper) {
  return text.size() == upper.size() &&
         std::equal(text.begin(), text.end(), upper.begin(), [](char a, char b) {
           return (a >= 'a' && a <= 'z' ? static_cast<char>(a - 32) : a) == b;
         });
}

// The arguments of a command in wire form: a RESP array of bulk strings, as Command formats it.
std::optional<std::vector<std::string_view>> Arguments(std::string_view wire) {
  auto number = [&](char marker) -> std::optional<size_t> {
    if (wire.empty() || wire.front() != marker) return std::nullopt;
    const size_t end = wire.find("\r\n");
    if (end == std::string_view::npos) return std::nullopt;
    size_t value = 0;
    auto [ptr, ec] = std::from_chars(wire.data() + 1, wire.data() + end, value);
    if (ec != std::errc() || ptr != wire.data() + end) return std::nullopt;
    wire.remove_prefix(end + 2);
    return value;
  };
  auto count = number('*');
  if (!count || *count == 0) return std::nullopt;
  std::vector<std::string_view> args;
  args.reserve(*count);
  for (size_t i = 0; i < *count; ++i) {
    auto length = number('$');
    if (!length || wire.size() < *length + 2) return std::nullopt;
    args.push_back(wire.substr(0, *length));
    wire.remove_prefix(*length + 2);
  }
  return args;
}

// The slot of keys that must share one; an error when they do not.
Result<Route> SameSlot(std::span<const std::string_view> keys, std::string_view command) {
  Route route{Route::Kind::kSlot, KeySlot(keys.front())};
  for (std::string_view key : keys.subspan(1)) {
    if (KeySlot(key) != route.slot) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "{} with keys in more than one cluster slot ('{}' and '{}'); not sent",
                       command, keys.front(), key);
    }
  }
  return route;
}

bool IsKeyless(std::string_view name) {
  for (std::string_view keyless :
       {"PING", "INFO", "CLUSTER", "TIME", "DBSIZE", "COMMAND", "CONFIG", "CLIENT", "HELLO", "AUTH",
        "SELECT", "ACL", "LASTSAVE", "ECHO", "ROLE", "FUNCTION", "READONLY"}) {
    if (EqualsUpper(name, keyless)) return true;
  }
  return false;
}

// "MOVED 3999 127.0.0.1:6381" / "ASK ..." -> slot, host, port.
struct Redirect {
  uint16_t slot = 0;
  std::string host;
  uint16_t port = 0;
};
std::optional<Redirect> ParseRedirect(std::string_view message) {
  const size_t first = message.find(' ');
  const size_t second = message.find(' ', first + 1);
  if (first == std::string_view::npos || second == std::string_view::npos) return std::nullopt;
  const std::string_view slot_text = message.substr(first + 1, second - first - 1);
  const std::string_view address = message.substr(second + 1);
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  Redirect redirect;
  unsigned slot = 0;
  unsigned port = 0;
  auto [p1, e1] = std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot);
  const std::string_view port_text = address.substr(colon + 1);
  auto [p2, e2] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (e1 != std::errc() || e2 != std::errc() || slot >= kClusterSlots || port == 0 ||
      port > 65535) {
    return std::nullopt;
  }
  redirect.slot = static_cast<uint16_t>(slot);
  redirect.port = static_cast<uint16_t>(port);
  redirect.host = std::string(address.substr(0, colon));
  // A node that announces no address ("?:port" or ":port") is reached where the reply came from;
  // not expected on a configured cluster.
  if (redirect.host.empty() || redirect.host == "?") return std::nullopt;
  return redirect;
}

bool StartsWithWord(std::string_view text, std::string_view word) {
  return text.starts_with(word) && (text.size() == word.size() || text[word.size()] == ' ');
}

}  // namespace

uint16_t KeySlot(std::string_view key) {
  if (const size_t open = key.find('{'); open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & (kClusterSlots - 1);
}

Result<Route> RouteOf(std::string_view wire) {
  auto parsed = Arguments(wire);
  if (!parsed) {
    return Error{ErrorCode::kInvalidArgument, "not a RESP command; not sent"};
  }
  const std::vector<std::string_view>& args = *parsed;
  const std::string_view name = args[0];
  if (args.size() == 1 || IsKeyless(name)) return Route{Route::Kind::kAnyPrimary, 0};
  if (EqualsUpper(name, "SCRIPT")) return Route{Route::Kind::kAllPrimaries, 0};
  if (EqualsUpper(name, "SCAN") || EqualsUpper(name, "KEYS")) {
    // No key: its first argument is a cursor or a pattern, and a node answers from its own keys
    // alone, so routing it anywhere would silently see a part of the data.
    return MakeError(ErrorCode::kInvalidArgument,
                     "{} reads one node's keys: on a cluster send it to each primary "
                     "(Connection::Primaries, SendToNode); not sent",
                     name);
  }
  if (EqualsUpper(name, "EVALSHA") || EqualsUpper(name, "EVAL") ||
      EqualsUpper(name, "EVALSHA_RO") || EqualsUpper(name, "EVAL_RO") ||
      EqualsUpper(name, "FCALL") || EqualsUpper(name, "FCALL_RO")) {
    size_t numkeys = 0;
    if (args.size() < 3) return Route{Route::Kind::kAnyPrimary, 0};
    auto [ptr, ec] = std::from_chars(args[2].data(), args[2].data() + args[2].size(), numkeys);
    if (ec != std::errc() || numkeys > args.size() - 3) {
      return Error{ErrorCode::kInvalidArgument, "a script call with a bad key count; not sent"};
    }
    if (numkeys == 0) return Route{Route::Kind::kAnyPrimary, 0};
    return SameSlot(std::span(args).subspan(3, numkeys), "a script call");
  }
  if (EqualsUpper(name, "XREADGROUP") || EqualsUpper(name, "XREAD")) {
    for (size_t i = 1; i < args.size(); ++i) {
      if (!EqualsUpper(args[i], "STREAMS")) continue;
      const size_t streams = (args.size() - i - 1) / 2;
      if (streams == 0) break;
      return SameSlot(std::span(args).subspan(i + 1, streams), name);
    }
    return Error{ErrorCode::kInvalidArgument, "XREAD without STREAMS; not sent"};
  }
  if (EqualsUpper(name, "XGROUP") || EqualsUpper(name, "XINFO") || EqualsUpper(name, "OBJECT") ||
      EqualsUpper(name, "MEMORY")) {
    if (args.size() < 3) return Route{Route::Kind::kAnyPrimary, 0};
    return Route{Route::Kind::kSlot, KeySlot(args[2])};
  }
  return Route{Route::Kind::kSlot, KeySlot(args[1])};
}

ClusterRouter::ClusterRouter(asio::any_io_executor executor, ConnectionOptions options)
    : Connection(std::move(executor), std::move(options)), refresh_timer_(executor_) {
  slots_.fill(-1);
}

ClusterRouter::~ClusterRouter() = default;

size_t ClusterRouter::primaries() const {
  return static_cast<size_t>(
      std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.primary; }));
}

std::string ClusterRouter::NodeOfSlot(uint16_t slot) const {
  if (slot >= kClusterSlots || slots_[slot] < 0) return {};
  const Node& node = nodes_[static_cast<size_t>(slots_[slot])];
  return fmt::format("{}:{}", node.host, node.port);
}

void ClusterRouter::Start() {
  if (started_) return;
  started_ = true;
  for (const auto& [host, port] : options_.endpoint.seeds) NodeFor(host, port);
  RequestRefresh();
}

void ClusterRouter::Stop() {
  if (stopped_) return;
  stopped_ = true;
  refresh_timer_.cancel();
  for (auto& node : nodes_) node.connection->Stop();
  auto waiting = std::move(waiting_for_map_);
  waiting_for_map_.clear();
  for (auto& call : waiting) {
    Fail(std::move(call), Error{ErrorCode::kCancelled, "connection stopped; not sent"});
  }
}

size_t ClusterRouter::NodeFor(const std::string& host, uint16_t port) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].port == port && nodes_[i].host == host) return i;
  }
  ConnectionOptions node_options = options_;
  node_options.endpoint.kind = Endpoint::Kind::kTcp;
  node_options.endpoint.host = host;
  node_options.endpoint.port = port;
  node_options.endpoint.db = 0;
  node_options.endpoint.cluster = false;
  node_options.endpoint.seeds.clear();
  node_options.cluster_node = true;
  const size_t index = nodes_.size();
  if (options_.on_server) {
    node_options.on_server = [weak = weak_from_this(), index, watch = options_.on_server](
                                 std::string_view name, std::string_view run_id) {
      auto self = weak.lock();
      if (!self || index >= self->nodes_.size()) return true;
      Node& node = self->nodes_[index];
      node.run_id = std::string(run_id);
      // Serves no slot (once the map is known): nothing it holds is sold, nothing to watch.
      if (self->map_loaded_ && !node.primary) return true;
      return watch(name, run_id);
    };
  }
  Node node{host, port, NodeConnection::Create(executor_, std::move(node_options)), false, {}};
  node.connection->Start();
  if (stopped_) node.connection->Stop();
  nodes_.push_back(std::move(node));
  return nodes_.size() - 1;
}

void ClusterRouter::DoSend(std::string_view wire, Deadline deadline, ReplyHandler handler) {
  SendRouted(wire, deadline, std::move(handler), std::nullopt);
}

void ClusterRouter::DoSendToNodeOf(std::string_view key, std::string_view wire, Deadline deadline,
                                   ReplyHandler handler) {
  SendRouted(wire, deadline, std::move(handler), Route{Route::Kind::kSlot, KeySlot(key)});
}

void ClusterRouter::DoSendToNode(const ServerNode& node, std::string_view wire, Deadline deadline,
                                 ReplyHandler handler) {
  SendRouted(wire, deadline, std::move(handler), Route{Route::Kind::kNode, 0, node.id});
}

void ClusterRouter::SendRouted(std::string_view wire, Deadline deadline, ReplyHandler handler,
                               std::optional<Route> forced) {
  stats_.commands.Add();
  auto call = std::make_unique<Call>(std::move(handler), deadline);
  call->sent_at = Clock::now();
  if (stopped_ || !started_) {
    Fail(std::move(call),
         Error{stopped_ ? ErrorCode::kCancelled : ErrorCode::kUnavailable,
               stopped_ ? "connection stopped; not sent" : "connection not started; not sent"});
    return;
  }
  auto route = forced ? Result<Route>(*forced) : RouteOf(wire);
  if (!route) {
    Fail(std::move(call), std::move(route).error());
    return;
  }
  call->route = *route;
  call->wire = std::string(wire);
  if (!map_loaded_) {
    if (waiting_for_map_.size() >= options_.max_queued) {
      Fail(std::move(call),
           Error{ErrorCode::kResourceExhausted,
                 "too many commands waiting for the cluster's slot map; not sent"});
      return;
    }
    waiting_for_map_.push_back(std::move(call));
    RequestRefresh();
    return;
  }
  Dispatch(std::move(call));
}

void ClusterRouter::Primaries(Deadline deadline, NodesHandler handler) {
  using Nodes = Result<std::vector<ServerNode>>;
  auto list = [this]() -> Nodes {
    std::vector<ServerNode> out;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].primary) {
        out.push_back(ServerNode{i, fmt::format("{}:{}", nodes_[i].host, nodes_[i].port)});
      }
    }
    if (out.empty()) {
      return MakeError(ErrorCode::kUnavailable, "redis cluster {}: no primary known ({})",
                       options_.endpoint.Describe(), last_error_);
    }
    return out;
  };
  if (stopped_ || !started_ || map_loaded_) {
    Nodes nodes = stopped_    ? Nodes(Error{ErrorCode::kCancelled, "connection stopped"})
                  : !started_ ? Nodes(Error{ErrorCode::kUnavailable, "connection not started"})
                              : list();
    asio::post(executor_, asio::append(std::move(handler), std::move(nodes)));
    return;
  }
  // No map yet: a PING waits for it like any command (or fails with the reason there is none).
  static const Command kPing{"PING"};
  Send(kPing.wire(), deadline,
       ReplyHandler([self = shared_from_this(), list,
                     handler = std::move(handler)](Result<Reply> result) mutable {
         Nodes nodes = self->map_loaded_ ? list()
                       : result.ok() ? Nodes(Error{ErrorCode::kUnavailable, "no cluster slot map"})
                                     : Nodes(std::move(result).error());
         asio::dispatch(asio::append(std::move(handler), std::move(nodes)));
       }));
}

void ClusterRouter::Dispatch(CallPtr call) {
  if (stopped_) {
    Finish(std::move(call), Error{ErrorCode::kCancelled, "connection stopped; not sent"});
    return;
  }
  switch (call->route.kind) {
    case Route::Kind::kAllPrimaries:
      Broadcast(std::move(call));
      return;
    case Route::Kind::kAnyPrimary: {
      for (size_t tried = 0; tried < nodes_.size(); ++tried) {
        const size_t index = next_any_++ % nodes_.size();
        if (nodes_[index].primary) {
          SendTo(index, std::move(call), false);
          return;
        }
      }
      break;
    }
    case Route::Kind::kNode: {
      const size_t node = call->route.node;  // read before `call` is moved
      if (node < nodes_.size()) {
        SendTo(node, std::move(call), false);
      } else {
        Finish(std::move(call),
               MakeError(ErrorCode::kInvalidArgument, "redis cluster {}: no node {}; not sent",
                         options_.endpoint.Describe(), node));
      }
      return;
    }
    case Route::Kind::kSlot: {
      const int16_t index = slots_[call->route.slot];
      if (index >= 0) {
        SendTo(static_cast<size_t>(index), std::move(call), false);
        return;
      }
      break;
    }
  }
  RequestRefresh();
  Error error =
      MakeError(ErrorCode::kUnavailable, "redis cluster {}: no primary for slot {} ({}); not sent",
                options_.endpoint.Describe(), call->route.slot, last_error_);
  Finish(std::move(call), std::move(error));
}

void ClusterRouter::SendTo(size_t node, CallPtr call, bool asking) {
  NodeConnection& connection = *nodes_[node].connection;
  if (asking) connection.Send(kAsking, call->deadline, ReplyHandler([](Result<Reply>) {}));
  const std::string_view wire = call->wire;
  const Deadline deadline = call->deadline;
  connection.Send(wire, deadline,
                  ReplyHandler([self = shared_from_this(),
                                call = std::move(call)](Result<Reply> result) mutable {
                    self->OnReply(std::move(call), std::move(result));
                  }));
}

void ClusterRouter::Broadcast(CallPtr call) {
  struct Join {
    CallPtr call;
    size_t left = 0;
    std::optional<Result<Reply>> result;  // the first error, else the first reply
  };
  std::vector<size_t> targets;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].primary) targets.push_back(i);
  }
  if (targets.empty()) {
    Finish(std::move(call),
           MakeError(ErrorCode::kUnavailable, "redis cluster {}: no primary known ({}); not sent",
                     options_.endpoint.Describe(), last_error_));
    return;
  }
  auto join = std::make_shared<Join>();
  join->left = targets.size();
  const std::string_view wire = call->wire;
  const Deadline deadline = call->deadline;
  join->call = std::move(call);
  for (size_t index : targets) {
    nodes_[index].connection->Send(
        wire, deadline, ReplyHandler([self = shared_from_this(), join](Result<Reply> result) {
          if (!join->result || (join->result->ok() && !result.ok())) {
            join->result.emplace(std::move(result));
          }
          if (--join->left == 0) self->Finish(std::move(join->call), std::move(*join->result));
        }));
  }
}

void ClusterRouter::OnReply(CallPtr call, Result<Reply> result) {
  if (result.ok() || stopped_) {
    Finish(std::move(call), std::move(result));
    return;
  }
  const Error& error = result.error();
  if (error.code == ErrorCode::kRemote) {
    const std::string_view message = error.message;
    const bool moved = StartsWithWord(message, "MOVED");
    const bool ask = StartsWithWord(message, "ASK");
    if (moved || ask) {
      auto redirect = ParseRedirect(message);
      if (!redirect) {
        Finish(std::move(call),
               MakeError(ErrorCode::kProtocol, "redis cluster: a redirection not understood: {}",
                         message));
        return;
      }
      if (++call->redirects > kMaxRedirects) {
        Finish(std::move(call),
               MakeError(ErrorCode::kUnavailable,
                         "redis cluster: more than {} redirections (the last: {}); did not run",
                         kMaxRedirects, message));
        return;
      }
      const size_t node = NodeFor(redirect->host, redirect->port);
      if (moved) {
        ++moved_;
        slots_[redirect->slot] = static_cast<int16_t>(node);
        nodes_[node].primary = true;
        RequestRefresh();
      } else {
        ++asked_;
      }
      SendTo(node, std::move(call), ask);
      return;
    }
    if (StartsWithWord(message, "TRYAGAIN") || StartsWithWord(message, "CLUSTERDOWN")) {
      if (StartsWithWord(message, "CLUSTERDOWN")) RequestRefresh();
      Retry(std::move(call), std::string(message));
      return;
    }
  } else if (error.code == ErrorCode::kUnavailable) {
    // Not written: the node is down or unreachable. A failover may have given its slots to
    // another node; the next calls find out from the refreshed map.
    RequestRefresh();
  }
  Finish(std::move(call), std::move(result));
}

void ClusterRouter::Retry(CallPtr call, std::string reason) {
  const int attempt = ++call->retries;
  const auto backoff = std::chrono::milliseconds(std::min(10 << std::min(attempt - 1, 6), 500));
  if (attempt > kMaxRetries || Clock::now() + backoff >= call->deadline) {
    Finish(std::move(call),
           MakeError(ErrorCode::kUnavailable,
                     "redis cluster did not run the command ({} attempts, the last: {})", attempt,
                     reason));
    return;
  }
  ++retried_;
  auto timer = std::make_shared<asio::steady_timer>(executor_, backoff);
  timer->async_wait([self = shared_from_this(), timer,
                     call = std::move(call)](const boost::system::error_code&) mutable {
    self->Dispatch(std::move(call));
  });
}

void ClusterRouter::Finish(CallPtr call, Result<Reply> result) {
  if (result.ok()) {
    stats_.replies.Add();
    stats_.latency.Record(Clock::now() - call->sent_at);
  } else {
    if (result.error().code == ErrorCode::kRemote) stats_.replies.Add();
    // A node connection's deadline (its own stats are per node).
    if (result.error().detail == base::ErrorDetail::kDeadline) stats_.timeouts.Add();
    stats_.CountError(result.error().code);
  }
  asio::dispatch(asio::append(std::move(call->handler), std::move(result)));
}

void ClusterRouter::Fail(CallPtr call, Error error) {
  stats_.CountError(error.code);
  asio::post(executor_, asio::append(std::move(call->handler), Result<Reply>(std::move(error))));
}

void ClusterRouter::RequestRefresh() {
  if (stopped_) return;
  if (refreshing_) {
    refresh_again_ = true;
    return;
  }
  if (refresh_timer_armed_) return;
  // At most one refresh per 100 ms: a burst of MOVED replies makes one.
  const auto due = last_refresh_ + std::chrono::milliseconds(100);
  if (Clock::now() >= due || !map_loaded_) {
    Refresh(0);
    return;
  }
  refresh_timer_armed_ = true;
  refresh_timer_.expires_at(due);
  refresh_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    self->refresh_timer_armed_ = false;
    if (!error && !self->stopped_ && !self->refreshing_) self->Refresh(0);
  });
}

void ClusterRouter::Refresh(size_t attempt) {
  if (stopped_) return;
  refreshing_ = true;
  // Primaries of the map first (round robin), then every node known, seeds included.
  std::vector<size_t> order;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].primary) order.push_back(i);
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].primary) order.push_back(i);
  }
  if (attempt >= order.size()) {
    refreshing_ = false;
    last_refresh_ = Clock::now();
    MapFailed(last_error_);
    return;
  }
  const size_t node = order[(refreshes_ + attempt) % order.size()];
  static const Command kShards{"CLUSTER", "SHARDS"};
  const Deadline deadline = Clock::now() + options_.connect_timeout + options_.command_timeout;
  nodes_[node].connection->Send(
      kShards.wire(), deadline,
      ReplyHandler([self = shared_from_this(), node, attempt](Result<Reply> result) {
        if (self->stopped_) return;
        base::Status applied =
            result.ok() ? self->ApplyShards(*result) : base::Status(std::move(result).error());
        if (!applied.ok()) {
          self->last_error_ = fmt::format("CLUSTER SHARDS on {}:{}: {}", self->nodes_[node].host,
                                          self->nodes_[node].port, applied.error().message);
          self->Refresh(attempt + 1);
          return;
        }
        self->refreshing_ = false;
        self->last_refresh_ = Clock::now();
        ++self->refreshes_;
        if (!self->map_loaded_) {
          spdlog::info("redis cluster {}: slot map loaded, {} primaries",
                       self->options_.endpoint.Describe(), self->primaries());
        }
        self->map_loaded_ = true;
        auto waiting = std::move(self->waiting_for_map_);
        self->waiting_for_map_.clear();
        for (auto& call : waiting) self->Dispatch(std::move(call));
        if (self->refresh_again_) {
          self->refresh_again_ = false;
          self->RequestRefresh();
        }
      }));
}

base::Status ClusterRouter::ApplyShards(const Reply& reply) {
  if (!reply.is_array() || reply.size() == 0) {
    return MakeError(ErrorCode::kProtocol, "expected an array of shards, got {}", reply.Describe());
  }
  std::array<int16_t, kClusterSlots> slots;
  slots.fill(-1);
  std::vector<size_t> primaries;
  size_t covered = 0;
  for (size_t s = 0; s < reply.size(); ++s) {
    const ReplyView shard = reply[s];
    if (!shard.is_array()) return MakeError(ErrorCode::kProtocol, "a shard is not a map");
    std::optional<ReplyView> ranges;
    std::optional<ReplyView> shard_nodes;
    for (size_t i = 0; i + 1 < shard.size(); i += 2) {
      if (shard[i].str() == "slots") ranges = shard[i + 1];
      if (shard[i].str() == "nodes") shard_nodes = shard[i + 1];
    }
    if (!ranges || !shard_nodes || !ranges->is_array() || !shard_nodes->is_array()) {
      return MakeError(ErrorCode::kProtocol, "a shard without slots or nodes");
    }
    if (ranges->size() == 0) continue;  // a shard that serves nothing (a primary left empty)
    std::string host;
    int64_t port = 0;
    for (size_t n = 0; n < shard_nodes->size() && host.empty(); ++n) {
      const ReplyView fields = (*shard_nodes)[n];
      std::string_view role, health, ip, endpoint;
      int64_t node_port = 0;
      for (size_t i = 0; i + 1 < fields.size(); i += 2) {
        const std::string_view key = fields[i].str();
        const ReplyView value = fields[i + 1];
        if (key == "role") role = value.str();
        if (key == "health") health = value.str();
        if (key == "ip") ip = value.str();
        if (key == "endpoint") endpoint = value.str();
        if (key == "port" && value.is_integer()) node_port = value.integer();
      }
      if (role != "master" || health == "failed") continue;
      host = std::string(!endpoint.empty() && endpoint != "?" ? endpoint : ip);
      port = node_port;
    }
    if (host.empty() || port <= 0 || port > 65535) continue;  // no primary reachable: unserved
    const size_t index = NodeFor(host, static_cast<uint16_t>(port));
    primaries.push_back(index);
    for (size_t r = 0; r + 1 < ranges->size(); r += 2) {
      const int64_t first = (*ranges)[r].integer();
      const int64_t last = (*ranges)[r + 1].integer();
      if (first < 0 || last >= kClusterSlots || first > last) {
        return MakeError(ErrorCode::kProtocol, "a slot range {}-{} out of bounds", first, last);
      }
      for (int64_t slot = first; slot <= last; ++slot) {
        slots[static_cast<size_t>(slot)] = static_cast<int16_t>(index);
      }
      covered += static_cast<size_t>(last - first + 1);
    }
  }
  if (primaries.empty()) return MakeError(ErrorCode::kUnavailable, "no primary serves any slot");
  slots_ = slots;
  std::vector<bool> was_primary;
  for (auto& node : nodes_) {
    was_primary.push_back(node.primary);
    node.primary = false;
  }
  for (size_t index : primaries) nodes_[index].primary = true;
  if (map_loaded_ && (options_.on_server || options_.on_promoted)) {
    // A node already connected that now serves slots (a replica promoted, or a failed primary
    // promoted back): its server is watched from here, as a promotion even if its run_id was seen
    // before (it may lack what its primary acknowledged). One not connected yet reports when its
    // handshake is done.
    for (size_t index : primaries) {
      Node& node = nodes_[index];
      if (index < was_primary.size() && !was_primary[index] && !node.run_id.empty()) {
        const std::string name = fmt::format("{}:{}", node.host, node.port);
        if (options_.on_promoted) {
          options_.on_promoted(name, node.run_id);
        } else {
          options_.on_server(name, node.run_id);
        }
      }
    }
  }
  if (covered < kClusterSlots) {
    last_error_ =
        fmt::format("{} of {} slots without a primary", kClusterSlots - covered, kClusterSlots);
  }
  return base::Status();
}

void ClusterRouter::MapFailed(const std::string& reason) {
  auto waiting = std::move(waiting_for_map_);
  waiting_for_map_.clear();
  if (!waiting.empty()) {
    spdlog::warn("redis cluster {}: no slot map ({}); {} command(s) not sent",
                 options_.endpoint.Describe(), reason, waiting.size());
  }
  for (auto& call : waiting) {
    Fail(std::move(call),
         MakeError(ErrorCode::kUnavailable, "redis cluster {} unavailable ({}); not sent",
                   options_.endpoint.Describe(), reason));
  }
}

}  // namespace flashsale::redis
