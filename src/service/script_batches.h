#pragma once
// The coalescers of the reserve and draw scripts (base/coalescer.h), and the one function per
// script that sends a batch of requests of one activity.
//
// A batch is decided in arrival order, each request exactly as a call of its own would decide it:
// the reserve and draw scripts take a batch of requests and decide them in one call
// (keyspace::ActivityScripts::ReserveBatch, DrawBatch; a single request is a batch of one). The
// replies go straight into the coalescer's slot (Done::replies(), its capacity reused), and the
// Done is invoked on the connection's thread when the reply is read.

#include <span>
#include <string_view>
#include <vector>

#include "base/coalescer.h"
#include "base/result.h"
#include "keyspace/activity_scripts.h"

namespace flashsale::service {

using ReserveCoalescer = base::Coalescer<keyspace::ReserveRequest, keyspace::Reservation>;
using DrawCoalescer = base::Coalescer<keyspace::DrawRequest, keyspace::DrawResult>;

// Sends `requests` (reservations of `activity_id`) as one batch: one reply per request in its
// slot (a request's own failure in its slot), or an error for the whole batch.
// `floor`: the lowest write sequence the activity's Redis may hold (a Redis behind it refuses the
// batch: every reply kBehind, nothing written).
void SendReserveBatch(keyspace::ActivityScripts& activity_scripts, std::string_view activity_id,
                      std::span<const keyspace::ReserveRequest> requests, core::WriteSeq floor,
                      ReserveCoalescer::Done done);

// The same for lottery draws.
void SendDrawBatch(keyspace::ActivityScripts& activity_scripts, std::string_view activity_id,
                   std::span<const keyspace::DrawRequest> requests, core::WriteSeq floor,
                   DrawCoalescer::Done done);

}  // namespace flashsale::service
