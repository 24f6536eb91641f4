#pragma once
// One HTTP/1.1 exchange with another service, over plain TCP or TLS: resolve, connect, the TLS
// handshake (the server's certificate checked against the system's CAs, or those SSL_CERT_FILE /
// SSL_CERT_DIR name, and it must name the host), one request, one answer, the connection closed.
// The connection and everything after it share one deadline. Used by the order events' webhooks
// (POST, service/event_relay.h) and the JWKS of the JWT identity (GET, service/jwt.h).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace flashsale::service {

// Where a request goes: "host", "port", the request target ("/path?query").
struct HttpTarget {
  bool tls = false;  // https
  std::string host;
  std::string port;
  std::string target = "/";
};

struct HttpRequest {
  boost::beast::http::verb method = boost::beast::http::verb::get;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host and Connection
  std::string body;                                          // sent with Content-Length when set
  std::chrono::milliseconds timeout{5000};                   // connect to the last byte read
  size_t max_answer_bytes = 64 * 1024;                       // a longer body is an error
};

struct HttpAnswer {
  unsigned status = 0;
  std::string body;
};

// A TLS client context that checks the peer (the system's CAs, SSL_CERT_FILE / SSL_CERT_DIR).
boost::asio::ssl::context MakeTlsClientContext();

// The exchange on the calling coroutine's executor. `tls` is used for an https target (required
// then). kUnavailable saying which step failed: "resolve", "connect", "TLS handshake", "send",
// "no answer within N ms", "answer".
boost::asio::awaitable<base::Result<HttpAnswer>> HttpExchange(const HttpTarget& target,
                                                              const HttpRequest& request,
                                                              boost::asio::ssl::context* tls);

}  // namespace flashsale::service
