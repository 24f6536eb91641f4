#include "support/redis_server.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "keyspace/order_stream.h"

namespace flashsale::testing {
namespace {

uint16_t FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("could not find a free loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string UniqueNamespace() {
  std::random_device device;
  return fmt::format("t{:06x}{:06x}", device() & 0xFFFFFF, device() & 0xFFFFFF);
}

RedisServer::RedisServer(RedisServerOptions options) : options_(std::move(options)) {
  std::string templ = (std::filesystem::temp_directory_path() / "flashsale-redis-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = templ;
  socket_path_ = dir_ + "/redis.sock";
  try {
    // A port found free can be taken before redis binds it; try a few.
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = FreeLoopbackPort();
      Spawn();
      if (WaitReady(std::chrono::seconds(10))) return;
      Kill();
    }
    throw std::runtime_error("redis-server did not start; its log:\n" +
                             ReadFile(dir_ + "/redis.log"));
  } catch (...) {
    // The destructor does not run for a constructor that throws.
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

RedisServer::~RedisServer() {
  Stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string RedisServer::tcp_url() const { return fmt::format("redis://127.0.0.1:{}", port_); }
std::string RedisServer::unix_url() const { return "unix://" + socket_path_; }

void RedisServer::Spawn() {
  std::vector<std::string> args = {"redis-server",
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--unixsocket",
                                   socket_path_,
                                   "--unixsocketperm",
                                   "700",
                                   "--dir",
                                   dir_,
                                   "--logfile",
                                   dir_ + "/redis.log",
                                   "--save",
                                   "",
                                   "--daemonize",
                                   "no",
                                   "--appendonly",
                                   options_.appendonly ? "yes" : "no",
                                   "--appendfsync",
                                   options_.appendfsync};
  if (!options_.requirepass.empty()) {
    args.insert(args.end(), {"--requirepass", options_.requirepass});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  // stdout and stderr go to redis.log too: what stops redis before it opens its log (a bad
  // option) is then where the error messages below look.
  auto process = base::Subprocess::Spawn(args, dir_ + "/redis.log");
  if (!process.ok()) {
    if (process.error().code == base::ErrorCode::kNotFound) {
      throw std::runtime_error(
          "cannot run redis-server: is it installed? (scripts/install-deps.sh): " +
          process.error().message);
    }
    throw std::runtime_error("starting redis-server failed: " + process.error().message);
  }
  process_.emplace(std::move(process).value());
}

bool RedisServer::WaitReady(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (!process_ || !process_->Running()) return false;  // exited
    timeval tv{0, 200000};
    redisContext* context = redisConnectUnixWithTimeout(socket_path_.c_str(), tv);
    if (context != nullptr && context->err == 0) {
      if (!options_.requirepass.empty()) {
        freeReplyObject(redisCommand(context, "AUTH %s", options_.requirepass.c_str()));
      }
      auto* reply = static_cast<redisReply*>(redisCommand(context, "PING"));
      const bool ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
      if (reply != nullptr) freeReplyObject(reply);
      redisFree(context);
      if (ok) return true;
    } else if (context != nullptr) {
      redisFree(context);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void RedisServer::Kill() {
  if (!process_) return;
  process_->Signal(SIGKILL);  // works on a stopped process too
  process_->Wait(std::chrono::seconds(10));
  process_.reset();  // Terminates (and reaps) if the wait above gave up
}

void RedisServer::Start() {
  if (process_) throw std::logic_error("redis-server is already running");
  Spawn();
  if (!WaitReady(std::chrono::seconds(20))) {
    throw std::runtime_error("redis-server did not restart; its log:\n" +
                             ReadFile(dir_ + "/redis.log"));
  }
}

void RedisServer::Stop() {
  if (!process_) return;
  process_->Terminate(std::chrono::seconds(10));  // SIGTERM + SIGCONT, then SIGKILL
  process_.reset();
}

void RedisServer::Pause() {
  if (process_) process_->Signal(SIGSTOP);
}
void RedisServer::Resume() {
  if (process_) process_->Signal(SIGCONT);
}

SyncReply RedisServer::Command(const std::vector<std::string>& args) const {
  timeval tv{10, 0};
  redisContext* context = redisConnectUnixWithTimeout(socket_path_.c_str(), tv);
  if (context == nullptr || context->err != 0) {
    std::string error = context != nullptr ? context->errstr : "out of memory";
    if (context != nullptr) redisFree(context);
    throw std::runtime_error("test redis connect failed: " + error);
  }
  redisSetTimeout(context, tv);
  if (!options_.requirepass.empty()) {
    freeReplyObject(redisCommand(context, "AUTH %s", options_.requirepass.c_str()));
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lens.push_back(arg.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(context, static_cast<int>(args.size()), argv.data(), lens.data()));
  std::string error = context->errstr;
  redisFree(context);
  if (reply == nullptr) throw std::runtime_error("test redis command failed: " + error);
  return SyncReply(reply);
}

SyncReply RedisServer::Command(std::initializer_list<std::string_view> args) const {
  std::vector<std::string> copy(args.begin(), args.end());
  return Command(copy);
}

int64_t RedisServer::Integer(std::initializer_list<std::string_view> args) const {
  auto reply = Command(args);
  if (reply->type == REDIS_REPLY_INTEGER) return reply->integer;
  if (reply->type == REDIS_REPLY_STRING) return std::stoll(std::string(reply->str, reply->len));
  throw std::runtime_error("expected an integer reply");
}

int64_t RedisServer::SumOfHash(std::string_view key) const {
  auto reply = Command({"HVALS", key});
  int64_t sum = 0;
  for (size_t i = 0; i < reply->elements; ++i) {
    sum += std::stoll(std::string(reply->element[i]->str, reply->element[i]->len));
  }
  return sum;
}

std::string RedisServer::String(std::initializer_list<std::string_view> args) const {
  auto reply = Command(args);
  if (reply->str == nullptr) return {};
  return std::string(reply->str, reply->len);
}

std::vector<std::map<std::string, std::string>> StreamIntents(const redisReply* range) {
  std::vector<std::map<std::string, std::string>> out;
  for (size_t e = 0; e < range->elements; ++e) {
    const redisReply* raw = range->element[e]->element[1];
    std::vector<std::pair<std::string, std::string>> named;  // fields other than `o`
    bool packed = false;
    for (size_t i = 0; i + 1 < raw->elements; i += 2) {
      const std::string_view name(raw->element[i]->str, raw->element[i]->len);
      const std::string_view value(raw->element[i + 1]->str, raw->element[i + 1]->len);
      if (name != keyspace::kPackedIntentField) {
        named.emplace_back(name, value);
        continue;
      }
      packed = true;
      std::vector<std::pair<std::string, std::string>> fields;
      keyspace::AddEntryField(name, value, fields);
      out.emplace_back(fields.begin(), fields.end());
    }
    if (!packed) out.emplace_back(named.begin(), named.end());
  }
  return out;
}

std::map<std::string, std::string> EntryFields(const redisReply* entry) {
  std::vector<std::pair<std::string, std::string>> fields;
  const redisReply* raw = entry->element[1];
  for (size_t i = 0; i + 1 < raw->elements; i += 2) {
    keyspace::AddEntryField(std::string_view(raw->element[i]->str, raw->element[i]->len),
                            std::string_view(raw->element[i + 1]->str, raw->element[i + 1]->len),
                            fields);
  }
  return std::map<std::string, std::string>(fields.begin(), fields.end());
}

}  // namespace flashsale::testing
