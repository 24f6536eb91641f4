#include "redis/scripts.h"

#include <openssl/sha.h>

#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <sstream>
#include <stdexcept>

#include "base/string_pool.h"

namespace flashsale::redis {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr std::string_view kRestSuffix = "...";

std::string Sha1Hex(std::string_view data) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(size_t{2} * SHA_DIGEST_LENGTH, '0');
  for (size_t i = 0; i < SHA_DIGEST_LENGTH; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 15];
  }
  return hex;
}

// Reads "-- KEYS: a b c", "-- ARGV: x y..." and "-- RETURNS: ..." from the script's header.
Result<Script> ParseScript(std::string name, std::string source) {
  Script script;
  script.name = std::move(name);
  if (source.rfind("#!lua", 0) != 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "script {} must start with a #!lua shebang (Redis 7 script flags)",
                     script.name);
  }
  bool have_keys = false;
  bool have_argv = false;
  bool have_returns = false;
  std::string returns;
  std::istringstream lines(source);
  std::string line;
  while (std::getline(lines, line)) {
    if (constexpr std::string_view kReturns = "-- RETURNS:"; line.rfind(kReturns, 0) == 0) {
      returns += line.substr(kReturns.size()) + " ";
      have_returns = true;
    }
    for (auto [prefix, names, seen] : {std::tuple{"-- KEYS:", &script.key_names, &have_keys},
                                       std::tuple{"-- ARGV:", &script.arg_names, &have_argv}}) {
      if (line.rfind(prefix, 0) != 0) continue;
      std::istringstream words(line.substr(std::string_view(prefix).size()));
      std::string word;
      while (words >> word) names->push_back(word);
      *seen = true;
    }
  }
  if (!have_keys || !have_argv || !have_returns) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "script {} must declare its interface in '-- KEYS:', '-- ARGV:' and "
                     "'-- RETURNS:' lines",
                     script.name);
  }
  auto decl = ParseReplyDecl(returns);
  if (!decl)
    return MakeError(ErrorCode::kInvalidArgument, "script {}: {}", script.name,
                     decl.error().message);
  script.returns = std::move(*decl);
  for (const auto* names : {&script.key_names, &script.arg_names}) {
    for (size_t i = 0; i + 1 < names->size(); ++i) {
      if ((*names)[i].ends_with(kRestSuffix)) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "script {}: only the last KEYS or ARGV name may end in '{}'", script.name,
                         kRestSuffix);
      }
    }
  }
  script.sha1 = Sha1Hex(source);
  script.load_wire = std::string(Command{"SCRIPT", "LOAD", source}.wire());
  script.source = std::move(source);
  return script;
}

bool IsNoScript(const Result<Reply>& result) {
  return !result.ok() && result.error().detail == base::ErrorDetail::kNoScript;
}

}  // namespace

Result<ScriptSet> ScriptSet::Parse(std::span<const std::pair<std::string, std::string>> sources) {
  ScriptSet set;
  for (const auto& [name, source] : sources) {
    auto script = ParseScript(name, source);
    if (!script) return std::move(script).error();
    script->index = set.scripts_.size();
    set.scripts_.push_back(std::move(*script));
  }
  return set;
}

const Script* ScriptSet::Find(std::string_view name) const {
  for (const auto& script : scripts_) {
    if (script.name == name) return &script;
  }
  return nullptr;
}

const Script& ScriptSet::Get(std::string_view name) const {
  const Script* script = Find(name);
  if (script == nullptr) throw std::out_of_range("no embedded script named " + std::string(name));
  return *script;
}

ScriptCall::ScriptCall(const Script& script) : script_(script) {}

ScriptCall& ScriptCall::Key(std::string_view name, std::string_view key) {
  keys_.names.push_back(name);
  keys_.values.push_back(key);
  numkeys_ = IntArg(static_cast<int64_t>(keys_.values.size() + keys_.rest.size()));
  return *this;
}

ScriptCall& ScriptCall::RestKeys(std::string_view name, std::span<const std::string> keys) {
  keys_.rest_name = name;
  keys_.rest = keys;
  numkeys_ = IntArg(static_cast<int64_t>(keys_.values.size() + keys_.rest.size()));
  return *this;
}

ScriptCall& ScriptCall::Arg(std::string_view name, std::string_view value) {
  args_.names.push_back(name);
  args_.values.push_back(value);
  return *this;
}

ScriptCall& ScriptCall::Arg(std::string_view name, int64_t value) {
  if (int_count_ < kInline) {
    inline_ints_[int_count_] = IntArg(value);
    return Arg(name, inline_ints_[int_count_++].view());
  }
  return Arg(name, more_ints_.emplace_back(value).view());
}

ScriptCall& ScriptCall::Rest(std::string_view name, std::span<const std::string> values) {
  args_.rest_name = name;
  args_.rest = values;
  return *this;
}

base::Status ScriptCall::Check(std::string_view what, const std::vector<std::string>& declared,
                               const Part& given) const {
  const bool has_rest = !declared.empty() && declared.back().ends_with(kRestSuffix);
  const size_t fixed = declared.size() - (has_rest ? 1 : 0);
  if (given.names.size() != fixed) {
    return MakeError(ErrorCode::kInternal, "script {} declares {} fixed {}, the binding passes {}",
                     script_.name, fixed, what, given.names.size());
  }
  for (size_t i = 0; i <= fixed; ++i) {
    std::string_view want;
    std::string_view got;
    if (i < fixed) {
      want = declared[i];
      got = given.names[i];
    } else if (has_rest) {
      want =
          std::string_view(declared.back()).substr(0, declared.back().size() - kRestSuffix.size());
      got = given.rest_name;
    } else if (!given.rest_name.empty()) {
      return MakeError(ErrorCode::kInternal, "script {} takes no variadic {} '{}'", script_.name,
                       what, given.rest_name);
    } else {
      break;
    }
    if (want != got) {
      return MakeError(ErrorCode::kInternal,
                       "script {}: {}[{}] is declared '{}' but the binding passes '{}'",
                       script_.name, what, i + 1, want, got);
    }
  }
  return {};
}

base::Status ScriptCall::CheckAll() const {
  if (auto keys = Check("KEYS", script_.key_names, keys_); !keys) return keys;
  return Check("ARGV", script_.arg_names, args_);
}

Result<std::vector<std::string_view>> ScriptCall::BuildArgv() const {
  if (auto checked = CheckAll(); !checked) return checked.error();
  std::vector<std::string_view> argv;
  argv.reserve(3 + keys_.values.size() + keys_.rest.size() + args_.values.size() +
               args_.rest.size());
  argv.push_back("EVALSHA");
  argv.push_back(script_.sha1);
  argv.push_back(numkeys_.view());
  for (const Part* part : {&keys_, &args_}) {
    for (size_t i = 0; i < part->values.size(); ++i) argv.push_back(part->values[i]);
    for (const auto& value : part->rest) argv.push_back(value);
  }
  return argv;
}

Result<Command> ScriptCall::Build() const {
  auto argv = BuildArgv();
  if (!argv) return std::move(argv).error();
  return Command(*argv);
}

base::Status ScriptCall::AppendWire(std::string& out) const {
  if (auto checked = CheckAll(); !checked) return checked;
  AppendArrayHeader(
      out, 3 + keys_.values.size() + keys_.rest.size() + args_.values.size() + args_.rest.size());
  AppendBulk(out, "EVALSHA");
  AppendBulk(out, script_.sha1);
  AppendBulk(out, numkeys_.view());
  for (const Part* part : {&keys_, &args_}) {
    for (size_t i = 0; i < part->values.size(); ++i) AppendBulk(out, part->values[i]);
    for (const auto& value : part->rest) AppendBulk(out, value);
  }
  return {};
}

ScriptRunner::ScriptRunner(std::shared_ptr<Connection> connection, const ScriptSet& scripts)
    : ScriptEvaluator(connection->executor(), connection->options().command_timeout),
      state_(std::make_shared<State>()) {
  state_->connection = std::move(connection);
  state_->scripts = &scripts;
  state_->load_sequence.assign(scripts.scripts().size(), 0);
}

void ScriptRunner::Eval(const ScriptCall& call, Deadline deadline, ReplyHandler handler) {
  // The wire is kept until the reply (a NOSCRIPT sends it again), in a string of the thread's
  // pool, given back after the reply.
  std::string wire = base::TakeString();
  if (auto built = call.AppendWire(wire); !built) {
    asio::post(state_->connection->executor(),
               asio::append(std::move(handler), Result<Reply>(std::move(built).error())));
    return;
  }
  Attempt(state_, &call.script(), std::move(wire), deadline, std::move(handler));
}

void ScriptRunner::Attempt(std::shared_ptr<State> state, const Script* script, std::string wire,
                           Deadline deadline, ReplyHandler handler) {
  Connection& connection = *state->connection;
  const uint64_t sequence = connection.next_sequence();
  // Move the wire into the continuation only after Send has copied it.
  auto continuation = [state, script, sequence, deadline, handler = std::move(handler)](
                          std::string wire, Result<Reply> result) mutable {
    if (!IsNoScript(result) || Clock::now() >= deadline) {
      base::GiveString(std::move(wire));
      asio::dispatch(asio::append(std::move(handler), std::move(result)));
      return;
    }
    Connection& connection = *state->connection;
    uint64_t& loaded_at = state->load_sequence[script->index];
    if (loaded_at <= sequence) {
      // No SCRIPT LOAD was sent after this call: send one. Its reply is not needed; if it fails,
      // the EVALSHA behind it fails too and says why.
      loaded_at = connection.next_sequence();
      ++state->reloads;
      connection.Send(script->load_wire, deadline, ReplyHandler([](Result<Reply>) {}));
    }
    Attempt(std::move(state), script, std::move(wire), deadline, std::move(handler));
  };
  std::string_view view = wire;
  connection.Send(view, deadline,
                  ReplyHandler([continuation = std::move(continuation),
                                wire = std::move(wire)](Result<Reply> result) mutable {
                    continuation(std::move(wire), std::move(result));
                  }));
}

void ScriptRunner::LoadAll(Deadline deadline,
                           asio::any_completion_handler<void(base::Status)> handler) {
  struct Join {
    asio::any_completion_handler<void(base::Status)> handler;
    size_t left;
    base::Status status;
  };
  const auto& scripts = state_->scripts->scripts();
  auto join = std::make_shared<Join>(Join{std::move(handler), scripts.size(), {}});
  if (scripts.empty()) {
    asio::post(state_->connection->executor(),
               asio::append(std::move(join->handler), base::Status()));
    return;
  }
  for (const auto& script : scripts) {
    state_->load_sequence[script.index] = state_->connection->next_sequence();
    state_->connection->Send(
        script.load_wire, deadline, ReplyHandler([join, &script](Result<Reply> result) {
          if (join->status.ok()) {
            if (!result.ok()) {
              join->status = MakeError(result.error().code, "SCRIPT LOAD {}: {}", script.name,
                                       result.error().message);
            } else if (result->str() != script.sha1) {
              join->status =
                  MakeError(ErrorCode::kProtocol, "SCRIPT LOAD {} returned sha {}, expected {}",
                            script.name, result->Describe(), script.sha1);
            }
          }
          if (--join->left == 0) {
            asio::dispatch(asio::append(std::move(join->handler), std::move(join->status)));
          }
        }));
  }
}

boost::asio::awaitable<Result<Reply>> Await(Connection& connection, const Command& command) {
  co_return co_await connection.AsyncSend(command, boost::asio::use_awaitable);
}

boost::asio::awaitable<Result<Reply>> Await(ScriptEvaluator& scripts, const ScriptCall& call) {
  co_return co_await scripts.AsyncEval(call, boost::asio::use_awaitable);
}

}  // namespace flashsale::redis
