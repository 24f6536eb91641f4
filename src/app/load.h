#pragma once
// `flashsale load`: drives a sale at a running flashsale (src/load), prints the report and, when
// it can reach the sale's Redis and database, verifies the sale afterwards.

#include <memory>
#include <string>

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's name
class App;
}  // namespace CLI

namespace flashsale::app {

struct LoadFlags;  // load.cc

// The flags of `flashsale load`, registered on `command`, which must outlive this object.
class LoadCommand {
 public:
  explicit LoadCommand(CLI::App& command);
  ~LoadCommand();
  LoadCommand(const LoadCommand&) = delete;
  LoadCommand& operator=(const LoadCommand&) = delete;
  // After parsing: runs the load. The process exit code: 0 the run completed (and verified, when
  // verifying); 1 verification failed or could not be done, or nothing was answered; 2 bad
  // settings.
  int Run() const;

 private:
  std::unique_ptr<LoadFlags> flags_;  // CLI11 writes into it while parsing
};

}  // namespace flashsale::app
