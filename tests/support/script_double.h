#pragma once
// A script evaluator that answers in process, for unit tests of the code above the script
// bindings (the purchase and draw use cases): no Redis. The test scripts each call's answer as
// the RESP bytes Redis would send (Resp below); the bytes are parsed by the project's own reply
// reader (redis::CreatePooledReader), so the bindings read them with their real checks
// (ScriptReply::Read against the script's RETURNS) and refuse a reply of the wrong shape as they
// would refuse Redis's. Each call is recorded (script name, keys, arguments) for assertions.
//
// An answer is scripted per script name, taken in order (Then), or the same for every call
// (Always); a call with no answer left completes with kInternal naming the script. A call whose
// keys or arguments do not match its script's declaration completes with kInternal before
// anything is recorded, as ScriptRunner refuses it before sending. Handlers are posted to the
// executor, never run inside Eval. Single-threaded: use it on its executor's thread.

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "redis/scripts.h"

namespace flashsale::testing {

// RESP values, as Redis writes them.
namespace resp {
std::string Int(int64_t value);
std::string Bulk(std::string_view value);
std::string Nil();
std::string Error(std::string_view message);  // "-message\r\n"
std::string Array(std::initializer_list<std::string> elements);
std::string Array(const std::vector<std::string>& elements);
}  // namespace resp

// One script call as it arrived.
struct ScriptCallRecord {
  std::string script;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

class InProcessScripts final : public redis::ScriptEvaluator {
 public:
  // RESP bytes for the reply, or an error for the call itself (kUnknownOutcome: sent, no reply;
  // kUnavailable: not run).
  using Answer = base::Result<std::string>;
  using Responder = std::function<Answer(const ScriptCallRecord&)>;

  // Answers on `executor`; the default deadline is 5 s away (it plays no part: nothing waits).
  InProcessScripts(boost::asio::any_io_executor executor, const redis::ScriptSet& scripts);

  // The next call of `script` (after those already queued) is answered with `answer`.
  InProcessScripts& Then(std::string_view script, Answer answer);
  // Every call of `script` with no queued answer is answered by `responder`.
  InProcessScripts& Always(std::string_view script, Responder responder);

  const std::vector<ScriptCallRecord>& calls() const { return calls_; }
  // The calls of one script, in order.
  std::vector<ScriptCallRecord> CallsOf(std::string_view script) const;

  void Eval(const redis::ScriptCall& call, redis::Deadline deadline,
            redis::ReplyHandler handler) override;
  const redis::ScriptSet& scripts() const override { return scripts_; }

 private:
  base::Result<redis::Reply> Respond(const ScriptCallRecord& record);

  const redis::ScriptSet& scripts_;
  std::map<std::string, std::deque<Answer>, std::less<>> queued_;
  std::map<std::string, Responder, std::less<>> always_;
  std::vector<ScriptCallRecord> calls_;
};

}  // namespace flashsale::testing
