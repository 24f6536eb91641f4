#pragma once
// Failpoints: named places where a fault test can make the process fail on purpose, e.g. be
// killed between a database commit and the Redis acknowledgement. Off unless the environment
// variable FLASHSALE_FAILPOINTS names them: "kill-after-commit" (every time) or
// "kill-after-commit:3" (the third time). Known: kill-after-commit (order consumers: after the
// database commit, before XACK), kill-after-draw (queue consumers: after a draw, before XACK),
// kill-after-webhook (the webhook relay: after a receiver's 2xx, before its cursor is saved). Read
// once, at the first check; never set in production.

#include <string_view>

namespace flashsale::base {

// True when the failpoint `name` fires now.
bool FailpointHit(std::string_view name);

}  // namespace flashsale::base
