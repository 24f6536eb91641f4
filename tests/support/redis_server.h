#pragma once
// A real redis-server for tests and benchmarks: started as a child process in a private temporary
// directory, on a free loopback port and a unix socket, and stopped (by its PID) at the end.

#include <hiredis/hiredis.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/subprocess.h"

namespace flashsale::testing {

struct RedisServerOptions {
  bool appendonly = false;
  std::string appendfsync = "everysec";  // "always" makes every acknowledged write survive SIGKILL
  std::string requirepass;
  std::vector<std::string> extra_args;  // e.g. {"--maxmemory", "1mb"}
};

struct FreeReply {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using SyncReply = std::unique_ptr<redisReply, FreeReply>;

// A stream entry's fields by name (`entry` an XRANGE element: {id, {name, value, ...}}), a packed
// order intent as its named fields (keyspace::AddEntryField): what the order consumer reads.
std::map<std::string, std::string> EntryFields(const redisReply* entry);
// The order intents of an XRANGE reply, oldest first, each as EntryFields gives it: an entry of a
// reserve call's batch (an `o` field per intent) gives one per intent.
std::vector<std::map<std::string, std::string>> StreamIntents(const redisReply* range);

class RedisServer {
 public:
  explicit RedisServer(RedisServerOptions options = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  uint16_t port() const { return port_; }
  const std::string& dir() const { return dir_; }
  const std::string& socket_path() const { return socket_path_; }
  std::string tcp_url() const;                                   // redis://127.0.0.1:<port>
  std::string unix_url() const;                                  // unix://<dir>/redis.sock
  pid_t pid() const { return process_ ? process_->pid() : -1; }  // -1 while stopped

  // SIGKILL and reap: the server dies without saving, as in a crash.
  void Kill();
  // Starts the server again on the same port, socket and directory (it replays its AOF).
  void Start();
  // SIGTERM and reap.
  void Stop();
  // SIGSTOP / SIGCONT: a server that accepts bytes and answers nothing.
  void Pause();
  void Resume();

  // A synchronous command on a fresh connection (hiredis, blocking, 10 s timeout); throws on a
  // connection error. For test setup and checks.
  SyncReply Command(std::initializer_list<std::string_view> args) const;
  SyncReply Command(const std::vector<std::string>& args) const;
  int64_t Integer(std::initializer_list<std::string_view> args) const;
  std::string String(std::initializer_list<std::string_view> args) const;
  // The sum of a hash's values (e.g. the units an activity's buyers hold: the reserve script
  // keeps no separate counter of units reserved).
  int64_t SumOfHash(std::string_view key) const;

 private:
  void Spawn();
  bool WaitReady(std::chrono::milliseconds timeout);

  RedisServerOptions options_;
  std::string dir_;
  std::string socket_path_;
  uint16_t port_ = 0;
  std::optional<base::Subprocess> process_;  // empty while stopped
};

// A key namespace no other test shares: "t" + 12 random hex digits.
std::string UniqueNamespace();

}  // namespace flashsale::testing
