#include "app/admin_client.h"

// clang-format off
#include <ostream>  // Boost 1.81's core/string_view.hpp uses std::ostream without including it
#include <boost/asio/io_context.hpp>
// clang-format on
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/url/parse.hpp>

#include "base/redact.h"

namespace flashsale::app {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using base::ErrorCode;
using base::MakeError;

base::Result<HttpAnswer> CallAdmin(std::string_view base_url, std::string_view method,
                                   std::string_view target, std::string_view admin_token,
                                   std::string_view body, std::chrono::milliseconds timeout) {
  auto url = boost::urls::parse_uri(base_url);
  if (!url || url->scheme() != "http" || url->host().empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "'{}' is not a URL of the form http://host:port",
                     base::RedactUrl(base_url));
  }
  const std::string host = url->host_address();
  const std::string port = url->has_port() ? std::string(url->port()) : "80";
  asio::io_context io;
  beast::tcp_stream stream(io);
  boost::system::error_code error;
  asio::ip::tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(host, port, error);
  if (!error) {
    stream.expires_after(timeout);
    stream.connect(endpoints, error);
  }
  if (error) {
    return MakeError(ErrorCode::kUnavailable, "cannot reach flashsale at {}: {}",
                     base::RedactUrl(base_url), error.message());
  }
  http::request<http::string_body> request{http::string_to_verb(method), std::string(target), 11};
  request.set(http::field::host, host);
  if (!admin_token.empty()) {
    request.set(http::field::authorization, "Bearer " + std::string(admin_token));
  }
  request.set(http::field::content_type, "application/json");
  request.body() = std::string(body);
  request.prepare_payload();
  stream.expires_after(timeout);
  http::write(stream, request, error);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  if (!error) http::read(stream, buffer, response, error);
  if (error) {
    return MakeError(ErrorCode::kUnavailable, "{} {} at {}: {}", method, target,
                     base::RedactUrl(base_url), error.message());
  }
  HttpAnswer answer{static_cast<int>(response.result_int()), std::move(response.body()), {}};
  if (auto next = response.find("X-Next-Cursor"); next != response.end()) {
    answer.next_cursor = std::string(next->value());
  }
  return answer;
}

}  // namespace flashsale::app
