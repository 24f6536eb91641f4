#pragma once
// The audit queries of Store::AuditOrders, plain SQL that SQLite and MariaDB both run, shared so
// the two backends look for a double sale in the same way.

#include <string_view>

namespace flashsale::store {

// ? activity_id, ? per_user_limit -> (user_id, units) of users holding more than the limit.
inline constexpr std::string_view kUsersOverLimit =
    "SELECT user_id, CAST(SUM(quantity) AS SIGNED) FROM orders WHERE activity_id = ? AND state <> "
    "'cancelled' GROUP BY user_id HAVING SUM(quantity) > ? ORDER BY user_id LIMIT 10";

// ? activity_id -> the rows beyond the first one of every stream entry (order intent).
inline constexpr std::string_view kDuplicateIntents =
    "SELECT CAST(COALESCE(SUM(n - 1), 0) AS SIGNED) FROM (SELECT COUNT(*) AS n FROM orders WHERE "
    "activity_id = ? AND stream_id <> '' GROUP BY stream_id HAVING COUNT(*) > 1) AS repeated";

}  // namespace flashsale::store
