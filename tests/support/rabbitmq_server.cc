#include "support/rabbitmq_server.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <fmt/format.h>
#include <sys/time.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support/flashsale_process.h"

namespace flashsale::testing {
namespace {

constexpr std::chrono::seconds kStartTimeout{60};
constexpr std::chrono::seconds kStopGrace{30};
// Debian's broker script; /usr/sbin/rabbitmq-server would switch to the rabbitmq user.
constexpr const char* kBroker = "/usr/lib/rabbitmq/bin/rabbitmq-server";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

// An AMQP login with every step bounded by 1 s: the broker is up and takes connections.
bool CanLogin(uint16_t port) {
  amqp_connection_state_t connection = amqp_new_connection();
  if (connection == nullptr) return false;
  bool ok = false;
  amqp_socket_t* socket = amqp_tcp_socket_new(connection);
  timeval timeout{1, 0};
  if (socket != nullptr &&
      amqp_socket_open_noblock(socket, "127.0.0.1", port, &timeout) == AMQP_STATUS_OK) {
    amqp_set_handshake_timeout(connection, &timeout);
    amqp_set_rpc_timeout(connection, &timeout);
    const std::string user(RabbitMqServer::kUser);
    const std::string password(RabbitMqServer::kPassword);
    const amqp_rpc_reply_t login =
        amqp_login(connection, "/", 0, AMQP_DEFAULT_FRAME_SIZE, 0, AMQP_SASL_METHOD_PLAIN,
                   user.c_str(), password.c_str());
    ok = login.reply_type == AMQP_RESPONSE_NORMAL;
    if (ok) amqp_connection_close(connection, AMQP_REPLY_SUCCESS);
  }
  amqp_destroy_connection(connection);
  return ok;
}

}  // namespace

RabbitMqServer::RabbitMqServer() {
  std::string templ =
      (std::filesystem::temp_directory_path() / "flashsale-rabbitmq-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = templ;
  std::random_device device;
  node_ = fmt::format("fs{:08x}@localhost", device());
  try {
    WriteFile(dir_ + "/enabled_plugins", "[].\n");
    // A port found free can be taken before the broker binds it; try a few times.
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = FreePort();
      dist_port_ = FreePort();
      epmd_port_ = FreePort();
      WriteFile(dir_ + "/rabbitmq.conf", fmt::format("listeners.tcp.default = 127.0.0.1:{}\n"
                                                     "default_user = {}\n"
                                                     "default_pass = {}\n"
                                                     "loopback_users = none\n"
                                                     "disk_free_limit.absolute = 10MB\n",
                                                     port_, kUser, kPassword));
      Spawn();
      if (WaitReady(kStartTimeout)) return;
      Stop();
    }
    throw std::runtime_error("rabbitmq-server did not start; its log:\n" + LogTail());
  } catch (...) {
    // The destructor does not run for a constructor that throws.
    if (process_) process_->Terminate(kStopGrace);
    if (epmd_) epmd_->Terminate(std::chrono::seconds(5));
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

RabbitMqServer::~RabbitMqServer() {
  Stop();
  if (epmd_) epmd_->Terminate(std::chrono::seconds(5));
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string RabbitMqServer::url() const {
  // kPassword's ':' percent-encoded.
  return fmt::format("amqp://{}:rabbit%3Apw@127.0.0.1:{}", kUser, port_);
}

void RabbitMqServer::Spawn() {
  // epmd first, on a port of this broker's own: the broker's Erlang VM finds it there (and
  // starts no daemon of its own, which would outlive the test).
  if (!epmd_) {
    auto epmd = base::Subprocess::Spawn(
        {"epmd", "-port", std::to_string(epmd_port_), "-address", "127.0.0.1"}, dir_ + "/epmd.log",
        {}, SIGTERM);
    if (!epmd.ok()) throw std::runtime_error("starting epmd failed: " + epmd.error().message);
    epmd_.emplace(std::move(epmd).value());
  }
  // `env` execs the broker's script, so the PID is the script's: SIGTERM to it stops the broker
  // cleanly (the script forwards it to the Erlang VM and waits).
  const std::vector<std::string> args = {
      "env",
      "HOME=" + dir_,  // the Erlang cookie
      "ERL_EPMD_PORT=" + std::to_string(epmd_port_),
      "RABBITMQ_NODENAME=" + node_,
      "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
      "RABBITMQ_NODE_PORT=" + std::to_string(port_),
      "RABBITMQ_DIST_PORT=" + std::to_string(dist_port_),
      "RABBITMQ_MNESIA_BASE=" + dir_ + "/mnesia",
      "RABBITMQ_LOG_BASE=" + dir_ + "/log",
      "RABBITMQ_CONFIG_FILE=" + dir_ + "/rabbitmq.conf",
      "RABBITMQ_ADVANCED_CONFIG_FILE=" + dir_ + "/advanced.config",
      "RABBITMQ_CONF_ENV_FILE=" + dir_ + "/rabbitmq-env.conf",
      "RABBITMQ_ENABLED_PLUGINS_FILE=" + dir_ + "/enabled_plugins",
      "RABBITMQ_PLUGINS_EXPAND_DIR=" + dir_ + "/plugins-expand",
      "RABBITMQ_PID_FILE=" + dir_ + "/rabbitmq.pid",
      kBroker};
  auto process = base::Subprocess::Spawn(args, dir_ + "/rabbitmq.out", {}, SIGTERM);
  if (!process.ok()) {
    throw std::runtime_error(
        "cannot run rabbitmq-server: is it installed? (scripts/install-deps.sh): " +
        process.error().message);
  }
  process_.emplace(std::move(process).value());
}

bool RabbitMqServer::WaitReady(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (!process_ || !process_->Running()) return false;  // exited
    if (CanLogin(port_)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

std::string RabbitMqServer::LogTail() const {
  std::string log = ReadFile(dir_ + "/rabbitmq.out");
  std::error_code missing;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/log", missing)) {
    log += ReadFile(entry.path().string());
  }
  return log.size() > 4000 ? log.substr(log.size() - 4000) : log;
}

void RabbitMqServer::Stop() {
  if (process_) {
    process_->Terminate(kStopGrace);  // SIGTERM, then SIGKILL
    process_.reset();
  }
}

void RabbitMqServer::Start() {
  if (process_) throw std::logic_error("rabbitmq-server is already running");
  Spawn();
  if (!WaitReady(kStartTimeout)) {
    throw std::runtime_error("rabbitmq-server did not restart; its log:\n" + LogTail());
  }
}

}  // namespace flashsale::testing
