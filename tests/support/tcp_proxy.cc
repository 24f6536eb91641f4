#include "support/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <stdexcept>
#include <vector>

namespace flashsale::testing {

namespace {

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  return address;
}

// Writes all of `data` (blocking); false when the peer is gone.
bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t sent = ::send(fd, data, size, MSG_NOSIGNAL);
    if (sent <= 0) return false;
    data += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(uint16_t target_port) : target_(target_port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener_ < 0) throw std::runtime_error("socket failed");
  sockaddr_in address = Loopback(0);
  socklen_t length = sizeof(address);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener_, 16) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(listener_);
    throw std::runtime_error("cannot listen on loopback");
  }
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { Run(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  ::close(listener_);
}

void TcpProxy::Run() {
  std::map<int, int> peer;  // each relayed socket -> the other end
  std::vector<char> buffer(64 * 1024);
  const auto drop = [&](int fd) {
    auto found = peer.find(fd);
    if (found == peer.end()) return;
    const int other = found->second;
    ::close(fd);
    ::close(other);
    peer.erase(fd);
    peer.erase(other);
  };
  while (!stop_) {
    if (retarget_.exchange(false)) {
      for (const auto& [fd, other] : peer) ::close(fd);
      peer.clear();
      cut_ = false;
    }
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (const auto& [fd, other] : peer) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client >= 0) {
        const int upstream = ::socket(AF_INET, SOCK_STREAM, 0);
        const sockaddr_in target = Loopback(target_);
        if (upstream >= 0 &&
            ::connect(upstream, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) == 0) {
          peer[client] = upstream;
          peer[upstream] = client;
        } else {
          if (upstream >= 0) ::close(upstream);
          ::close(client);
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0 || !peer.contains(fds[i].fd)) continue;
      const ssize_t got = ::recv(fds[i].fd, buffer.data(), buffer.size(), 0);
      if (got <= 0) {
        drop(fds[i].fd);
        continue;
      }
      if (cut_) continue;  // partitioned: read and dropped
      if (!SendAll(peer[fds[i].fd], buffer.data(), static_cast<size_t>(got))) drop(fds[i].fd);
    }
  }
  for (const auto& [fd, other] : peer) ::close(fd);
}

}  // namespace flashsale::testing
