#pragma once
// The connection to one Redis server (a single server, or one node of a cluster for the router
// of redis/cluster.h): one socket (TCP, unix, or TLS over TCP), the handshake (AUTH, SELECT, the
// server's run_id for ConnectionOptions::on_server), the pipeline of commands with their
// deadlines, the stall watch, and reconnecting with backoff. The contract is Connection's
// (redis/connection.h); only the single server's own state is added here.

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/ring_queue.h"
#include "redis/connection.h"

struct redisReader;

namespace flashsale::redis {

class NodeConnection final : public Connection,
                             public std::enable_shared_from_this<NodeConnection> {
 public:
  enum class State { kIdle, kConnecting, kHandshake, kReady, kBackoff, kStopped };

  static std::shared_ptr<NodeConnection> Create(boost::asio::any_io_executor executor,
                                                ConnectionOptions options);
  ~NodeConnection() override;

  void Start() override;
  void Stop() override;
  void Primaries(Deadline deadline, NodesHandler handler) override;

  State state() const { return state_; }
  const std::string& last_error() const { return last_error_; }

 private:
  struct Pending {
    ReplyHandler handler;
    Deadline deadline;
    Clock::time_point sent_at{};
    bool abandoned = false;  // its deadline passed: the reply, when it comes, is dropped
  };
  struct Waiting {
    std::string wire;
    Pending pending;
  };
  using Completion = std::pair<ReplyHandler, base::Result<Reply>>;

  NodeConnection(boost::asio::any_io_executor executor, ConnectionOptions options);

  void DoSend(std::string_view wire, Deadline deadline, ReplyHandler handler) override;
  void DoSendToNodeOf(std::string_view key, std::string_view wire, Deadline deadline,
                      ReplyHandler handler) override;
  void DoSendToNode(const ServerNode& node, std::string_view wire, Deadline deadline,
                    ReplyHandler handler) override;

  void Connect();
  std::string NodeName() const;  // host:port, or the socket path
  void OnConnected(uint64_t generation);
  void StartTls(uint64_t generation);
  void SendInternal(std::string_view wire, ReplyHandler handler);
  void BecomeReady();
  void StartRead(uint64_t generation);
  void OnRead(uint64_t generation, const boost::system::error_code& error, size_t bytes);
  void ScheduleFlush();
  void StartWrite();
  void ArmTimer(Deadline deadline);
  void OnTimer();
  // Drops the link: fails what is in flight and queued, then reconnects after a backoff.
  void Fail(const std::string& reason);
  void CloseLink();
  // Fails every command in flight or waiting, handing the completions to `out`.
  void FailAll(std::string_view reason, base::ErrorCode unsent_code, std::vector<Completion>& out);
  std::chrono::milliseconds NextBackoff();
  void Deliver(std::vector<Completion>& completions);
  void Post(ReplyHandler handler, base::Error error);

  State state_ = State::kIdle;
  uint64_t generation_ = 0;  // bumped per link; handlers of an older link do nothing
  boost::asio::generic::stream_protocol::socket socket_;
  // rediss://: the TLS stream over socket_, made per link. Shared with the handlers of its
  // operations, so that a link replaced while one is in flight outlives it.
  struct Tls;
  std::shared_ptr<Tls> tls_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer connect_timer_;  // connect timeout, then backoff wait
  boost::asio::steady_timer deadline_timer_;
  bool deadline_timer_armed_ = false;
  Deadline deadline_timer_at_{};
  redisReader* reader_ = nullptr;
  std::vector<char> read_buffer_;

  std::deque<Waiting> waiting_;  // sent before the link was ready
  // Written or in out_, replies expected in this order. A ring, not a deque: a deque allocates a
  // node every few commands as it slides (alloc_integration_test counted 0.09 per request).
  base::RingQueue<Pending> inflight_;
  size_t unhanded_ = 0;        // the last unhanded_ of inflight_ are still only in out_
  size_t handshake_left_ = 0;  // AUTH/SELECT replies still expected before kReady
  std::string out_;            // bytes not yet given to the socket
  std::string writing_;        // bytes of the write in progress
  bool write_in_progress_ = false;
  bool flush_posted_ = false;
  Deadline last_progress_{};  // last read, or when inflight_ became non-empty

  int backoff_attempt_ = 0;
  std::minstd_rand jitter_;
  std::string last_error_ = "not connected yet";
};

}  // namespace flashsale::redis
