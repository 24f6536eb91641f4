#include "redis/activity_delete.h"

#include "redis/script_reply.h"
#include "redis/seckill.h"

namespace flashsale::redis {

boost::asio::awaitable<base::Result<DeleteOutcome>> DeleteActivityKeys(
    ScriptRunner& runner, std::string_view key_namespace, std::string_view activity_id) {
  const SeckillKeys keys(key_namespace, activity_id);
  const Script& script = runner.scripts().Get("activity_delete");
  const IntField outcome(script, "outcome");
  ScriptCall call(script);
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
      .Key("report", keys.reconcile_report());
  auto reply = co_await Await(runner, call);
  auto read = ScriptReply::Read(script, reply);
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

}  // namespace flashsale::redis
