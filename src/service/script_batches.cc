#include "service/script_batches.h"

#include <utility>

namespace flashsale::service {

void SendReserveBatch(keyspace::ActivityScripts& activity_scripts, std::string_view activity_id,
                      std::span<const keyspace::ReserveRequest> requests, core::WriteSeq floor,
                      ReserveCoalescer::Done done) {
  auto& replies = done.replies();
  activity_scripts.ReserveBatch(activity_id, requests, floor, replies,
                                keyspace::Handler<void>(std::move(done)));
}

void SendDrawBatch(keyspace::ActivityScripts& activity_scripts, std::string_view activity_id,
                   std::span<const keyspace::DrawRequest> requests, core::WriteSeq floor,
                   DrawCoalescer::Done done) {
  auto& replies = done.replies();
  activity_scripts.DrawBatch(activity_id, requests, floor, replies,
                             keyspace::Handler<void>(std::move(done)));
}

}  // namespace flashsale::service
