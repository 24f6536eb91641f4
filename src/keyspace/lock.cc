#include "keyspace/lock.h"

#include <boost/asio/use_awaitable.hpp>

namespace flashsale::keyspace {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

// A fresh token: 128 bits from the caller's randomness, as hex.
std::string NewToken(base::Random& random) {
  return fmt::format("{:016x}{:016x}", random.Next(), random.Next());
}

// A reply declared `name:int` that must be 1 or 0.
Result<bool> OneOrZero(const redis::IntField& field, const Result<redis::Reply>& reply) {
  auto read = redis::ScriptReply::Read(field.script(), reply);
  if (!read) return std::move(read).error();
  const int64_t value = read->Int(field);
  if (value != 0 && value != 1) {
    return MakeError(ErrorCode::kProtocol, "script {} returned {}, expected 1 or 0",
                     field.script().name, value);
  }
  return value == 1;
}

}  // namespace

DistributedLock::DistributedLock(redis::ScriptEvaluator& runner, std::string lock_key,
                                 std::string fence_key)
    : runner_(runner),
      lock_key_(std::move(lock_key)),
      fence_key_(std::move(fence_key)),
      acquire_(runner.scripts().Get("lock_acquire")),
      extend_(runner.scripts().Get("lock_extend")),
      release_(runner.scripts().Get("lock_release")),
      acquired_(acquire_, "acquired"),
      fence_or_ttl_ms_(acquire_, "fence_or_ttl_ms"),
      extended_(extend_, "extended"),
      released_(release_, "released") {}

asio::awaitable<Result<std::optional<Lease>>> DistributedLock::TryAcquire(
    base::Random& random, std::chrono::milliseconds ttl) {
  Lease lease{lock_key_, NewToken(random), 0};
  redis::ScriptCall call(acquire_);
  call.Key("lock", lock_key_)
      .Key("fence", fence_key_)
      .Arg("token", lease.token)
      .Arg("ttl_ms", static_cast<int64_t>(ttl.count()));
  auto reply = co_await redis::Await(runner_, call);
  auto read = redis::ScriptReply::Read(acquire_, reply);
  if (!read) co_return std::move(read).error();
  if (read->Int(acquired_) != 1) co_return std::optional<Lease>();
  lease.fence = read->Int(fence_or_ttl_ms_);
  co_return std::optional<Lease>(std::move(lease));
}

asio::awaitable<Result<bool>> DistributedLock::Extend(const Lease& lease,
                                                      std::chrono::milliseconds ttl) {
  redis::ScriptCall call(extend_);
  call.Key("lock", lease.key)
      .Arg("token", lease.token)
      .Arg("ttl_ms", static_cast<int64_t>(ttl.count()));
  auto reply = co_await redis::Await(runner_, call);
  co_return OneOrZero(extended_, reply);
}

asio::awaitable<Result<bool>> DistributedLock::Release(const Lease& lease) {
  redis::ScriptCall call(release_);
  call.Key("lock", lease.key).Arg("token", lease.token);
  auto reply = co_await redis::Await(runner_, call);
  co_return OneOrZero(released_, reply);
}

}  // namespace flashsale::keyspace
