#include "redis/lock.h"

#include <boost/asio/use_awaitable.hpp>

namespace flashsale::redis {

namespace asio = boost::asio;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

// A fresh token: 128 bits from the caller's randomness, as hex.
std::string NewToken(base::Random& random) {
  return fmt::format("{:016x}{:016x}", random.Next(), random.Next());
}

Result<bool> OneOrZero(const Script& script, const Result<Reply>& reply) {
  if (!reply.ok()) return reply.error();
  if (!reply->is_integer() || (reply->integer() != 0 && reply->integer() != 1)) {
    return MakeError(ErrorCode::kProtocol, "script {} returned {}", script.name, reply->Describe());
  }
  return reply->integer() == 1;
}

}  // namespace

DistributedLock::DistributedLock(ScriptRunner& runner, std::string lock_key, std::string fence_key)
    : runner_(runner),
      lock_key_(std::move(lock_key)),
      fence_key_(std::move(fence_key)),
      acquire_(runner.scripts().Get("lock_acquire")),
      extend_(runner.scripts().Get("lock_extend")),
      release_(runner.scripts().Get("lock_release")) {}

asio::awaitable<Result<std::optional<Lease>>> DistributedLock::TryAcquire(
    base::Random& random, std::chrono::milliseconds ttl) {
  Lease lease{lock_key_, NewToken(random), 0};
  ScriptCall call(acquire_);
  call.Key("lock", lock_key_)
      .Key("fence", fence_key_)
      .Arg("token", lease.token)
      .Arg("ttl_ms", static_cast<int64_t>(ttl.count()));
  auto reply = co_await Await(runner_, call);
  if (!reply.ok()) co_return std::move(reply).error();
  if (!reply->is_array() || reply->size() != 2 || !(*reply)[0].is_integer() ||
      !(*reply)[1].is_integer()) {
    co_return MakeError(ErrorCode::kProtocol, "script {} returned {}", acquire_.name,
                        reply->Describe());
  }
  if ((*reply)[0].integer() != 1) co_return std::optional<Lease>();
  lease.fence = (*reply)[1].integer();
  co_return std::optional<Lease>(std::move(lease));
}

asio::awaitable<Result<bool>> DistributedLock::Extend(const Lease& lease,
                                                      std::chrono::milliseconds ttl) {
  ScriptCall call(extend_);
  call.Key("lock", lease.key)
      .Arg("token", lease.token)
      .Arg("ttl_ms", static_cast<int64_t>(ttl.count()));
  auto reply = co_await Await(runner_, call);
  co_return OneOrZero(extend_, reply);
}

asio::awaitable<Result<bool>> DistributedLock::Release(const Lease& lease) {
  ScriptCall call(release_);
  call.Key("lock", lease.key).Arg("token", lease.token);
  auto reply = co_await Await(runner_, call);
  co_return OneOrZero(release_, reply);
}

}  // namespace flashsale::redis
