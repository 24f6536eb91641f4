#include "support/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <set>
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

void TcpProxy::Switch(uint16_t target_port) {
  target_ = target_port;
  const uint64_t mine = switches_requested_.fetch_add(1) + 1;
  // The relay thread looks at least every 50 ms (its poll timeout).
  while (switches_applied_.load() < mine) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

namespace {

// A new connection to 127.0.0.1:<port>; -1 if it cannot be made.
int ConnectUpstream(uint16_t port) {
  const int upstream = ::socket(AF_INET, SOCK_STREAM, 0);
  if (upstream < 0) return -1;
  const sockaddr_in target = Loopback(port);
  if (::connect(upstream, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
    ::close(upstream);
    return -1;
  }
  return upstream;
}

}  // namespace

void TcpProxy::Run() {
  // Each relayed socket -> the other end. A client whose upstream a Switch closed maps to -1
  // until it sends again.
  std::map<int, int> peer;
  std::set<int> clients;
  std::vector<char> buffer(64 * 1024);
  const auto drop = [&](int fd) {
    auto found = peer.find(fd);
    if (found == peer.end()) return;
    const int other = found->second;
    ::close(fd);
    peer.erase(fd);
    clients.erase(fd);
    if (other >= 0) {
      ::close(other);
      peer.erase(other);
      clients.erase(other);
    }
  };
  while (!stop_) {
    if (retarget_.exchange(false)) {
      for (const auto& [fd, other] : peer) ::close(fd);
      peer.clear();
      clients.clear();
      cut_ = false;
    }
    if (const uint64_t requested = switches_requested_.load();
        requested != switches_applied_.load()) {
      for (const int client : clients) {
        const int upstream = peer[client];
        if (upstream < 0) continue;
        ::close(upstream);
        peer.erase(upstream);
        peer[client] = -1;
      }
      cut_ = false;
      switches_applied_ = requested;
    }
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (const auto& [fd, other] : peer) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client >= 0) {
        accepted_.fetch_add(1);
        const int upstream = ConnectUpstream(target_);
        if (upstream >= 0) {
          peer[client] = upstream;
          peer[upstream] = client;
          clients.insert(client);
        } else {
          ::close(client);
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0 || !peer.contains(fds[i].fd)) continue;
      // Not blocking: a descriptor closed and reused within this round may have nothing to read.
      const ssize_t got = ::recv(fds[i].fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (got <= 0) {
        drop(fds[i].fd);
        continue;
      }
      if (cut_) continue;  // partitioned: read and dropped
      int& other = peer[fds[i].fd];
      if (other < 0) {  // a switched client's first bytes: a new upstream at the new target
        const int upstream = ConnectUpstream(target_);
        if (upstream < 0) {
          drop(fds[i].fd);
          continue;
        }
        other = upstream;
        peer[upstream] = fds[i].fd;
      }
      if (!SendAll(peer[fds[i].fd], buffer.data(), static_cast<size_t>(got))) drop(fds[i].fd);
    }
  }
  for (const auto& [fd, other] : peer) ::close(fd);
}

}  // namespace flashsale::testing
