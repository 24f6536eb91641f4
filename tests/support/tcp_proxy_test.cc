// The drills' TCP forwarder itself (support/tcp_proxy.h), on two real redis-servers: Switch moves a
// client's open connection to another server between two requests, without closing it.

#include "support/tcp_proxy.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/redis_server.h"
#include "support/wait.h"

namespace flashsale::testing {
namespace {

using namespace std::chrono_literals;

// One blocking hiredis connection through the proxy.
class Client {
 public:
  explicit Client(uint16_t port) {
    const timeval timeout{5, 0};
    context_ = redisConnectWithTimeout("127.0.0.1", port, timeout);
    if (context_ == nullptr || context_->err != 0) throw std::runtime_error("connect failed");
    redisSetTimeout(context_, timeout);
  }
  ~Client() { redisFree(context_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The reply's text (a status, a bulk string, "(nil)"), or "error: ..." when the link failed.
  std::string Run(const char* format, const std::string& a = "", const std::string& b = "") {
    auto* reply = static_cast<redisReply*>(
        redisCommand(context_, format, a.data(), a.size(), b.data(), b.size()));
    if (reply == nullptr) return std::string("error: ") + context_->errstr;
    SyncReply owned(reply);
    if (reply->type == REDIS_REPLY_NIL) return "(nil)";
    if (reply->type == REDIS_REPLY_INTEGER) return std::to_string(reply->integer);
    return std::string(reply->str, reply->len);
  }

 private:
  redisContext* context_ = nullptr;
};

int64_t ConnectedClients(const RedisServer& server) {
  const std::string info = server.String({"INFO", "clients"});
  const auto at = info.find("connected_clients:");
  return at == std::string::npos ? -1 : std::stoll(info.substr(at + 18));
}

TEST(TcpProxyTest, SwitchMovesAnOpenClientConnectionToAnotherServer) {
  RedisServer a;
  RedisServer b;
  b.Command({"SET", "k", "on-b"});
  TcpProxy proxy(a.port());
  Client client(proxy.port());

  EXPECT_EQ(client.Run("SET %b %b", "k", "on-a"), "OK");
  EXPECT_EQ(client.Run("CLIENT SETNAME %b", "drill"), "OK");  // what a handshake would set
  EXPECT_EQ(a.String({"GET", "k"}), "on-a");
  const int64_t a_clients = ConnectedClients(a);

  proxy.Switch(b.port());
  // The same connection, the next request: B answers. Its new connection to B never saw the
  // handshake (no name), and the client never reconnected (one connection accepted in all).
  EXPECT_EQ(client.Run("GET %b", "k"), "on-b");
  EXPECT_EQ(client.Run("CLIENT GETNAME"), "(nil)");
  EXPECT_EQ(client.Run("SET %b %b", "written", "after-switch"), "OK");
  EXPECT_EQ(b.String({"GET", "written"}), "after-switch");
  EXPECT_EQ(a.Integer({"EXISTS", "written"}), 0);
  EXPECT_EQ(proxy.accepted(), 1u);
  // The proxy's connection to A was closed.
  EXPECT_TRUE(Eventually([&] { return ConnectedClients(a) == a_clients - 1; }, 10s))
      << ConnectedClients(a) << " clients on A, " << a_clients << " before the switch";

  // And back: A's data again, on the same connection still.
  proxy.Switch(a.port());
  EXPECT_EQ(client.Run("GET %b", "k"), "on-a");
  EXPECT_EQ(proxy.accepted(), 1u);

  // A connection made after a switch goes to the switched-to server from the start.
  proxy.Switch(b.port());
  Client later(proxy.port());
  EXPECT_EQ(later.Run("GET %b", "k"), "on-b");
  EXPECT_EQ(client.Run("GET %b", "k"), "on-b");
  EXPECT_EQ(proxy.accepted(), 2u);
}

// A switch requested while a command is in flight waits for its reply from the old server (a
// proxy that loses it would shift every later reply of the pipelined connection onto the wrong
// command): BLPOP blocks on A for a second, the switch comes meanwhile, BLPOP's reply is A's, and
// the next command on the same connection is B's.
TEST(TcpProxyTest, ACommandInFlightAtASwitchIsAnsweredByTheOldServer) {
  RedisServer a;
  RedisServer b;
  b.Command({"SET", "k", "on-b"});
  TcpProxy proxy(a.port());
  Client client(proxy.port());
  ASSERT_EQ(client.Run("PING"), "PONG");

  std::string blocked;
  std::thread waiting([&] { blocked = client.Run("BLPOP %b %b", "nothing", "1"); });
  const bool in_flight = Eventually(
      [&] {
        return a.String({"INFO", "clients"}).find("blocked_clients:1") != std::string::npos;
      },
      10s, 5ms);
  if (in_flight) proxy.Switch(b.port());
  waiting.join();
  ASSERT_TRUE(in_flight) << "BLPOP never blocked on A";
  EXPECT_EQ(blocked, "(nil)") << "the reply of the command in flight was lost";
  EXPECT_EQ(client.Run("GET %b", "k"), "on-b");
  EXPECT_EQ(proxy.accepted(), 1u);
}

}  // namespace
}  // namespace flashsale::testing
