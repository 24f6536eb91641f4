#include "redis/replica_wait.h"

#include <boost/asio/append.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <string>
#include <utility>

#include "redis/cluster.h"

namespace flashsale::redis {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

ReplicaWait::ReplicaWait(Connection& connection, int64_t replicas,
                         std::chrono::milliseconds timeout)
    : connection_(connection), replicas_(replicas), timeout_(timeout) {}

void ReplicaWait::Confirm(std::string_view key, Handler handler) {
  const bool routed = !key.empty() && connection_.cluster() != nullptr;
  const int slot = routed ? static_cast<int>(KeySlot(key)) : -1;
  std::shared_ptr<Group>& open = open_[slot];
  if (open) {
    open->push_back(std::move(handler));
    return;
  }
  // The first confirmation of this turn (for this slot): the WAIT goes out once the turn's other
  // replies have asked too (posted behind them).
  open = std::make_shared<Group>();
  open->push_back(std::move(handler));
  if (routed) key_of_[slot] = std::string(key);
  asio::post(connection_.executor(), [this, slot] { SendWait(slot); });
}

void ReplicaWait::SendWait(int slot) {
  auto found = open_.find(slot);
  if (found == open_.end()) return;
  std::shared_ptr<Group> group = std::move(found->second);
  open_.erase(found);
  std::string key;
  if (auto keyed = key_of_.find(slot); keyed != key_of_.end()) {
    key = std::move(keyed->second);
    key_of_.erase(keyed);
  }
  if (!group) return;
  waits_sent_.Add();
  const std::string replicas = std::to_string(replicas_);
  const std::string timeout = std::to_string(timeout_.count());
  const Command wait{"WAIT", replicas, timeout};
  // Redis answers WAIT at its timeout at the latest; the deadline leaves the usual margin.
  const Deadline deadline = Clock::now() + timeout_ + connection_.options().command_timeout;
  connection_.SendToNodeOf(
      key, wait.wire(), deadline,
      ReplyHandler(asio::bind_executor(connection_.executor(), [this, group](Result<Reply> reply) {
        Result<int64_t> acked = [&]() -> Result<int64_t> {
          if (!reply.ok()) return std::move(reply).error();
          if (!reply->is_integer()) {
            return MakeError(ErrorCode::kProtocol, "WAIT answered {}", reply->Describe());
          }
          return reply->integer();
        }();
        if (!acked.ok() || *acked < replicas_) unconfirmed_.Add(group->size());
        for (Handler& handler : *group) {
          asio::post(connection_.executor(), asio::append(std::move(handler), acked));
        }
      })));
}

}  // namespace flashsale::redis
