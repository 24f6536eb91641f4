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
//
// A key is the user's for one request: its first request's fingerprint (the activity, the action,
// the quantity) is kept with a service-wide claim of the key (keyspace/idempotency.h), so that the
// same key with another request is refused, kKeyReused (HTTP 422), nothing done. The claim is
// taken before the script (DecideWithKey) and dropped again when the request made nothing (a
// refusal keeps no key, as the scripts keep no record of it).

#include <boost/asio/awaitable.hpp>
#include <string_view>

#include "base/result.h"
#include "core/outcome.h"
#include "keyspace/idempotency.h"
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

// The fingerprint kept with a key's claim: "<activity id>|<purchase|draw>|<quantity>".
std::string Fingerprint(const AdmissionRequest& request, Use use);

// The first outcome of the request's Idempotency-Key in its activity (the request has one), as
// Redis has it now: kNone when the key is not known there; an outcome kKeyReused when the key was
// used with another request (its claim's fingerprint, or a sale's record of another quantity).
// Errors: Redis's (nothing known).
boost::asio::awaitable<base::Result<keyspace::KeyReplay>> FindKeyReplay(
    ServiceContext& context, const AdmissionRequest& request, Use use);

// A keyed request's claim, taken before its script: refused (the key holds another request), or
// on with whether this request took it now.
struct ClaimedKey {
  bool reused = false;       // the key holds another request: answer kKeyReused
  bool claimed_now = false;  // the key was free
};
// A claim that could not be sent (kUnavailable: its node down or refusing) is no claim: the
// request goes on unclaimed (its activity's script still keeps the key's first outcome).
// Errors: kUnavailable (the claim was sent and Redis did not answer; nothing was done).
boost::asio::awaitable<base::Result<ClaimedKey>> ClaimKey(ServiceContext& context,
                                                          const AdmissionRequest& request, Use use);

// What the keyed request did, for its claim: made something now (a reservation, a draw, a
// ticket: kept under the key by the script), replayed what an earlier one made, made nothing (a
// refusal, an error that did nothing), or its outcome is unknown (it may have made something).
enum class KeyFate { kMade, kReplayed, kNothing, kUnknown };
// After the decision: a claim taken now for a request that made nothing is dropped; a claim found
// for a request that made something now is taken again (a twin request's refusal may have dropped
// it meanwhile). Best effort: a failure leaves the claim as it is (it expires with its TTL).
boost::asio::awaitable<void> SettleKey(ServiceContext& context, const AdmissionRequest& request,
                                       Use use, const ClaimedKey& claim, KeyFate fate);

// `decide()` (an awaitable base::Result<R>) for a request with an Idempotency-Key, between its
// claim and the claim's settling; `fate(result)` says what it did. A key claimed for another
// request: an R with kKeyReused, nothing decided.
template <typename R, typename Decide, typename Fate>
boost::asio::awaitable<base::Result<R>> DecideWithKey(ServiceContext& context,
                                                      const AdmissionRequest& request, Use use,
                                                      Decide decide, Fate fate) {
  auto claim = co_await ClaimKey(context, request, use);
  if (!claim.ok()) co_return std::move(claim).error();
  if (claim->reused) {
    R reused;
    reused.outcome = core::Outcome::kKeyReused;
    co_return reused;
  }
  base::Result<R> result = co_await decide();
  co_await SettleKey(context, request, use, *claim, fate(result));
  co_return result;
}

}  // namespace flashsale::service
