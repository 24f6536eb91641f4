#include "service/script_batches.h"

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>

namespace flashsale::service {

namespace {

// Gathers the replies of a batch sent as single calls; completes `done` with them in order once
// the last one came.
template <typename Reply, typename Done>
class Gather {
 public:
  Gather(size_t count, Done done) : slots_(count), left_(count), done_(std::move(done)) {}

  void Set(size_t index, base::Result<Reply> reply) {
    slots_[index].emplace(std::move(reply));
    if (--left_ > 0) return;
    std::vector<base::Result<Reply>> replies;
    replies.reserve(slots_.size());
    for (auto& slot : slots_) replies.push_back(std::move(*slot));
    std::move(done_)(std::move(replies));
  }

 private:
  std::vector<std::optional<base::Result<Reply>>> slots_;
  size_t left_;
  Done done_;
};

// Sends each request as its own call, back to back on the connection (`send(request, handler)`).
template <typename Reply, typename Request, typename Done, typename Send>
void SendPipelined(std::span<const Request> requests, Done done, Send send) {
  if (requests.empty()) {
    std::move(done)(std::vector<base::Result<Reply>>());
    return;
  }
  auto gather = std::make_shared<Gather<Reply, Done>>(requests.size(), std::move(done));
  for (size_t i = 0; i < requests.size(); ++i) {
    send(requests[i], redis::Handler<Reply>([gather, i](base::Result<Reply> reply) {
           gather->Set(i, std::move(reply));
         }));
  }
}

}  // namespace

// At merge with the batch script: `seckill.ReserveBatch(activity_id, requests, std::move(done));`
void SendReserveBatch(redis::SeckillScripts& seckill, std::string_view activity_id,
                      std::span<const redis::ReserveRequest> requests,
                      ReserveCoalescer::Done done) {
  SendPipelined<redis::Reservation>(
      requests, std::move(done),
      [&](const redis::ReserveRequest& request, redis::Handler<redis::Reservation> handler) {
        seckill.Reserve(activity_id, request, std::move(handler));
      });
}

// At merge with the batch script: `seckill.DrawBatch(activity_id, requests, std::move(done));`
void SendDrawBatch(redis::SeckillScripts& seckill, std::string_view activity_id,
                   std::span<const redis::DrawRequest> requests, DrawCoalescer::Done done) {
  SendPipelined<redis::DrawResult>(
      requests, std::move(done),
      [&](const redis::DrawRequest& request, redis::Handler<redis::DrawResult> handler) {
        seckill.Draw(activity_id, request, std::move(handler));
      });
}

}  // namespace flashsale::service
