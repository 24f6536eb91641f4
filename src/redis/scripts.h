#pragma once
// The script registry and the script runner.
//
// Scripts are Lua files under src/keyspace/lua, embedded at build time. Each opens with a `#!lua`
// shebang (Redis 7 script flags: a script that writes is refused under maxmemory before it runs,
// never aborted half-way) and declares its interface in comment lines:
//   -- KEYS: meta stock items
//   -- ARGV: order_id user_id quantity now_ms
//   -- RETURNS: {code:int remaining:int order_id:str item:str...}
// A binding builds a call with ScriptCall, naming each key and argument as it adds it; Build()
// checks the names, in order, against that declaration, so a swapped KEYS or ARGV order (S0-4) is
// an error before anything is sent instead of a silently wrong sale.
//
// RETURNS states the reply's shape, and the binding reads the reply through ScriptReply
// (redis/script_reply.h), by the names declared here; a reply of another shape is a kProtocol
// error, never a misread field. Several RETURNS lines are read as one, joined by a space. Grammar:
//   returns := field                       a single value (not an array)
//            | '{' field* [tail | rest] '}' an array: fixed elements, then optionally
//   tail    := '[' field+ ']'              elements that come all together or not at all (the
//                                          reply ends before them, e.g. `{code:int [quantity:int]}`
//                                          answers {-1} or {1, 3})
//   rest    := field '...'                 the remaining elements, zero or more, each this field
//            | '(' field+ ')' '...'        the remaining elements, in repeated groups (a flat
//                                          key/value list: `{(order_id:str record:str)...}`)
//   field   := name ':' type ['|nil']      name: [a-z_][a-z0-9_]*, unique in the declaration;
//   type    := 'int' | 'str' | 'int|str'   int: an integer reply (a Lua number); str: a bulk
//                                          string (a Lua string); int|str: either (read by an
//                                          IntField and a StrField of the same name); |nil: or
//                                          nil (Lua false)
// Examples: `restored:int`, `entry_id:str|nil`, `{allowed:int retry_after_ms:int}`.
//
// ScriptRunner sends EVALSHA. A NOSCRIPT reply (Redis restarted, failed over, SCRIPT FLUSH) means
// the script did not run, so it is the one failure that is retried: SCRIPT LOAD, then EVALSHA
// again on the same connection, invisibly to the caller. When many calls are in flight in one
// pipeline and all get NOSCRIPT, one SCRIPT LOAD is sent and the others only resend EVALSHA
// behind it (wire order is execution order on one connection).

#include <array>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "redis/command.h"
#include "redis/connection.h"
#include "redis/script_reply.h"

namespace flashsale::redis {

struct Script {
  size_t index = 0;  // position in its ScriptSet
  std::string name;
  std::string source;
  std::string sha1;                    // hex, as SCRIPT LOAD returns it
  std::vector<std::string> key_names;  // a last name ending in "..." takes the rest
  std::vector<std::string> arg_names;  // likewise
  ReplyDecl returns;                   // what it returns (RETURNS)
  std::string load_wire;               // SCRIPT LOAD <source>, formatted once
};

class ScriptSet {
 public:
  // Parses scripts from (name, source) pairs; an error names the script and what is wrong.
  static base::Result<ScriptSet> Parse(
      std::span<const std::pair<std::string, std::string>> sources);

  const Script* Find(std::string_view name) const;
  const Script& Get(std::string_view name) const;  // throws std::out_of_range if absent
  std::span<const Script> scripts() const { return scripts_; }

 private:
  std::vector<Script> scripts_;
};

// Collects the KEYS and ARGV of one EVALSHA, each under the name the script declares.
class ScriptCall {
 public:
  explicit ScriptCall(const Script& script);
  // Its argument views point into the call itself (integer arguments): never copied nor moved.
  ScriptCall(const ScriptCall&) = delete;
  ScriptCall& operator=(const ScriptCall&) = delete;

  ScriptCall& Key(std::string_view name, std::string_view key);
  // The trailing variadic keys (declared as `name...`).
  ScriptCall& RestKeys(std::string_view name, std::span<const std::string> keys);
  ScriptCall& Arg(std::string_view name, std::string_view value);
  ScriptCall& Arg(std::string_view name, int64_t value);
  // The trailing variadic argument (declared as `name...`).
  ScriptCall& Rest(std::string_view name, std::span<const std::string> values);

  const Script& script() const { return script_; }

  // The arguments of EVALSHA <sha> <numkeys> <keys...> <args...>, pointing into this call and
  // the values it was given; kInternal if the names given do not match the script's declaration.
  base::Result<std::vector<std::string_view>> BuildArgv() const;
  // BuildArgv() formatted as a command.
  base::Result<Command> Build() const;
  // The same EVALSHA's RESP appended to `out`, without building the argument list; kInternal as
  // BuildArgv.
  base::Status AppendWire(std::string& out) const;

 private:
  // Values in place up to N, then on the heap: a call's keys and arguments (at most 14 so far)
  // cost no allocation.
  template <typename T, size_t N>
  class InlineList {
   public:
    void push_back(T value) {
      if (size_ < N) {
        inline_[size_] = std::move(value);
      } else {
        heap_.push_back(std::move(value));
      }
      ++size_;
    }
    size_t size() const { return size_; }
    const T& operator[](size_t i) const { return i < N ? inline_[i] : heap_[i - N]; }

   private:
    std::array<T, N> inline_{};
    std::vector<T> heap_;
    size_t size_ = 0;
  };
  static constexpr size_t kInline = 16;

  // The KEYS or the ARGV: named values, then an optional named variadic tail.
  struct Part {
    InlineList<std::string_view, kInline> names;
    InlineList<std::string_view, kInline> values;
    std::string_view rest_name;
    std::span<const std::string> rest;
  };
  base::Status Check(std::string_view what, const std::vector<std::string>& declared,
                     const Part& given) const;
  base::Status CheckAll() const;

  const Script& script_;
  Part keys_;
  Part args_;
  std::array<IntArg, kInline> inline_ints_;  // storage for integer arguments (stable addresses)
  size_t int_count_ = 0;
  std::list<IntArg> more_ints_;  // past kInline of them (a list: no allocation while empty)
  IntArg numkeys_{0};
};

// What the script bindings need of a runner: evaluate one call. ScriptRunner is the one over a
// Redis connection; unit tests of the use cases give the bindings one that answers in process
// (tests/support/script_double.h), so the bindings' own reply checks run on what it answers.
// Where calls complete and the default timeout are fixed when it is made: a script call costs one
// virtual call (Eval), nothing more.
class ScriptEvaluator {
 public:
  virtual ~ScriptEvaluator() = default;

  // Runs the call; `handler` is called exactly once, never from inside Eval, on executor() (a
  // reply, or the call's error: kInternal for a call that does not match its script, Redis
  // failures as Connection's codes, kUnknownOutcome when the call was sent and no reply came).
  virtual void Eval(const ScriptCall& call, Deadline deadline, ReplyHandler handler) = 0;
  // The scripts it runs, which the bindings look theirs up in.
  virtual const ScriptSet& scripts() const = 0;

  // Where the handlers run and where a binding posts an answer it has without a call.
  const boost::asio::any_io_executor& executor() const { return executor_; }
  // The deadline of a call given none: now plus the command timeout.
  Deadline DefaultDeadline() const { return Clock::now() + timeout_; }

  template <typename Token>
  auto AsyncEval(const ScriptCall& call, Deadline deadline, Token&& token) {
    return boost::asio::async_initiate<Token, void(base::Result<Reply>)>(
        [this](auto handler, const ScriptCall* call, Deadline d) {
          Eval(*call, d, ReplyHandler(std::move(handler)));
        },
        token, &call, deadline);
  }
  template <typename Token>
  auto AsyncEval(const ScriptCall& call, Token&& token) {
    return AsyncEval(call, DefaultDeadline(), std::forward<Token>(token));
  }

 protected:
  ScriptEvaluator(boost::asio::any_io_executor executor, Clock::duration timeout)
      : executor_(std::move(executor)), timeout_(timeout) {}
  ScriptEvaluator(const ScriptEvaluator&) = default;
  ScriptEvaluator& operator=(const ScriptEvaluator&) = default;

 private:
  boost::asio::any_io_executor executor_;
  Clock::duration timeout_;
};

// The connection's executor and command timeout are the evaluator's.
class ScriptRunner final : public ScriptEvaluator {
 public:
  ScriptRunner(std::shared_ptr<Connection> connection, const ScriptSet& scripts);

  // Runs the call with EVALSHA; reloads and retries on NOSCRIPT until `deadline`.
  void Eval(const ScriptCall& call, Deadline deadline, ReplyHandler handler) override;
  using ScriptEvaluator::AsyncEval;

  // SCRIPT LOAD of every script, so the first sale call does not pay for a NOSCRIPT round trip.
  // Completes with the first failure, if any.
  void LoadAll(Deadline deadline, boost::asio::any_completion_handler<void(base::Status)> handler);
  template <typename Token>
  auto AsyncLoadAll(Token&& token) {
    return boost::asio::async_initiate<Token, void(base::Status)>(
        [this](auto handler) {
          LoadAll(connection().DefaultDeadline(),
                  boost::asio::any_completion_handler<void(base::Status)>(std::move(handler)));
        },
        token);
  }

  Connection& connection() const { return *state_->connection; }
  const ScriptSet& scripts() const override { return *state_->scripts; }
  // SCRIPT LOADs sent because of NOSCRIPT replies.
  uint64_t reloads() const { return state_->reloads; }

 private:
  struct State {
    std::shared_ptr<Connection> connection;
    const ScriptSet* scripts;
    std::vector<uint64_t> load_sequence;  // per script: sequence of the last SCRIPT LOAD sent
    uint64_t reloads = 0;
  };
  static void Attempt(std::shared_ptr<State> state, const Script* script, std::string wire,
                      Deadline deadline, ReplyHandler handler);

  std::shared_ptr<State> state_;
};

// One command or script call, awaited: for coroutines that make one call at a time. (Named
// functions taking named arguments: GCC 12 mishandles temporaries with destructors inside a
// co_await expression, so callers build the Command or ScriptCall first.)
boost::asio::awaitable<base::Result<Reply>> Await(Connection& connection, const Command& command);
boost::asio::awaitable<base::Result<Reply>> Await(ScriptEvaluator& scripts, const ScriptCall& call);

}  // namespace flashsale::redis
