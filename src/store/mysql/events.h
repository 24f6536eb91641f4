#pragma once
// The outbox in MySQL's dialect: the events of the changes made in the caller's transaction,
// numbered under the one row of order_event_seq (its row lock held to the commit, so numbers
// become visible in the order they were taken, whatever the number of writers).

#include <cstdint>
#include <span>

#include "base/result.h"
#include "store/mysql/connection.h"
#include "store/records.h"

namespace flashsale::store::mysql {

// Writes `events` at now_ms inside the caller's transaction. Each change happens once, so its id
// is new; a duplicate is an error (kAlreadyExists) and the caller's transaction rolls back.
// Nothing for no events (the lock row is not taken).
base::Status WriteEvents(Connection& conn, std::span<const records::EventDraft> events,
                         int64_t now_ms);

}  // namespace flashsale::store::mysql
