#include "support/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
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

// Counts the complete RESP2 elements (top-level: a command, or a reply) in a byte stream fed in
// pieces. Anything that is not RESP2 (an inline command, a replication stream's RDB payload) sets
// `bad`, and counting stops there.
class RespCounter {
 public:
  void Feed(const char* data, size_t size) {
    size_t at = 0;
    while (at < size && !bad_) {
      if (skip_ > 0) {  // a bulk string's payload and its CRLF
        const size_t take = std::min<size_t>(skip_, size - at);
        at += take;
        skip_ -= static_cast<int64_t>(take);
        if (skip_ == 0) Done();
        continue;
      }
      const auto* end = static_cast<const char*>(std::memchr(data + at, '\n', size - at));
      if (end == nullptr) {
        line_.append(data + at, size - at);
        return;
      }
      line_.append(data + at, static_cast<size_t>(end - (data + at)));
      at = static_cast<size_t>(end - data) + 1;
      Header();
      line_.clear();
    }
  }
  uint64_t complete() const { return complete_; }
  bool bad() const { return bad_; }
  // Inside an element (a header line, a payload or an array not complete yet).
  bool partial() const { return skip_ > 0 || !line_.empty() || !open_.empty(); }

 private:
  void Header() {
    if (line_.empty() || line_.back() != '\r') {
      bad_ = true;
      return;
    }
    line_.pop_back();
    const char type = line_[0];
    if (type == '+' || type == '-' || type == ':') {
      Done();
      return;
    }
    if (type != '$' && type != '*') {
      bad_ = true;
      return;
    }
    int64_t n = 0;
    const char* last = line_.data() + line_.size();
    const auto [end, error] = std::from_chars(line_.data() + 1, last, n);
    if (error != std::errc() || end != last) {
      bad_ = true;
      return;
    }
    if (n < 0 || (type == '*' && n == 0)) {
      Done();  // a null, or an empty array
    } else if (type == '$') {
      skip_ = n + 2;
    } else {
      open_.push_back(n);
    }
  }
  // An element is complete: one more of its array's, or one more top-level element.
  void Done() {
    while (!open_.empty()) {
      if (--open_.back() > 0) return;
      open_.pop_back();
    }
    ++complete_;
  }

  std::string line_;           // a header line read so far
  int64_t skip_ = 0;           // bytes of a bulk string (and its CRLF) still to come
  std::vector<int64_t> open_;  // elements still to come in each open array
  uint64_t complete_ = 0;
  bool bad_ = false;
};

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
  // Per client: its commands and the replies relayed to it (RESP), and whether a Switch waits
  // for it to be between two requests (then its next bytes are not read yet).
  struct Traffic {
    RespCounter sent;
    RespCounter replied;
    bool moving = false;
    bool idle() const {
      return sent.bad() || replied.bad() ||
             (sent.complete() == replied.complete() && !sent.partial() && !replied.partial());
    }
  };
  std::map<int, Traffic> traffic;
  uint64_t moving_for = 0;  // the switch request being applied
  std::chrono::steady_clock::time_point moving_since;
  std::vector<char> buffer(64 * 1024);
  const auto drop = [&](int fd) {
    auto found = peer.find(fd);
    if (found == peer.end()) return;
    const int other = found->second;
    ::close(fd);
    peer.erase(fd);
    clients.erase(fd);
    traffic.erase(fd);
    if (other >= 0) {
      ::close(other);
      peer.erase(other);
      clients.erase(other);
      traffic.erase(other);
    }
  };
  // The client's upstream closed: its next bytes go to a new one at the target.
  const auto move = [&](int client) {
    Traffic& of = traffic[client];
    of.moving = false;
    const int upstream = peer[client];
    if (upstream < 0) return;
    ::close(upstream);
    peer.erase(upstream);
    peer[client] = -1;
  };
  while (!stop_) {
    if (retarget_.exchange(false)) {
      for (const auto& [fd, other] : peer) ::close(fd);
      peer.clear();
      clients.clear();
      traffic.clear();
      cut_ = false;
    }
    if (const uint64_t requested = switches_requested_.load();
        requested != switches_applied_.load()) {
      // Every client moves once it is between two requests; at once during a Cut (what was cut
      // is never answered), or when it is still not after 5 s (its counts start over).
      const bool was_cut = cut_.exchange(false);
      if (requested != moving_for) {  // a new request: every client has to move (again)
        moving_for = requested;
        moving_since = std::chrono::steady_clock::now();
        for (const int client : clients) traffic[client].moving = true;
      }
      const bool late = std::chrono::steady_clock::now() - moving_since > std::chrono::seconds(5);
      bool waiting = false;
      for (const int client : clients) {
        Traffic& of = traffic[client];
        if (!of.moving) continue;
        if (!of.idle()) {
          if (!was_cut && !late) {
            waiting = true;
            continue;
          }
          of = Traffic{};
        }
        move(client);
      }
      if (!waiting) switches_applied_ = requested;
    }
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (const auto& [fd, other] : peer) {
      // A client waiting to move is not read: its next request goes to the new upstream.
      if (clients.contains(fd) && traffic[fd].moving) continue;
      fds.push_back({fd, POLLIN, 0});
    }
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
          traffic[client] = Traffic{};
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
      const bool from_client = clients.contains(fds[i].fd);
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
      const int to = peer[fds[i].fd];
      if (from_client) {
        traffic[fds[i].fd].sent.Feed(buffer.data(), static_cast<size_t>(got));
      } else if (auto client = traffic.find(to); client != traffic.end()) {
        client->second.replied.Feed(buffer.data(), static_cast<size_t>(got));
      }
      if (!SendAll(to, buffer.data(), static_cast<size_t>(got))) drop(fds[i].fd);
    }
  }
  for (const auto& [fd, other] : peer) ::close(fd);
}

}  // namespace flashsale::testing
