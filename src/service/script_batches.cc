#include "service/script_batches.h"

#include <utility>

namespace flashsale::service {

void SendReserveBatch(redis::SeckillScripts& seckill, std::string_view activity_id,
                      std::span<const redis::ReserveRequest> requests,
                      ReserveCoalescer::Done done) {
  seckill.ReserveBatch(activity_id, requests, std::move(done));
}

void SendDrawBatch(redis::SeckillScripts& seckill, std::string_view activity_id,
                   std::span<const redis::DrawRequest> requests, DrawCoalescer::Done done) {
  seckill.DrawBatch(activity_id, requests, std::move(done));
}

}  // namespace flashsale::service
