#include "service/http_client.h"

#include <openssl/ssl.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace flashsale::service {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// The request written and the answer read on a connected (and, for TLS, handshaken) stream.
template <typename Stream>
asio::awaitable<Result<HttpAnswer>> SendAndRead(Stream& stream, const HttpTarget& target,
                                                const HttpRequest& spec) {
  http::request<http::string_body> request{spec.method, target.target, 11};
  const bool default_port = target.port == (target.tls ? "443" : "80");
  request.set(http::field::host, default_port ? target.host : target.host + ":" + target.port);
  request.set(http::field::connection, "close");
  for (const auto& [name, value] : spec.headers) request.set(name, value);
  if (!spec.body.empty() || spec.method == http::verb::post) {
    request.body() = spec.body;
    request.prepare_payload();
  }
  auto [write_ec, written] = co_await http::async_write(stream, request, kTuple);
  if (write_ec) co_return MakeError(ErrorCode::kUnavailable, "send: {}", write_ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(spec.max_answer_bytes);
  auto [read_ec, read] = co_await http::async_read(stream, buffer, parser, kTuple);
  if (read_ec == beast::error::timeout) {
    co_return MakeError(ErrorCode::kUnavailable, "no answer within {} ms", spec.timeout.count());
  }
  if (read_ec) co_return MakeError(ErrorCode::kUnavailable, "answer: {}", read_ec.message());
  co_return HttpAnswer{parser.get().result_int(), std::move(parser.get().body())};
}

}  // namespace

asio::ssl::context MakeTlsClientContext() {
  asio::ssl::context tls(asio::ssl::context::tls_client);
  tls.set_default_verify_paths();
  tls.set_verify_mode(asio::ssl::verify_peer);
  return tls;
}

asio::awaitable<Result<HttpAnswer>> HttpExchange(const HttpTarget& target,
                                                 const HttpRequest& request,
                                                 asio::ssl::context* tls) {
  auto executor = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(executor);
  auto [resolve_ec, endpoints] = co_await resolver.async_resolve(target.host, target.port, kTuple);
  if (resolve_ec) co_return MakeError(ErrorCode::kUnavailable, "resolve: {}", resolve_ec.message());
  if (!target.tls) {
    beast::tcp_stream stream(executor);
    stream.expires_after(request.timeout);
    auto [connect_ec, endpoint] = co_await stream.async_connect(endpoints, kTuple);
    if (connect_ec) {
      co_return MakeError(ErrorCode::kUnavailable, "connect: {}", connect_ec.message());
    }
    auto answer = co_await SendAndRead(stream, target, request);
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    co_return answer;
  }
  if (tls == nullptr)
    co_return MakeError(ErrorCode::kInvalidArgument, "https without a TLS context");
  beast::ssl_stream<beast::tcp_stream> stream(executor, *tls);
  beast::get_lowest_layer(stream).expires_after(request.timeout);
  auto [connect_ec, endpoint] =
      co_await beast::get_lowest_layer(stream).async_connect(endpoints, kTuple);
  if (connect_ec) co_return MakeError(ErrorCode::kUnavailable, "connect: {}", connect_ec.message());
  // SNI, and the certificate must name the host.
  if (!SSL_set_tlsext_host_name(stream.native_handle(), target.host.c_str())) {
    co_return MakeError(ErrorCode::kUnavailable, "TLS: cannot set the server name");
  }
  stream.set_verify_callback(asio::ssl::host_name_verification(target.host));
  auto [handshake_ec] = co_await stream.async_handshake(asio::ssl::stream_base::client, kTuple);
  if (handshake_ec) {
    co_return MakeError(ErrorCode::kUnavailable, "TLS handshake: {}", handshake_ec.message());
  }
  co_return co_await SendAndRead(stream, target, request);
}

}  // namespace flashsale::service
