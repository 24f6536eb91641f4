#pragma once
// A TCP forwarder on loopback for drills: everything accepted on port() is relayed to
// 127.0.0.1:<target>, both ways, by one thread.
// - Cut(): from then on the bytes either way are read and dropped while the connections stay
//   open (a network partition: a link goes silent, and neither end learns of it until its own
//   timeout).
// - Retarget(port): the connections relayed so far are closed and new ones go to the new target
//   (a virtual IP or a DNS name moved to a promoted replica). Also ends a Cut.
// - Switch(port): the clients' connections stay open, and from the next byte a client sends on
//   one, its bytes go to a new connection to 127.0.0.1:<port> and the replies come back from
//   there; the upstream connections of before are closed. A stand-in for a proxy (a Redis proxy,
//   a managed endpoint) that sends the same client connection to another server: the client sees
//   no reconnect and so makes no handshake. Connections accepted afterwards go to the new port
//   too. Also ends a Cut. A connection moves only between two requests: the proxy counts the
//   RESP commands a client sent and the replies relayed back, and a client with a command not
//   answered yet (or half a command or reply relayed) keeps its old upstream until the reply is
//   relayed; its next bytes wait meanwhile (a proxy that lost that reply would shift every later
//   reply of a pipelined connection onto the wrong command). A connection whose bytes are not
//   RESP (a replication stream), or one still waiting after 5 s, or any during a Cut, moves at
//   once. Switch returns once every connection has moved.
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
  void Switch(uint16_t target_port);
  // Connections accepted so far (a client that reconnected shows as one more).
  uint64_t accepted() const { return accepted_.load(); }

 private:
  void Run();

  std::atomic<uint16_t> target_;
  std::atomic<bool> retarget_{false};
  std::atomic<uint64_t> switches_requested_{0};
  std::atomic<uint64_t> switches_applied_{0};
  std::atomic<uint64_t> accepted_{0};
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace flashsale::testing
