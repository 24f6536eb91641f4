#pragma once
// Where a Redis server is and how to log in, parsed from a URL:
//   redis://[[user]:password@]host[:port][/db]          TCP, port 6379 by default
//   unix:///path/to/redis.sock[?db=N&user=U&password=P] a unix socket
//   redis+cluster://[[user]:password@]host:port[,host:port...]  a Redis Cluster: the seed nodes
//                                                       (the slot map is loaded from them)

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace flashsale::redis {

struct Endpoint {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;  // kTcp
  uint16_t port = 6379;
  std::string path;  // kUnix
  std::string username;
  std::string password;
  int db = 0;
  // redis+cluster://: host and port are the first seed; every seed is here (kTcp, db 0).
  bool cluster = false;
  std::vector<std::pair<std::string, uint16_t>> seeds;

  // The URL without the password, for logs and error messages.
  std::string Describe() const;
};

base::Result<Endpoint> ParseUrl(std::string_view url);

}  // namespace flashsale::redis
