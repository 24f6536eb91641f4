#pragma once
// MySqlStore::InsertOrders: a batch of orders written in a handful of round trips, with the
// outcome of each order (inserted, duplicate, conflict) exactly as the row-by-row checks decide it.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/result.h"
#include "store/mysql/connection.h"
#include "store/store.h"

namespace flashsale::store::mysql {

// kInvalidArgument for an order the schema cannot hold (an id or stream id over 64 bytes, items
// over 64 KiB): checked for the whole batch before anything is written.
base::Status ValidateOrders(std::span<const OrderRecord> orders);

// Writes the batch in its own transactions (the batched way, else row by row); the caller runs it
// again if the connection's transaction was chosen as a deadlock victim. With `fence`, each
// transaction first reads the record's fence under a shared lock (AdvanceFence waits for it) and
// writes nothing unless it is still at that epoch (kFailedPrecondition, detail kFenced).
base::Result<std::vector<InsertOutcome>> InsertOrders(Connection& conn,
                                                      std::span<const OrderRecord> orders,
                                                      int64_t now_ms,
                                                      std::optional<int64_t> fence = std::nullopt);

}  // namespace flashsale::store::mysql
