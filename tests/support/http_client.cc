#include "support/http_client.h"

#include <fmt/format.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <mutex>

namespace flashsale::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

struct HttpClient::Impl {
  std::string host;
  uint16_t port;
  asio::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
};

HttpClient::HttpClient(std::string host, uint16_t port) : impl_(new Impl{std::move(host), port}) {}
HttpClient::~HttpClient() { delete impl_; }

namespace {

// A JSON string literal of `text` (bytes >= 0x80 are passed through: the bodies are UTF-8).
std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace

void RecordExchange(std::string_view method, std::string_view target, const HttpResult& result) {
  static std::mutex mutex;
  const char* path = std::getenv(kApiRecordEnv);  // NOLINT(concurrency-mt-unsafe): never set
  if (path == nullptr || *path == '\0') return;
  const auto type = result.headers.find("content-type");
  const std::string line = fmt::format(
      "{{\"method\":{},\"target\":{},\"status\":{},\"content_type\":{},\"body\":{}}}\n",
      JsonString(method), JsonString(target), result.status,
      JsonString(type == result.headers.end() ? "" : type->second), JsonString(result.body));
  std::lock_guard lock(mutex);
  std::ofstream(path, std::ios::app) << line;
}

HttpResult HttpClient::Request(std::string_view method, std::string_view target,
                               std::string_view body,
                               const std::map<std::string, std::string>& headers,
                               std::chrono::milliseconds timeout) {
  HttpResult result;
  for (int attempt = 0; attempt < 2; ++attempt) {
    boost::system::error_code error;
    if (!impl_->stream) {
      impl_->stream.emplace(impl_->io);
      impl_->buffer.clear();
      impl_->stream->expires_after(timeout);
      impl_->stream->connect(
          tcp::endpoint(
              asio::ip::make_address(impl_->host == "localhost" ? "127.0.0.1" : impl_->host),
              impl_->port),
          error);
      if (error) {
        impl_->stream.reset();
        result.error = "connect: " + error.message();
        return result;
      }
    }
    http::request<http::string_body> request{http::string_to_verb(method), std::string(target), 11};
    request.set(http::field::host, impl_->host);
    for (const auto& [name, value] : headers) request.set(name, value);
    request.body() = std::string(body);
    if (!body.empty() || method == "POST" || method == "PATCH") request.prepare_payload();
    impl_->stream->expires_after(timeout);
    http::write(*impl_->stream, request, error);
    http::response<http::string_body> response;
    if (!error) http::read(*impl_->stream, impl_->buffer, response, error);
    if (error) {
      impl_->stream.reset();
      result.error = error.message();
      // A keep-alive connection the server closed meanwhile: try once on a new one.
      if (attempt == 0 && (error == http::error::end_of_stream || error == asio::error::eof ||
                           error == asio::error::connection_reset)) {
        continue;
      }
      return result;
    }
    result.status = response.result_int();
    result.body = response.body();
    for (const auto& field : response) {
      std::string name(field.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      result.headers[name] = std::string(field.value());
    }
    if (!response.keep_alive()) impl_->stream.reset();
    RecordExchange(method, target, result);
    return result;
  }
  return result;
}

std::string SendRaw(uint16_t port, std::string_view bytes, std::chrono::milliseconds timeout) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  boost::system::error_code error;
  stream.expires_after(timeout);
  stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), error);
  if (error) return "connect failed: " + error.message();
  stream.expires_after(timeout);
  asio::write(stream, asio::buffer(bytes.data(), bytes.size()), error);
  std::string out;
  char chunk[4096];
  for (;;) {
    stream.expires_after(timeout);
    const size_t n = stream.read_some(asio::buffer(chunk), error);
    out.append(chunk, n);
    if (error) break;
  }
  return out;
}

std::vector<int> StatusCodes(std::string_view raw) {
  std::vector<int> codes;
  for (size_t pos = raw.find("HTTP/1."); pos != std::string_view::npos;
       pos = raw.find("HTTP/1.", pos + 1)) {
    if (pos + 12 <= raw.size() && raw[pos + 8] == ' ') {
      codes.push_back(std::atoi(std::string(raw.substr(pos + 9, 3)).c_str()));
    }
  }
  return codes;
}

}  // namespace flashsale::testing
