#pragma once
// A TCP forwarder on loopback for drills: everything accepted on port() is relayed to
// 127.0.0.1:<target>, both ways, by one thread.
// - Cut(): from then on the bytes either way are read and dropped while the connections stay
//   open (a network partition: a link goes silent, and neither end learns of it until its own
//   timeout).
// - Retarget(port): the connections relayed so far are closed and new ones go to the new target
//   (a virtual IP or a DNS name moved to a promoted replica). Also ends a Cut.
// Stopped and every socket closed at the end of the scope.

#include <atomic>
#include <cstdint>
#include <thread>

namespace flashsale::testing {

class TcpProxy {
 public:
  explicit TcpProxy(uint16_t target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  uint16_t port() const { return port_; }
  void Cut() { cut_ = true; }
  void Retarget(uint16_t target_port) {
    target_ = target_port;
    retarget_ = true;
  }

 private:
  void Run();

  std::atomic<uint16_t> target_;
  std::atomic<bool> retarget_{false};
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace flashsale::testing
