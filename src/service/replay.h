#pragma once
// Replays of purchases and draws (a retry with the Idempotency-Key of an earlier request): the
// order the first request made, reported as it is now. Redis's record of the order says reserved
// (won), cancelled or refused (the scripts' replay); the database's record says more once the
// order pipeline has persisted it: paid, cancelled by the expire job (before Redis is told), a
// payment refused and flagged for a refund, or flagged for compensation by the lost-write repair.

#include <boost/asio/awaitable.hpp>
#include <string_view>

#include "core/outcome.h"
#include "service/context.h"

namespace flashsale::service {

// The state of a replayed order as the record has it, over `outcome` (Redis's: kReserved or
// kCancelled; any other outcome is left alone, unread): kCompensationDue (flagged, whatever its
// state), kPaid, kCancelled (with `refund_due` when a payment came after it), or unchanged for an
// order still reserved, one the record does not have yet, or when the record does not answer
// (Redis's word stands: the order exists).
boost::asio::awaitable<void> ReadOrderState(ServiceContext& context, std::string_view order_id,
                                            core::Outcome& outcome, bool& refund_due);

}  // namespace flashsale::service
