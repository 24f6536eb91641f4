#pragma once
// A TCP forwarder on loopback for drills that need a network partition: everything accepted on
// port() is relayed to 127.0.0.1:<target>, both ways, by one thread, until Cut(), from which on
// the bytes either way are read and dropped while the connections stay open (as when a link
// goes silent: neither end learns of it until its own timeout). Stopped and every socket closed
// at the end of the scope.

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

 private:
  void Run();

  const uint16_t target_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace flashsale::testing
