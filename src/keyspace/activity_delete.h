#pragma once
// Removing an activity's keys from Redis (lua/activity_delete.lua): only if it sold nothing, in
// one script, so that no reservation or draw slips in between the check and the deletion.

#include <boost/asio/awaitable.hpp>
#include <string_view>

#include "base/result.h"
#include "redis/scripts.h"

namespace flashsale::keyspace {

enum class DeleteOutcome {
  kDeleted,  // its keys are gone
  kNothing,  // there were none (never loaded, or deleted already)
  kSold,     // it has a buyer, an order or an intent: nothing was deleted
};

// Its reconciliation report (ActivityKeys::reconcile_report) is deleted with the rest.
boost::asio::awaitable<base::Result<DeleteOutcome>> DeleteActivityKeys(
    redis::ScriptEvaluator& runner, std::string_view key_namespace, std::string_view activity_id);

}  // namespace flashsale::keyspace
