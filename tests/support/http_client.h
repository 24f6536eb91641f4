#pragma once
// A blocking HTTP/1.1 client for tests (Boost.Beast over a real loopback socket), with a timeout
// on every call, and a raw-bytes sender for malformed requests.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashsale::testing {

struct HttpResult {
  int status = 0;  // 0: no response (connection closed or timed out)
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string error;                           // why there is no response
};

class HttpClient {
 public:
  HttpClient(std::string host, uint16_t port);
  ~HttpClient();

  // One request on the client's keep-alive connection (opened on first use, reopened if the
  // server closed it).
  HttpResult Request(std::string_view method, std::string_view target, std::string_view body = {},
                     const std::map<std::string, std::string>& headers = {},
                     std::chrono::milliseconds timeout = std::chrono::seconds(10));
  HttpResult Get(std::string_view target, const std::map<std::string, std::string>& headers = {}) {
    return Request("GET", target, {}, headers);
  }
  HttpResult Post(std::string_view target, std::string_view body,
                  const std::map<std::string, std::string>& headers = {}) {
    return Request("POST", target, body, headers);
  }

 private:
  struct Impl;
  Impl* impl_;
};

// When the environment variable FLASHSALE_API_RECORD names a file, every reply HttpClient receives
// is appended to it as one JSON line {method, target, status, content_type, body}: the API test
// (tests/api/validate.mjs) checks each against api/openapi.json.
inline constexpr const char* kApiRecordEnv = "FLASHSALE_API_RECORD";
void RecordExchange(std::string_view method, std::string_view target, const HttpResult& result);

// Sends `bytes` on a fresh connection and reads until the server closes it or `timeout` passes;
// returns everything read.
std::string SendRaw(uint16_t port, std::string_view bytes,
                    std::chrono::milliseconds timeout = std::chrono::seconds(5));

// The status code of every HTTP response in `raw` (several when pipelined).
std::vector<int> StatusCodes(std::string_view raw);

}  // namespace flashsale::testing
