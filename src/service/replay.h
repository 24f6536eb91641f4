#pragma once
// Replays of purchases and draws (a retry with the Idempotency-Key of an earlier request): the
// order the first request made, reported as it is now. Redis's record of the order says reserved
// (won), cancelled or refused (the scripts' replay); the database's record says more once the
// order pipeline has persisted it: paid, cancelled by the expire job (before Redis is told), a
// payment refused and flagged for a refund, or flagged for compensation by the lost-write repair.
//
// A retry comes when the first answer was lost: often when the sale has just closed, ended or
// sold out, or the user is being rate-limited. So a request with a key that the local gate or the
// rate limiter turned away (service/admission.h) still gets its key's first outcome
// (FindKeyReplay: one read-only script, idempotency_replay.lua); only a key Redis does not know
// gets the gate's answer. The freeze after a Redis event comes before and answers nobody.

#include <boost/asio/awaitable.hpp>
#include <string_view>

#include "base/result.h"
#include "core/outcome.h"
#include "redis/idempotency.h"
#include "service/admission.h"
#include "service/context.h"

namespace flashsale::service {

// The state of a replayed order as the record has it, over `outcome` (Redis's: kReserved or
// kCancelled; any other outcome is left alone, unread): kCompensationDue (flagged, whatever its
// state), kPaid, kCancelled (with `refund_due` when a payment came after it), or unchanged for an
// order still reserved, one the record does not have yet, or when the record does not answer
// (Redis's word stands: the order exists).
boost::asio::awaitable<void> ReadOrderState(ServiceContext& context, std::string_view order_id,
                                            core::Outcome& outcome, bool& refund_due);

// The first outcome of the request's Idempotency-Key in its activity (the request has one), as
// Redis has it now: kNone when the key is not known there. Errors: Redis's (nothing known).
boost::asio::awaitable<base::Result<redis::KeyReplay>> FindKeyReplay(
    ServiceContext& context, const AdmissionRequest& request);

}  // namespace flashsale::service
