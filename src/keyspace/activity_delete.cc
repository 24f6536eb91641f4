#include "keyspace/activity_delete.h"

#include "keyspace/activity_scripts.h"
#include "keyspace/waiting_room.h"
#include "redis/script_reply.h"

namespace flashsale::keyspace {

boost::asio::awaitable<base::Result<DeleteOutcome>> DeleteActivityKeys(
    redis::ScriptEvaluator& runner, std::string_view key_namespace, std::string_view activity_id) {
  const ActivityKeys keys(key_namespace, activity_id);
  const RoomKeys room(key_namespace, activity_id);
  const redis::Script& script = runner.scripts().Get("activity_delete");
  const redis::IntField outcome(script, "outcome");
  redis::ScriptCall call(script);
  call.Key("meta", keys.meta())
      .Key("stock", keys.stock())
      .Key("items", keys.items())
      .Key("prizes", keys.prizes())
      .Key("buyers", keys.buyers())
      .Key("orders", keys.orders())
      .Key("stream", keys.stream())
      .Key("user_orders", keys.user_orders())
      .Key("dead", keys.dead())
      .Key("failures", keys.failures())
      .Key("queue", keys.queue())
      .Key("queue_lock", keys.queue_lock())
      .Key("queue_fence", keys.queue_fence())
      .Key("report", keys.reconcile_report())
      .Key("room", room.room)
      .Key("room_seq", room.seq);
  auto reply = co_await redis::Await(runner, call);
  auto read = redis::ScriptReply::Read(script, reply);
  if (!read) co_return std::move(read).error();
  switch (read->Int(outcome)) {
    case 1:
      co_return DeleteOutcome::kDeleted;
    case 0:
      co_return DeleteOutcome::kNothing;
    default:
      co_return DeleteOutcome::kSold;
  }
}

}  // namespace flashsale::keyspace
