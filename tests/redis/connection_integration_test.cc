// The pipelined connection against a real redis-server: pipelining and reply order, TCP and unix
// sockets, AUTH and SELECT, and every way a server can fail (refused, paused, killed, restarted,
// closing the link, speaking garbage), each reported as a value with a clear message.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <thread>
#include <vector>

#include "support/redis_helpers.h"
#include "support/redis_server.h"

namespace flashsale::redis {
namespace {

using base::ErrorCode;
using testing::Connect;
using testing::Exec;
using testing::IoThread;
using testing::RedisServer;
using testing::RedisServerOptions;
using namespace std::chrono_literals;

bool Contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// Retries `args` until it succeeds or `within` passes; for waiting out a reconnect.
base::Result<Reply> ExecEventually(IoThread& io, Connection& connection,
                                   std::initializer_list<std::string_view> args,
                                   std::chrono::milliseconds within = 15s) {
  const auto until = std::chrono::steady_clock::now() + within;
  for (;;) {
    auto result = Exec(io, connection, args);
    if (result.ok() || std::chrono::steady_clock::now() > until) return result;
    std::this_thread::sleep_for(20ms);
  }
}

TEST(ConnectionTest, CommandsOverTcpAndUnixSocket) {
  RedisServer server;
  IoThread io;
  for (const auto& url : {server.tcp_url(), server.unix_url()}) {
    auto connection = Connect(io, url);
    auto set = Exec(io, *connection, {"SET", "greeting", url});
    ASSERT_TRUE(set.ok()) << set.error().ToString();
    EXPECT_EQ(set->str(), "OK");
    auto get = Exec(io, *connection, {"GET", "greeting"});
    ASSERT_TRUE(get.ok());
    EXPECT_EQ(get->str(), url);
    auto missing = Exec(io, *connection, {"GET", "no-such-key"});
    ASSERT_TRUE(missing.ok());
    EXPECT_TRUE(missing->is_nil());
    auto wrong = Exec(io, *connection, {"INCR", "greeting"});
    ASSERT_FALSE(wrong.ok());
    EXPECT_EQ(wrong.error().code, ErrorCode::kRemote);
    EXPECT_TRUE(Contains(wrong.error().message, "not an integer")) << wrong.error().message;
    testing::Stop(io, connection);
  }
}

// Issue 33 point 4: the error replies a caller acts on carry their detail, read once where the
// reply becomes an error; the message stays Redis's own text.
TEST(ConnectionTest, ErrorRepliesCarryTheDetailOfTheirFirstWord) {
  RedisServer server;
  IoThread io;
  auto connection = Connect(io, server.unix_url());
  ASSERT_TRUE(Exec(io, *connection, {"XADD", "s", "*", "f", "v"}).ok());
  const auto expect = [](const base::Result<Reply>& result, base::ErrorDetail detail,
                         std::string_view first_word) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().code, ErrorCode::kRemote);
    EXPECT_EQ(result.error().detail, detail) << result.error().message;
    EXPECT_TRUE(result.error().message.starts_with(first_word)) << result.error().message;
  };
  expect(Exec(io, *connection, {"XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"}),
         base::ErrorDetail::kNoGroup, "NOGROUP");
  const std::string unknown_sha(40, 'a');
  expect(Exec(io, *connection, {"EVALSHA", unknown_sha, "0"}), base::ErrorDetail::kNoScript,
         "NOSCRIPT");
  expect(Exec(io, *connection,
              {"EVAL", "return redis.error_reply('FENCED a newer holder exists')", "0"}),
         base::ErrorDetail::kFenced, "FENCED");
  expect(Exec(io, *connection, {"XINFO", "GROUPS", "missing"}), base::ErrorDetail::kNoSuchKey,
         "ERR");
  expect(Exec(io, *connection, {"INCR", "s"}), base::ErrorDetail::kNone, "WRONGTYPE");
  testing::Stop(io, connection);
}

TEST(ConnectionTest, PipelinesAndMatchesRepliesInOrder) {
  RedisServer server;
  IoThread io;
  auto connection = Connect(io, server.unix_url());
  ASSERT_TRUE(Exec(io, *connection, {"PING"}).ok());

  constexpr int kCommands = 20000;
  std::vector<int64_t> replies(kCommands, -1);
  std::promise<void> all_done;
  std::atomic<int> left = kCommands;
  io.Call([&] {
    // All sent from one handler without waiting: they leave in a few coalesced writes.
    for (int i = 0; i < kCommands; ++i) {
      connection->Send(Command{"INCR", "counter"}.wire(), Clock::now() + 30s,
                       ReplyHandler([&, i](base::Result<Reply> reply) {
                         replies[i] = reply.ok() && reply->is_integer() ? reply->integer() : -2;
                         if (--left == 0) all_done.set_value();
                       }));
    }
  });
  ASSERT_EQ(all_done.get_future().wait_for(60s), std::future_status::ready);
  // INCR returns the running count, so reply i must be i + 1 if replies were matched in order.
  for (int i = 0; i < kCommands; ++i) ASSERT_EQ(replies[i], i + 1) << "reply " << i;
  const auto& stats = connection->stats();
  EXPECT_EQ(stats.replies.value(), static_cast<uint64_t>(kCommands) + 1);
  EXPECT_LT(stats.writes.value(), static_cast<uint64_t>(kCommands) / 10)
      << "writes were not coalesced";
  EXPECT_EQ(stats.latency.Read().count, static_cast<uint64_t>(kCommands) + 1);
  testing::Stop(io, connection);
}

TEST(ConnectionTest, AuthAndSelect) {
  RedisServer server(RedisServerOptions{.requirepass = "s3cret"});
  IoThread io;
  auto connection = Connect(io, "unix://" + server.socket_path() + "?password=s3cret&db=3");
  auto set = Exec(io, *connection, {"SET", "where", "db3"});
  ASSERT_TRUE(set.ok()) << set.error().ToString();
  EXPECT_EQ(server.Integer({"EXISTS", "where"}), 0);  // not in db 0
  EXPECT_EQ(server.String({"EVAL", "redis.call('SELECT', 3) return redis.call('GET', KEYS[1])", "1",
                           "where"}),
            "db3");
  testing::Stop(io, connection);

  ConnectionOptions quick;
  quick.backoff_initial = 5ms;
  auto wrong = Connect(io, server.tcp_url().replace(0, 8, "redis://:nope@"), quick);
  auto denied = Exec(io, *wrong, {"PING"});
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(Contains(denied.error().message, "AUTH")) << denied.error().message;
  testing::Stop(io, wrong);
}

TEST(ConnectionTest, NothingListeningIsUnavailableAtOnce) {
  IoThread io;
  // A port we bound and closed: nothing listens there.
  uint16_t port;
  {
    boost::asio::io_context context;
    boost::asio::ip::tcp::acceptor acceptor(context, {boost::asio::ip::address_v4::loopback(), 0});
    port = acceptor.local_endpoint().port();
  }
  auto connection = Connect(io, "redis://127.0.0.1:" + std::to_string(port));
  const auto start = std::chrono::steady_clock::now();
  auto result = Exec(io, *connection, {"PING"}, 5s);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(Contains(result.error().message, "refused")) << result.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << "should fail fast, not at deadline";
  testing::Stop(io, connection);
}

TEST(ConnectionTest, SlowServerTimesOutAsUnknownThenRecovers) {
  RedisServer server;
  IoThread io;
  auto connection = Connect(io, server.unix_url());
  ASSERT_TRUE(Exec(io, *connection, {"PING"}).ok());

  server.Pause();
  auto slow = Exec(io, *connection, {"INCR", "n"}, 200ms);
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.error().code, ErrorCode::kUnknownOutcome);
  EXPECT_EQ(slow.error().detail, base::ErrorDetail::kDeadline);
  EXPECT_TRUE(Contains(slow.error().message, "may have run")) << slow.error().message;
  server.Resume();

  // The INCR that timed out did run; its late reply is dropped and the next reply is matched to
  // the next command.
  auto next = ExecEventually(io, *connection, {"INCR", "n"});
  ASSERT_TRUE(next.ok()) << next.error().ToString();
  EXPECT_EQ(next->integer(), 2);
  EXPECT_GE(io.Call([&] { return connection->stats().timeouts.value(); }), 1u);
  testing::Stop(io, connection);
}

TEST(ConnectionTest, BusyServerMeansNotRunAndIsUnavailable) {
  RedisServer server;
  IoThread io;
  auto connection = Connect(io, server.unix_url());
  ASSERT_TRUE(Exec(io, *connection, {"PING"}).ok());
  server.Command({"CONFIG", "SET", "busy-reply-threshold", "50"});
  // A script that never ends keeps Redis busy; others are answered -BUSY meanwhile.
  std::thread spinner([&] {
    try {
      server.Command({"EVAL", "while true do end", "0"});
    } catch (const std::exception&) {
    }
  });
  base::Result<Reply> busy = base::Error{ErrorCode::kInternal, "not run"};
  int64_t ran = 0;  // INCRs that succeeded before the script started
  for (int i = 0; i < 200; ++i) {
    busy = Exec(io, *connection, {"INCR", "n"});
    if (busy.ok()) ran = busy->integer();
    if (!busy.ok() && Contains(busy.error().message, "BUSY")) break;
    std::this_thread::sleep_for(10ms);
  }
  server.Command({"SCRIPT", "KILL"});
  spinner.join();
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code, ErrorCode::kUnavailable) << busy.error().message;
  EXPECT_TRUE(Contains(busy.error().message, "did not run")) << busy.error().message;
  // The refused INCR did not run.
  auto after = Exec(io, *connection, {"INCR", "n"});
  ASSERT_TRUE(after.ok()) << after.error().ToString();
  EXPECT_EQ(after->integer(), ran + 1);
  testing::Stop(io, connection);
}

TEST(ConnectionTest, SilentPeerIsDeclaredDeadAfterStallTimeout) {
  RedisServer server;
  IoThread io;
  ConnectionOptions options;
  options.stall_timeout = 300ms;
  auto connection = Connect(io, server.unix_url(), options);
  ASSERT_TRUE(Exec(io, *connection, {"PING"}).ok());
  server.Pause();
  const auto start = std::chrono::steady_clock::now();
  auto result = Exec(io, *connection, {"PING"}, 10s);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kUnknownOutcome);
  EXPECT_TRUE(Contains(result.error().message, "declared dead")) << result.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  server.Resume();
  EXPECT_TRUE(ExecEventually(io, *connection, {"PING"}).ok());
  testing::Stop(io, connection);
}

TEST(ConnectionTest, KilledServerFailsClearlyAndReconnectsAfterRestart) {
  RedisServer server(RedisServerOptions{.appendonly = true, .appendfsync = "always"});
  IoThread io;
  auto connection = Connect(io, server.tcp_url());
  ASSERT_TRUE(Exec(io, *connection, {"SET", "k", "before"}).ok());

  server.Kill();
  auto down = Exec(io, *connection, {"GET", "k"});
  ASSERT_FALSE(down.ok());
  EXPECT_TRUE(down.error().code == ErrorCode::kUnavailable ||
              down.error().code == ErrorCode::kUnknownOutcome)
      << down.error().ToString();
  EXPECT_TRUE(Contains(down.error().message, "127.0.0.1")) << down.error().message;
  // While it is down, calls keep failing fast and clearly.
  for (int i = 0; i < 5; ++i) {
    auto again = Exec(io, *connection, {"GET", "k"});
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().code, ErrorCode::kUnavailable) << again.error().message;
  }

  server.Start();
  auto after = ExecEventually(io, *connection, {"GET", "k"});
  ASSERT_TRUE(after.ok()) << after.error().ToString();
  EXPECT_EQ(after->str(), "before");  // replayed from the AOF
  const auto& stats = connection->stats();
  EXPECT_GE(stats.connects.value(), 2u);
  EXPECT_GE(stats.disconnects.value(), 1u);
  EXPECT_GE(stats.unavailable.value() + stats.unknown_outcome.value(), 1u);
  testing::Stop(io, connection);
}

TEST(ConnectionTest, ServerClosingTheLinkIsReportedAndHealed) {
  RedisServer server;
  IoThread io;
  auto connection = Connect(io, server.unix_url());
  auto id = Exec(io, *connection, {"CLIENT", "ID"});
  ASSERT_TRUE(id.ok());
  // CLIENT KILL from another connection closes ours.
  server.Command({"CLIENT", "KILL", "ID", std::to_string(id->integer())});
  auto result = ExecEventually(io, *connection, {"PING"});
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_GE(io.Call([&] { return connection->stats().disconnects.value(); }), 1u);
  testing::Stop(io, connection);
}

// A TCP peer that answers every command with bytes that are not RESP.
TEST(ConnectionTest, GarbageFromThePeerIsAProtocolErrorNotACrash) {
  namespace asio = boost::asio;
  asio::io_context server_context;
  asio::ip::tcp::acceptor acceptor(server_context, {asio::ip::address_v4::loopback(), 0});
  const uint16_t port = acceptor.local_endpoint().port();
  std::thread peer([&] {
    asio::ip::tcp::socket socket(server_context);
    acceptor.accept(socket);
    char buffer[256];
    boost::system::error_code ignored;
    socket.read_some(asio::buffer(buffer), ignored);
    asio::write(socket, asio::buffer(std::string_view("?this is not redis\r\n")), ignored);
    std::this_thread::sleep_for(200ms);
  });
  IoThread io;
  auto connection = Connect(io, "redis://127.0.0.1:" + std::to_string(port));
  auto result = Exec(io, *connection, {"PING"}, 5s);
  peer.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kUnknownOutcome);
  EXPECT_TRUE(Contains(result.error().message, "protocol error")) << result.error().message;
  testing::Stop(io, connection);
}

TEST(ConnectionTest, QueueLimitAndStopAnswerEveryCall) {
  RedisServer server;
  IoThread io;
  ConnectionOptions options;
  options.max_queued = 10;
  auto connection = Connect(io, server.unix_url(), options);
  ASSERT_TRUE(Exec(io, *connection, {"PING"}).ok());
  server.Pause();

  std::vector<base::ErrorCode> codes;
  std::promise<void> done;
  int left = 15;
  io.Call([&] {
    for (int i = 0; i < 15; ++i) {
      connection->Send(Command{"PING"}.wire(), Clock::now() + 30s,
                       ReplyHandler([&](base::Result<Reply> reply) {
                         codes.push_back(reply.ok() ? ErrorCode::kInternal : reply.error().code);
                         if (--left == 0) done.set_value();
                       }));
    }
  });
  // Five over the limit are refused at once; Stop answers the ten in flight.
  std::this_thread::sleep_for(100ms);
  testing::Stop(io, connection);
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  server.Resume();
  EXPECT_EQ(std::count(codes.begin(), codes.end(), ErrorCode::kResourceExhausted), 5);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), ErrorCode::kUnknownOutcome), 10);

  auto after_stop = Exec(io, *connection, {"PING"});
  ASSERT_FALSE(after_stop.ok());
  EXPECT_EQ(after_stop.error().code, ErrorCode::kCancelled);
}

}  // namespace
}  // namespace flashsale::redis
