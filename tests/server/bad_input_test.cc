// Bad input over a real socket: malformed HTTP, wrong JSON, oversize requests, bad ids and
// identities, slow and idle clients. The server must answer each with the right 4xx and a JSON
// error body {"status":"<word>","error":"..."} (or cut the connection when nobody is left to
// answer), never crash and never answer 500. After every test the same server still sells a unit
// and /metrics counts no request under status="error".

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "server/server_fixture.h"

namespace flashsale::server {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using testing::HttpClient;
using testing::HttpResult;
using testing::RedisServer;
using testing::SendRaw;
using testing::ServerFixture;
using testing::ServerFixtureOptions;
using testing::StatusCodes;

constexpr size_t kMaxHeaderBytes = 1024;
constexpr size_t kMaxBodyBytes = 8192;
constexpr std::string_view kPurchasePath = "/api/v1/activities/sale/purchase";

// --- Raw sockets -------------------------------------------------------------------------------

// A blocking loopback TCP connection for byte-level clients (slow, idle, 100-continue). Every
// wait is bounded; writes never raise SIGPIPE.
class RawSocket {
 public:
  // receive_buffer > 0: our socket's receive buffer (SO_RCVBUF), set before connecting, so a
  // reader that waits makes the server's writes meet a full socket sooner.
  explicit RawSocket(uint16_t port, int receive_buffer = 0)
      : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ >= 0 && receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 &&
                 ::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool connected() const { return connected_; }
  bool closed() const { return closed_; }
  const std::string& received() const { return received_; }

  // False once the peer has closed the connection (the write fails).
  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        closed_ = true;
        return false;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Closes our sending side (the peer reads end of stream); reading goes on.
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  // Reads whatever arrives within `timeout` (returns at the first bytes or at end of stream).
  void ReadFor(milliseconds timeout) {
    if (closed_) return;
    pollfd p{fd_, POLLIN, 0};
    int ready;
    do {
      ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) return;
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      closed_ = true;  // end of stream, or reset
      return;
    }
    received_.append(chunk, static_cast<size_t>(n));
  }

  // Reads until the peer closes the connection or `timeout` passes.
  void ReadUntilClosed(milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!closed_ && std::chrono::steady_clock::now() < until) ReadFor(milliseconds(50));
  }

  // Reads until `text` has arrived, the peer closes, or `timeout` passes.
  bool ReadUntil(std::string_view text, milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (received_.find(text) == std::string::npos && !closed_ &&
           std::chrono::steady_clock::now() < until) {
      ReadFor(milliseconds(50));
    }
    return received_.find(text) != std::string::npos;
  }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
};

// One response parsed out of raw bytes.
struct RawReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// Every complete response in `raw`, in order (interim 1xx responses included, without bodies).
std::vector<RawReply> ParseReplies(std::string_view raw) {
  std::vector<RawReply> replies;
  while (raw.starts_with("HTTP/1.")) {
    const size_t end = raw.find("\r\n\r\n");
    if (end == std::string_view::npos || raw.size() < 12) break;
    RawReply reply;
    reply.status = std::atoi(std::string(raw.substr(9, 3)).c_str());
    std::string_view head = raw.substr(0, end);
    raw.remove_prefix(end + 4);
    head.remove_prefix(std::min(head.find("\r\n"), head.size()));
    while (!head.empty()) {
      if (head.starts_with("\r\n")) head.remove_prefix(2);
      const size_t line_end = std::min(head.find("\r\n"), head.size());
      const std::string_view line = head.substr(0, line_end);
      head.remove_prefix(line_end);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string name(line.substr(0, colon));
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      reply.headers[name] = std::string(value);
    }
    size_t length = 0;
    if (auto it = reply.headers.find("content-length"); it != reply.headers.end()) {
      length = std::stoul(it->second);
    }
    if (reply.status >= 200) {
      if (raw.size() < length) break;
      reply.body = std::string(raw.substr(0, length));
      raw.remove_prefix(length);
    }
    replies.push_back(std::move(reply));
  }
  return replies;
}

// --- Checks ------------------------------------------------------------------------------------

// The body is exactly {"status": word, "error": "<text containing `fragment`>"}.
::testing::AssertionResult IsErrorBody(std::string_view body, std::string_view word,
                                       std::string_view fragment) {
  boost::system::error_code error;
  const json::value value = json::parse(body, error);
  if (error || !value.is_object()) {
    return ::testing::AssertionFailure() << "not a JSON object: " << body;
  }
  const json::object& object = value.as_object();
  const json::value* status = object.if_contains("status");
  const json::value* message = object.if_contains("error");
  if (object.size() != 2 || status == nullptr || message == nullptr || !status->is_string() ||
      !message->is_string()) {
    return ::testing::AssertionFailure() << "not {\"status\":...,\"error\":...}: " << body;
  }
  if (status->as_string() != word) {
    return ::testing::AssertionFailure() << "status is not \"" << word << "\": " << body;
  }
  const std::string_view text = message->as_string();
  if (text.find(fragment) == std::string_view::npos) {
    return ::testing::AssertionFailure() << "error does not mention '" << fragment << "': " << body;
  }
  return ::testing::AssertionSuccess();
}

// The HTTP status is `status` and the body the error of `word` mentioning `fragment`.
::testing::AssertionResult IsError(int got_status, std::string_view body, int status,
                                   std::string_view word, std::string_view fragment) {
  if (got_status != status) {
    return ::testing::AssertionFailure()
           << "HTTP " << got_status << " instead of " << status << ": " << body;
  }
  return IsErrorBody(body, word, fragment);
}
::testing::AssertionResult IsError(const HttpResult& result, int status, std::string_view word,
                                   std::string_view fragment) {
  return IsError(result.status, result.body, status, word, fragment);
}

// A raw exchange that must be answered by exactly one error response, with the connection closed
// by the server ("Connection: close").
::testing::AssertionResult IsClosingError(std::string_view raw, int status, std::string_view word,
                                          std::string_view fragment) {
  const std::vector<RawReply> replies = ParseReplies(raw);
  if (replies.size() != 1 || StatusCodes(raw).size() != 1) {
    return ::testing::AssertionFailure() << "not exactly one response: '" << raw << "'";
  }
  auto it = replies[0].headers.find("connection");
  if (it == replies[0].headers.end() || it->second != "close") {
    return ::testing::AssertionFailure() << "no 'Connection: close': " << raw;
  }
  return IsError(replies[0].status, replies[0].body, status, word, fragment);
}

int64_t Code(const std::string& body) {
  boost::system::error_code error;
  const json::value value = json::parse(body, error);
  if (error || !value.is_object() || !value.as_object().contains("code")) return -1000;
  return value.at("code").as_int64();
}

std::string Repeat(std::string_view piece, size_t times) {
  std::string out;
  out.reserve(piece.size() * times);
  for (size_t i = 0; i < times; ++i) out += piece;
  return out;
}

// A purchase of activity "sale" as raw bytes (keep-alive unless `close`).
std::string RawPurchase(std::string_view user, std::string_view body, bool close = true) {
  return fmt::format(
      "POST {} HTTP/1.1\r\nHost: t\r\nX-User-Id: {}\r\n{}Content-Length: {}\r\n\r\n{}",
      kPurchasePath, user, close ? "Connection: close\r\n" : "", body.size(), body);
}

// --- Fixture -----------------------------------------------------------------------------------

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }

  static ServerFixtureOptions Options() {
    ServerFixtureOptions options;
    options.server.max_header_bytes = kMaxHeaderBytes;
    options.server.max_body_bytes = kMaxBodyBytes;
    return options;
  }

  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Start(Options())); }

  // After everything a test threw at it, the same server still sells and has answered no 500.
  void TearDown() override {
    if (!server_) return;
    auto bought =
        server_->Client().Post(std::string(kPurchasePath), "", ServerFixture::User("survivor"));
    EXPECT_EQ(bought.status, 200) << bought.body;
    EXPECT_EQ(Code(bought.body), 1) << bought.body;
    // A request is counted just after its reply is written, so the count may lag the reply a
    // little: wait (bounded) until the purchase shows.
    HttpResult metrics;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    do {
      metrics = server_->Client().Get("/metrics");
      if (metrics.body.find("route=\"purchase\",status=\"reserved\"") != std::string::npos) break;
      std::this_thread::sleep_for(milliseconds(10));
    } while (std::chrono::steady_clock::now() < until);
    ASSERT_EQ(metrics.status, 200);
    EXPECT_NE(metrics.body.find("route=\"purchase\",status=\"reserved\""), std::string::npos)
        << metrics.body;
    EXPECT_EQ(metrics.body.find("status=\"error\""), std::string::npos) << metrics.body;
  }

  // A fresh server with `options` and the open activity "sale" (1000 units, one per user).
  void Start(ServerFixtureOptions options) {
    server_.reset();
    server_ = std::make_unique<ServerFixture>(*redis_, options);
    auto created = server_->Client().Post("/api/v1/admin/activities",
                                          R"({"id":"sale","stock":1000,"per_user_limit":1})",
                                          server_->Admin());
    ASSERT_EQ(created.status, 201) << created.body;
  }

  std::string Raw(std::string_view bytes) {
    return SendRaw(server_->port(), bytes, std::chrono::seconds(5));
  }
  HttpResult Admin(std::string_view method, std::string_view target, std::string_view body) {
    return server_->Client().Request(method, target, body, server_->Admin());
  }
  // Units of "sale" reserved so far (refused requests must take none).
  int64_t Reserved() {
    auto status = Admin("GET", "/api/v1/admin/activities/sale", "");
    boost::system::error_code error;
    const json::value value = json::parse(status.body, error);
    if (error) return -1;
    return value.at("redis").at("reserved").as_int64();
  }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
};
RedisServer* BadInputTest::redis_ = nullptr;

// --- Malformed HTTP ----------------------------------------------------------------------------

TEST_F(BadInputTest, MalformedRequestLinesAre400AndClose) {
  const std::vector<std::string> requests = {
      "GARBAGE\r\n\r\n",
      "\r\n\r\n",
      "GET /healthz HTTP/9.9\r\nHost: t\r\n\r\n",
      "GET /healthz\r\nHost: t\r\n\r\n",
      "GET  HTTP/1.1\r\nHost: t\r\n\r\n",
      "G(T /healthz HTTP/1.1\r\nHost: t\r\n\r\n",
      std::string("GET /heal\0thz HTTP/1.1\r\nHost: t\r\n\r\n",
                  sizeof("GET /heal\0thz HTTP/1.1\r\nHost: t\r\n\r\n") - 1),
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 a TLS hello\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nNo colon here\r\n\r\n",
      "GET /healthz HTTP/1.1\r\n: empty name\r\n\r\n",
  };
  for (const auto& request : requests) {
    SCOPED_TRACE(request);
    EXPECT_TRUE(IsClosingError(Raw(request), 400, "bad_request", "malformed HTTP request"));
  }
}

TEST_F(BadInputTest, UnknownMethodOnAKnownPathIs405WithAllow) {
  const std::string raw = Raw("BREW /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  std::vector<RawReply> replies = ParseReplies(raw);
  ASSERT_EQ(replies.size(), 1u) << raw;
  EXPECT_TRUE(IsError(replies[0].status, replies[0].body, 405, "method_not_allowed", "GET"));
  EXPECT_EQ(replies[0].headers["allow"], "GET");

  HttpClient client = server_->Client();
  struct Case {
    std::string method, target, allow;
  };
  for (const Case& c : std::vector<Case>{
           {"DELETE", "/healthz", "GET"},
           // A public route also answers a CORS preflight (OPTIONS); an admin route does not.
           {"GET", std::string(kPurchasePath), "POST, OPTIONS"},
           {"PUT", "/api/v1/orders", "GET, OPTIONS"},
           {"DELETE", "/api/v1/admin/activities", "GET, POST"},
           {"PUT", "/api/v1/admin/activities/sale", "GET, PATCH, DELETE"},
       }) {
    SCOPED_TRACE(c.method + " " + c.target);
    auto reply = client.Request(c.method, c.target, "", ServerFixture::User("u1"));
    EXPECT_TRUE(IsError(reply, 405, "method_not_allowed", c.allow));
    EXPECT_EQ(reply.headers["allow"], c.allow);
  }
  EXPECT_EQ(Reserved(), 0);
}

TEST_F(BadInputTest, UnknownRoutesAre404) {
  HttpClient client = server_->Client();
  for (const std::string target :
       {"/nope", "/api/v2/activities", "/api/v1/activities/sale/purchase/more",
        "/api/v1/activities//purchase", "/api/v1/admin", "//healthz", "/healthz/"}) {
    SCOPED_TRACE(target);
    EXPECT_TRUE(
        IsError(client.Get(target, ServerFixture::User("u1")), 404, "not_found", "no such route"));
  }
  EXPECT_TRUE(IsError(client.Post("/api/v1/activities//purchase", "", ServerFixture::User("u1")),
                      404, "not_found", "no such route"));
}

// --- Bodies ------------------------------------------------------------------------------------

TEST_F(BadInputTest, BadPurchaseBodiesAre400NamingTheField) {
  struct Case {
    std::string body, fragment;
  };
  // The whole table of bad bodies is a unit test of the parser (src/server/bodies_test.cc);
  // here, one of each kind shows that a refused body is a 400 over HTTP and takes nothing.
  const std::vector<Case> cases = {
      {R"({"quantity":"two"})", "field 'quantity' must be an integer"},
      {R"({"quantity":101})", "quantity must be between 1 and 100"},
      {R"([{"quantity":1}])", "body must be a JSON object"},
      {R"({"qty":1})", "unknown field 'qty'"},
      {R"({"quantity":1}garbage)", "body is not JSON"},
      {Repeat("[", 4000) + Repeat("]", 4000), "body is not JSON"},
  };
  HttpClient client = server_->Client();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 80));
    auto reply = client.Post(std::string(kPurchasePath), c.body, ServerFixture::User("u1"));
    EXPECT_TRUE(IsError(reply, 400, "bad_request", c.fragment));
  }
  EXPECT_EQ(Reserved(), 0) << "a refused body took a unit";
}

TEST_F(BadInputTest, BadAdminBodiesAre400NamingTheField) {
  struct Case {
    std::string method, target, body, fragment;
  };
  const std::string create = "/api/v1/admin/activities";
  const std::string sale = "/api/v1/admin/activities/sale";
  // The whole table of bad bodies is a unit test of the parsers (src/server/bodies_test.cc);
  // here, a few of each route show that a refusal is a 400 over HTTP and changes nothing, and the
  // PATCH whose check needs the stored activity (an end before its start).
  const std::vector<Case> cases = {
      {"POST", create, R"({"id":"a","stock":"two"})", "field 'stock' must be an integer"},
      {"POST", create, R"({"id":"a","stock":1,"colour":"red"})", "unknown field 'colour'"},
      {"POST", create, R"({"id":"bad id!","stock":1})", "activity id 'bad id!'"},
      {"POST", create, R"({"id":"a","stock":)", "body is not JSON"},
      {"PATCH", sale, R"({"per_user_limit":"3"})", "field 'per_user_limit' must be an integer"},
      {"PATCH", sale, "{}", "nothing to update"},
      {"PATCH", sale, R"({"end_ms":-5})", "end_ms must be after start_ms"},
      {"POST", sale + "/stock", R"({"units":0})", "give 'units'"},
      {"POST", sale + "/stock", R"({"items":[1]})", "field 'items' must be an array of strings"},
      {"POST", "/api/v1/admin/tokens", R"({"user_id":"bad user"})", "field 'user_id' must be"},
  };

  for (const Case& c : cases) {
    SCOPED_TRACE(c.method + " " + c.target + " " + c.body.substr(0, 80));
    EXPECT_TRUE(IsError(Admin(c.method, c.target, c.body), 400, "bad_request", c.fragment));
  }
  // Nothing was created or changed by a refused request.
  auto list = Admin("GET", "/api/v1/admin/activities", "");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(json::parse(list.body).at("activities").as_array().size(), 1u) << list.body;
  auto state = Admin("GET", sale, "");
  EXPECT_EQ(json::parse(state.body).at("activity").at("version").as_int64(), 1) << state.body;
}

// start_ms near the top of int64: the default end (start + one hour) must not overflow. Signed
// overflow is undefined behaviour; under the asan preset (-fno-sanitize-recover) it aborts the
// server, in other builds the refusal shows a wrapped-around end time.
TEST_F(BadInputTest, StartNearTheEndOfTimeIsRefusedWithoutOverflow) {
  auto reply = Admin("POST", "/api/v1/admin/activities",
                     R"({"id":"late","stock":1,"start_ms":9223372036854775807})");
  EXPECT_TRUE(IsError(reply, 400, "bad_request", ""));
  EXPECT_EQ(reply.body.find("-92233720"), std::string::npos)
      << "the default end_ms wrapped around (signed overflow): " << reply.body;
}

// An activity the admin API accepts must be sellable: refused at creation (400) or a purchase
// reserves a unit. Values at the edge of the accepted ranges must not break every purchase.
TEST_F(BadInputTest, AnAcceptedActivityIsSellable) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"huge", R"({"id":"huge","stock":9223372036854775807})"},
      {"slow", R"({"id":"slow","stock":5,"user_rate":{"per_second":1e-300,"burst":1}})"},
  };
  HttpClient client = server_->Client();
  for (const auto& [id, body] : cases) {
    SCOPED_TRACE(body);
    auto created = client.Post("/api/v1/admin/activities", body, server_->Admin());
    if (created.status == 400) {
      EXPECT_TRUE(IsError(created, 400, "bad_request", ""));
      continue;
    }
    ASSERT_EQ(created.status, 201) << created.body;
    auto bought = client.Post("/api/v1/activities/" + id + "/purchase", "",
                              ServerFixture::User("edge-buyer"));
    EXPECT_EQ(bought.status, 200) << "accepted, then unsellable: " << bought.body;
    EXPECT_EQ(Code(bought.body), 1) << bought.body;
  }
}

// --- Sizes -------------------------------------------------------------------------------------

TEST_F(BadInputTest, OversizeHeadersAre431AndOversizeBodiesAre413) {
  const std::string big_header = "X-Big: " + std::string(2 * kMaxHeaderBytes, 'a') + "\r\n";
  EXPECT_TRUE(IsClosingError(Raw("GET /healthz HTTP/1.1\r\nHost: t\r\n" + big_header + "\r\n"), 431,
                             "headers_too_large", "headers are too large"));
  EXPECT_TRUE(IsClosingError(
      Raw("GET /healthz HTTP/1.1\r\nHost: t\r\n" + Repeat("X-Many: 0123456789\r\n", 100) + "\r\n"),
      431, "headers_too_large", "headers are too large"));
  EXPECT_TRUE(IsClosingError(
      Raw("GET /" + std::string(2 * kMaxHeaderBytes, 'p') + " HTTP/1.1\r\nHost: t\r\n\r\n"), 431,
      "headers_too_large", "headers are too large"));
  // A body over the limit, sent whole, declared only, or chunked.
  EXPECT_TRUE(IsClosingError(Raw(RawPurchase("u1", std::string(2 * kMaxBodyBytes, ' '))), 413,
                             "payload_too_large", "body is too large"));
  EXPECT_TRUE(IsClosingError(Raw(fmt::format("POST {} HTTP/1.1\r\nHost: t\r\nX-User-Id: u1\r\n"
                                             "Content-Length: 1000000000\r\n\r\n",
                                             kPurchasePath)),
                             413, "payload_too_large", "body is too large"));
  const std::string chunk = fmt::format("{:x}\r\n{}\r\n", 4096, std::string(4096, ' '));
  EXPECT_TRUE(IsClosingError(Raw(fmt::format("POST {} HTTP/1.1\r\nHost: t\r\nX-User-Id: u1\r\n"
                                             "Transfer-Encoding: chunked\r\n\r\n{}0\r\n\r\n",
                                             kPurchasePath, Repeat(chunk, 3))),
                             413, "payload_too_large", "body is too large"));
  // Over the HttpClient too: the server's answer reaches a normal client.
  auto big = server_->Client().Post(std::string(kPurchasePath), std::string(2 * kMaxBodyBytes, ' '),
                                    ServerFixture::User("u1"));
  EXPECT_TRUE(IsError(big, 413, "payload_too_large", "body is too large"));
  EXPECT_EQ(Reserved(), 0);
}

// --- Path ids and identities -------------------------------------------------------------------

TEST_F(BadInputTest, InvalidActivityIdsInThePathAre400) {
  HttpClient client = server_->Client();
  const std::string too_long(65, 'a');
  for (const std::string& id :
       {std::string("bad!id"), std::string("d%24mo"), std::string("a.b"), std::string("%E2%82%AC"),
        std::string("sale%00"), too_long, std::string(300, 'b')}) {
    SCOPED_TRACE(id);
    EXPECT_TRUE(IsError(
        client.Post("/api/v1/activities/" + id + "/purchase", "", ServerFixture::User("u1")), 400,
        "bad_request", "must be 1-64 characters of [A-Za-z0-9_-]"));
    EXPECT_TRUE(IsError(client.Get("/api/v1/activities/" + id), 400, "bad_request", "activity id"));
    const std::string admin = "/api/v1/admin/activities/" + id;
    EXPECT_TRUE(IsError(Admin("GET", admin, ""), 400, "bad_request", "activity id"));
    EXPECT_TRUE(
        IsError(Admin("PATCH", admin, R"({"title":"x"})"), 400, "bad_request", "activity id"));
    EXPECT_TRUE(IsError(Admin("POST", admin + "/open", ""), 400, "bad_request", "activity id"));
    EXPECT_TRUE(IsError(Admin("POST", admin + "/close", ""), 400, "bad_request", "activity id"));
    EXPECT_TRUE(IsError(Admin("POST", admin + "/stock", R"({"units":1})"), 400, "bad_request",
                        "activity id"));
  }
  // The echoed id is cut to 64 characters.
  auto reply = client.Get("/api/v1/activities/" + std::string(300, 'b'));
  EXPECT_EQ(reply.body.find(std::string(65, 'b')), std::string::npos) << reply.body;
  EXPECT_EQ(Reserved(), 0);
}

TEST_F(BadInputTest, MissingOrInvalidUserIdIs401) {
  HttpClient client = server_->Client();
  const std::string purchase(kPurchasePath);
  EXPECT_TRUE(IsError(client.Post(purchase, ""), 401, "unauthorized", "missing X-User-Id"));
  EXPECT_TRUE(IsError(client.Get("/api/v1/orders"), 401, "unauthorized", "missing X-User-Id"));
  for (const std::string& user :
       {std::string(""), std::string("a b"), std::string("alice/bob"), std::string("al\"ice"),
        std::string(65, 'u'), std::string("caf\xc3\xa9")}) {
    SCOPED_TRACE(user);
    EXPECT_TRUE(IsError(client.Post(purchase, "", {{"X-User-Id", user}}), 401, "unauthorized",
                        "X-User-Id must be 1-64 characters"));
    EXPECT_TRUE(IsError(client.Get("/api/v1/orders", {{"X-User-Id", user}}), 401, "unauthorized",
                        "X-User-Id must be 1-64 characters"));
  }
  // Raw bytes no client library would send.
  EXPECT_TRUE(IsClosingError(Raw(RawPurchase("\xff\xfe", "")), 401, "unauthorized", "X-User-Id"));
  // The admin API takes the admin token only.
  EXPECT_TRUE(IsError(client.Get("/api/v1/admin/activities", ServerFixture::User("admin")), 401,
                      "unauthorized", "Authorization: Bearer"));
  EXPECT_TRUE(IsError(
      client.Get("/api/v1/admin/activities", {{"Authorization", "Bearer test-admin-tokeN"}}), 401,
      "unauthorized", "wrong admin token"));
  EXPECT_EQ(Reserved(), 0);
}

// A header that names the caller, given twice (in any spelling of its name), is ambiguous: 400,
// nothing sold. The same header once in another case is one header.
TEST_F(BadInputTest, RepeatedIdentityHeadersAre400) {
  const std::string head =
      fmt::format("POST {} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n", kPurchasePath);
  const std::string tail = "Content-Length: 0\r\n\r\n";
  EXPECT_TRUE(IsClosingError(Raw(head + "X-User-Id: a\r\nX-User-Id: b\r\n" + tail), 400,
                             "bad_request", "header X-User-Id appears more than once"));
  EXPECT_TRUE(IsClosingError(Raw(head + "x-user-id: a\r\nX-USER-ID: a\r\n" + tail), 400,
                             "bad_request", "header X-User-Id appears more than once"));
  EXPECT_TRUE(IsClosingError(
      Raw(head + "X-User-Id: a\r\nAuthorization: Bearer x\r\nauthorization: Bearer y\r\n" + tail),
      400, "bad_request", "header Authorization appears more than once"));
  EXPECT_TRUE(IsClosingError(
      Raw(head + "X-User-Id: a\r\nX-Gateway-Secret: s\r\nx-gateway-secret: s\r\n" + tail), 400,
      "bad_request", "header X-Gateway-Secret appears more than once"));
  // Each once, whatever the case of the name: served.
  const std::string once = Raw(head + "x-user-id: single\r\n" + tail);
  EXPECT_NE(once.find(" 200 "), std::string::npos) << once;
  EXPECT_EQ(Reserved(), 1);
}

// --- Framing -----------------------------------------------------------------------------------

TEST_F(BadInputTest, InvalidContentLengthAndChunkingAre400) {
  const std::string head =
      fmt::format("POST {} HTTP/1.1\r\nHost: t\r\nX-User-Id: u1\r\n", kPurchasePath);
  const std::vector<std::string> requests = {
      head + "Content-Length: abc\r\n\r\n",
      head + "Content-Length: -1\r\n\r\n",
      head + "Content-Length: 1e3\r\n\r\n",
      head + "Content-Length: 2 2\r\n\r\n{}",
      head + "Content-Length: 99999999999999999999999\r\n\r\n",
      head + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{} ",
      head + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      head + "Transfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n",
      head + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
      head + "Transfer-Encoding: chunked\r\n\r\n-2\r\n{}\r\n0\r\n\r\n",
  };
  for (const auto& request : requests) {
    SCOPED_TRACE(request);
    EXPECT_TRUE(IsClosingError(Raw(request), 400, "bad_request", "malformed HTTP request"));
  }
  // A body cut short by the client closing its side can never complete: 400, not a hang.
  RawSocket cut(server_->port());
  ASSERT_TRUE(cut.connected());
  ASSERT_TRUE(cut.Send(head + "Content-Length: 14\r\n\r\n{\"quan"));
  cut.ShutdownWrite();
  cut.ReadUntilClosed(std::chrono::seconds(10));
  EXPECT_TRUE(cut.closed());
  EXPECT_TRUE(IsClosingError(cut.received(), 400, "bad_request", "malformed HTTP request"));
  EXPECT_EQ(Reserved(), 0);
  // A well-formed chunked body is read normally.
  const std::string chunked =
      Raw(fmt::format("POST {} HTTP/1.1\r\nHost: t\r\nX-User-Id: chunky\r\n", kPurchasePath) +
          "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
          "5\r\n{\"qua\r\n9\r\nntity\":1}\r\n0\r\n\r\n");
  const std::vector<RawReply> replies = ParseReplies(chunked);
  ASSERT_EQ(replies.size(), 1u) << chunked;
  EXPECT_EQ(replies[0].status, 200) << chunked;
  EXPECT_EQ(Code(replies[0].body), 1) << chunked;
}

// RFC 9112 section 6.3: a request whose Transfer-Encoding does not end in chunked has no
// determinable length; the server must answer 400 and close, not guess that the body is empty
// (which reads the body as the next request: a request-smuggling ambiguity behind a proxy).
TEST_F(BadInputTest, TransferEncodingNotEndingInChunkedIs400) {
  for (const std::string coding : {"chunked, gzip", "gzip", "identity"}) {
    SCOPED_TRACE(coding);
    const std::string raw = Raw(fmt::format(
        "POST {} HTTP/1.1\r\nHost: t\r\nX-User-Id: smuggler\r\nTransfer-Encoding: {}\r\n\r\n"
        "2\r\n{{}}\r\n0\r\n\r\n",
        kPurchasePath, coding));
    EXPECT_TRUE(IsClosingError(raw, 400, "bad_request", "malformed HTTP request"));
  }
  EXPECT_EQ(Reserved(), 0) << "a request of unknown length was served";
}

TEST_F(BadInputTest, PipelinedGarbageAfterValidRequestsIs400ThenClose) {
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.connected());
  ASSERT_TRUE(socket.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n" +
                          RawPurchase("piper", "", false) +
                          "GARBAGE GARBAGE\r\n\r\n"
                          "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  socket.ReadUntilClosed(std::chrono::seconds(10));
  EXPECT_TRUE(socket.closed()) << "the server kept the connection after garbage";
  const std::string& raw = socket.received();
  EXPECT_EQ(StatusCodes(raw), (std::vector<int>{200, 200, 400})) << raw;
  std::vector<RawReply> replies = ParseReplies(raw);
  ASSERT_EQ(replies.size(), 3u) << raw;
  EXPECT_EQ(Code(replies[1].body), 1) << replies[1].body;
  EXPECT_TRUE(IsErrorBody(replies[2].body, "bad_request", "malformed HTTP request"));
  EXPECT_EQ(replies[2].headers["connection"], "close");
}

TEST_F(BadInputTest, ExpectContinueIsAnsweredNormally) {
  const std::string body = R"({"quantity":1})";
  const std::string head = fmt::format(
      "POST {} HTTP/1.1\r\nHost: t\r\nX-User-Id: patient\r\nExpect: 100-continue\r\n"
      "Connection: close\r\nContent-Length: {}\r\n\r\n",
      kPurchasePath, body.size());
  // A client that waits for 100 Continue before sending the body.
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.connected());
  ASSERT_TRUE(socket.Send(head));
  ASSERT_TRUE(socket.ReadUntil("\r\n\r\n", std::chrono::seconds(10))) << socket.received();
  EXPECT_TRUE(socket.received().starts_with("HTTP/1.1 100 Continue\r\n")) << socket.received();
  ASSERT_TRUE(socket.Send(body));
  socket.ReadUntilClosed(std::chrono::seconds(10));
  EXPECT_EQ(StatusCodes(socket.received()), (std::vector<int>{100, 200})) << socket.received();
  std::vector<RawReply> replies = ParseReplies(socket.received());
  ASSERT_EQ(replies.size(), 2u) << socket.received();
  EXPECT_EQ(Code(replies[1].body), 1) << replies[1].body;

  // A client that sends the body at once anyway.
  const std::string eager =
      Raw(fmt::format("POST {} HTTP/1.1\r\nHost: t\r\nX-User-Id: eager\r\nExpect: 100-continue\r\n"
                      "Connection: close\r\nContent-Length: {}\r\n\r\n{}",
                      kPurchasePath, body.size(), body));
  replies = ParseReplies(eager);
  ASSERT_FALSE(replies.empty()) << eager;
  EXPECT_EQ(replies.back().status, 200) << eager;
  EXPECT_EQ(Code(replies.back().body), 1) << eager;
}

// --- Timeouts ----------------------------------------------------------------------------------

TEST_F(BadInputTest, IdleConnectionsAreClosedWithoutAResponse) {
  ServerFixtureOptions options = Options();
  options.server.idle_timeout = milliseconds(300);
  ASSERT_NO_FATAL_FAILURE(Start(options));

  RawSocket silent(server_->port());
  ASSERT_TRUE(silent.connected());
  silent.ReadUntilClosed(std::chrono::seconds(10));
  EXPECT_TRUE(silent.closed()) << "an idle connection was kept open";
  EXPECT_EQ(silent.received(), "");

  // A keep-alive connection that goes quiet after one request.
  RawSocket quiet(server_->port());
  ASSERT_TRUE(quiet.connected());
  ASSERT_TRUE(quiet.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  quiet.ReadUntilClosed(std::chrono::seconds(10));
  EXPECT_TRUE(quiet.closed()) << "an idle keep-alive connection was kept open";
  EXPECT_EQ(StatusCodes(quiet.received()), std::vector<int>{200}) << quiet.received();
}

TEST_F(BadInputTest, SlowDripIsCutOffWhileOthersAreServed) {
  ServerFixtureOptions options = Options();
  options.server.read_timeout = milliseconds(300);
  ASSERT_NO_FATAL_FAILURE(Start(options));

  const std::string request = RawPurchase("dripper", R"({"quantity":1})");
  RawSocket drip(server_->port());
  ASSERT_TRUE(drip.connected());
  int served_meanwhile = 0;
  size_t sent = 0;
  // One byte every 150 ms: the whole request would take ~25 s, far over read_timeout.
  while (sent < request.size() && !drip.closed()) {
    if (!drip.Send(request.substr(sent, 1))) break;
    ++sent;
    if (served_meanwhile < 3) {
      // Other clients are served while the drip goes on.
      auto other = server_->Client().Post(std::string(kPurchasePath), "",
                                          ServerFixture::User("other" + std::to_string(sent)));
      EXPECT_EQ(other.status, 200) << other.body;
      EXPECT_EQ(Code(other.body), 1) << other.body;
      ++served_meanwhile;
    }
    drip.ReadFor(milliseconds(150));
  }
  drip.ReadUntilClosed(std::chrono::seconds(5));
  EXPECT_TRUE(drip.closed()) << "the slow client was not cut off";
  EXPECT_LT(sent, request.size()) << "the whole request got through";
  EXPECT_EQ(drip.received().find("HTTP/1.1 200"), std::string::npos) << drip.received();
  EXPECT_GE(served_meanwhile, 1);
  auto after = server_->Client().Get("/healthz");
  EXPECT_EQ(after.status, 200);
}

// Replies the socket does not take whole at once (the server writes what it takes and waits for
// the rest): 64 pipelined 89 KB replies, more than a socket's send buffer grows to (4 MB), to a
// reader that waits first, through a 4 KB receive buffer, arrive whole and in order, and the
// connection goes on serving.
TEST_F(BadInputTest, RepliesLargerThanTheSocketTakesReachASlowReaderWhole) {
  const HttpResult expected = server_->Client().Get("/api/v1/openapi.json");
  ASSERT_EQ(expected.status, 200);
  ASSERT_GT(expected.body.size(), 64u * 1024) << "the reply must outgrow the socket buffers";
  RawSocket slow(server_->port(), 4096);
  ASSERT_TRUE(slow.connected());
  constexpr size_t kReplies = 64;
  std::string requests;
  for (size_t i = 0; i < kReplies; ++i) {
    requests += "GET /api/v1/openapi.json HTTP/1.1\r\nHost: t\r\n\r\n";
  }
  ASSERT_TRUE(slow.Send(requests));
  std::this_thread::sleep_for(milliseconds(300));  // the server's writes fill the socket meanwhile
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  // The bodies' bytes first (parsing as they come would go over the whole of it every time).
  while (slow.received().size() < kReplies * expected.body.size() && !slow.closed() &&
         std::chrono::steady_clock::now() < until) {
    slow.ReadFor(milliseconds(50));
  }
  while (ParseReplies(slow.received()).size() < kReplies && !slow.closed() &&
         std::chrono::steady_clock::now() < until) {
    slow.ReadFor(milliseconds(50));
  }
  const std::vector<RawReply> replies = ParseReplies(slow.received());
  ASSERT_EQ(replies.size(), kReplies) << slow.received().size() << " bytes received";
  for (const RawReply& reply : replies) {
    EXPECT_EQ(reply.status, 200);
    EXPECT_TRUE(reply.body == expected.body) << "a body of " << reply.body.size() << " bytes";
  }
  const size_t before = slow.received().size();
  ASSERT_TRUE(slow.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_TRUE(slow.ReadUntil("{\"status\":\"ok\"}", std::chrono::seconds(5)))
      << slow.received().substr(before);
}

// One of each kind of bad input, all on one server with short timeouts; then it still sells (the
// fixture's TearDown checks the purchase and /metrics once more).
TEST_F(BadInputTest, AllOfItOnOneServerThenItStillSells) {
  ServerFixtureOptions options = Options();
  options.server.read_timeout = milliseconds(300);
  options.server.idle_timeout = milliseconds(300);
  ASSERT_NO_FATAL_FAILURE(Start(options));
  const std::string head =
      fmt::format("POST {} HTTP/1.1\r\nHost: t\r\nX-User-Id: u1\r\n", kPurchasePath);

  EXPECT_TRUE(IsClosingError(Raw("GARBAGE\r\n\r\n"), 400, "bad_request", "malformed"));
  EXPECT_TRUE(
      IsClosingError(Raw(head + "Content-Length: abc\r\n\r\n"), 400, "bad_request", "malformed"));
  EXPECT_TRUE(IsClosingError(Raw(head + "Transfer-Encoding: chunked\r\n\r\nZZ\r\n\r\n"), 400,
                             "bad_request", "malformed"));
  EXPECT_TRUE(
      IsClosingError(Raw(head + "X-Big: " + std::string(2 * kMaxHeaderBytes, 'a') + "\r\n\r\n"),
                     431, "headers_too_large", "too large"));
  EXPECT_TRUE(IsClosingError(Raw(head + "Content-Length: 100000\r\n\r\n"), 413, "payload_too_large",
                             "too large"));
  EXPECT_TRUE(IsClosingError(Raw(RawPurchase("u1", R"({"quantity":"two"})")), 400, "bad_request",
                             "field 'quantity'"));
  EXPECT_TRUE(IsClosingError(Raw(RawPurchase("a b", "")), 401, "unauthorized", "X-User-Id"));
  EXPECT_TRUE(IsClosingError(
      Raw("POST /api/v1/activities/b%21d/purchase HTTP/1.1\r\nHost: t\r\nX-User-Id: u1\r\n"
          "Connection: close\r\n\r\n"),
      400, "bad_request", "activity id"));
  EXPECT_TRUE(IsClosingError(Raw("BREW /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
                             405, "method_not_allowed", "GET"));
  EXPECT_TRUE(IsClosingError(Raw("GET /nope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"), 404,
                             "not_found", "no such route"));
  EXPECT_EQ(StatusCodes(Raw("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGARBAGE GARBAGE\r\n\r\n")),
            (std::vector<int>{200, 400}));

  // An idle connection and a slow one, both cut without an answer.
  RawSocket idle(server_->port());
  RawSocket slow(server_->port());
  ASSERT_TRUE(idle.connected());
  ASSERT_TRUE(slow.connected());
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
  for (size_t i = 0; i < request.size() && !slow.closed(); ++i) {
    if (!slow.Send(request.substr(i, 1))) break;
    slow.ReadFor(milliseconds(150));
  }
  slow.ReadUntilClosed(std::chrono::seconds(5));
  idle.ReadUntilClosed(std::chrono::seconds(5));
  EXPECT_TRUE(slow.closed());
  EXPECT_TRUE(idle.closed());
  EXPECT_EQ(slow.received().find("HTTP/1.1 200"), std::string::npos) << slow.received();
  EXPECT_EQ(idle.received(), "");
  EXPECT_EQ(Reserved(), 0);
}

}  // namespace
}  // namespace flashsale::server
