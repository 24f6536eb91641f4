#pragma once
// A real RabbitMQ broker for tests: rabbitmq-server (Debian's) as a child process in a private
// temporary directory (its Mnesia database, logs, config and Erlang cookie there), on a free
// loopback AMQP port, with a node name, distribution port and Erlang port mapper (epmd, started
// here on a free port as a child of its own) that no other broker shares; no plugins. Both are
// stopped by their PIDs and the directory removed at the end.
//
// Starting takes a few seconds (the Erlang VM boots): a test binary shares one broker, and each
// test uses exchanges and queues of its own names.
//
// The account is kUser/kPassword (rabbitmq.conf's default_user), allowed from loopback.
// Readiness is an AMQP login (librabbitmq, each step with a timeout), so a test binary that uses
// this class links librabbitmq (flashsale_testing does).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/subprocess.h"

namespace flashsale::testing {

class RabbitMqServer {
 public:
  static constexpr std::string_view kUser = "flashsale";
  static constexpr std::string_view kPassword = "rabbit:pw";  // ':' is percent-encoded in url()

  // Starts epmd and the broker and waits (up to 60 s) until an AMQP login succeeds; throws
  // std::runtime_error with the tail of its log if it cannot.
  RabbitMqServer();
  // Stops the broker (SIGTERM: a clean shutdown, then SIGKILL) and epmd, removes the directory.
  ~RabbitMqServer();
  RabbitMqServer(const RabbitMqServer&) = delete;
  RabbitMqServer& operator=(const RabbitMqServer&) = delete;

  uint16_t port() const { return port_; }
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return process_ ? process_->pid() : -1; }  // -1 while stopped
  // amqp://flashsale:rabbit%3Apw@127.0.0.1:<port> (no path: the default vhost "/").
  std::string url() const;

  // A clean shutdown (persistent messages in durable queues survive it), and a start again on
  // the same port, node and data (waits for the login as the constructor does).
  void Stop();
  void Start();

 private:
  void Spawn();
  bool WaitReady(std::chrono::milliseconds timeout);
  std::string LogTail() const;

  std::string dir_;
  std::string node_;
  uint16_t port_ = 0;
  uint16_t dist_port_ = 0;
  uint16_t epmd_port_ = 0;
  std::optional<base::Subprocess> epmd_;
  std::optional<base::Subprocess> process_;  // empty while stopped
};

}  // namespace flashsale::testing
