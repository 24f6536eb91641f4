#pragma once
// The shop's own access tokens (`--identity jwt`): a JWT signed by the shop's identity provider,
// verified against the provider's published keys (a JWKS). The JOSE work (importing a JWK,
// checking a JWS signature) is done by cjose; this file decides which key and which algorithm
// may be used, and checks the claims.
//
// Rules, each a refusal with a message saying which one failed:
// - The header's `alg` must be one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384,
//   ES512. `none` and the HMAC algorithms (HS*) are refused before any key is looked at: a
//   public key used as an HMAC secret (the classic key-confusion attack) never verifies anything.
// - The key is the one of the header's `kid`; a token without `kid` is taken only when the set
//   holds exactly one key fit for its `alg`. The key's type must fit the `alg` (RSA for RS*/PS*,
//   EC P-256/P-384/P-521 for ES256/384/512), and a key that names an `alg` of its own is used for
//   that one only. Keys whose `use` is not `sig`, and symmetric (`oct`) keys, are left out of
//   the set when it is read. Keys named inside the token (`jwk`, `jku`, `x5u`) are never used.
// - A header with `crit` is refused (no extension is understood).
// - Claims: `exp` is required and must not have passed (now > exp + leeway is expired); `nbf`,
//   when present, must have come (now + leeway < nbf is not yet valid); `iss` must equal the
//   configured issuer; `aud` (a string or an array of strings) must contain the configured
//   audience; the user claim (default `sub`) must be a string that is a valid user id
//   (base::IsValidId: 1-64 characters of [A-Za-z0-9_.:@-]).
//
// The key set is swapped whole (SetKeys); Verify reads the current one without waiting for any
// I/O: fetching and parsing a new set happens elsewhere (JwksRefresher).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace flashsale::service {

// The signature keys of one JWKS document, imported once.
class JwtKeySet {
 public:
  // `{"keys":[...]}`. Keys that are not RSA or EC signature keys, or that cannot be imported, are
  // left out (skipped() says why). kInvalidArgument when it is not a JWKS or when no key is left.
  static base::Result<std::shared_ptr<const JwtKeySet>> Parse(std::string_view jwks_json);

  ~JwtKeySet();
  JwtKeySet(const JwtKeySet&) = delete;
  JwtKeySet& operator=(const JwtKeySet&) = delete;

  // The keys' ids, in the document's order ("" for a key without one).
  std::vector<std::string> Kids() const;
  // What Parse left out and why ("key 2 (kid 'x'): use is enc"), for the log.
  const std::vector<std::string>& skipped() const { return skipped_; }

  struct Key;

 private:
  JwtKeySet();
  friend class JwtVerifier;
  std::vector<Key> keys_;
  std::vector<std::string> skipped_;
};

struct JwtSettings {
  std::string issuer;               // `iss` must equal it
  std::string audience;             // `aud` must be or contain it
  std::string user_claim = "sub";   // the claim holding the user id
  std::chrono::seconds leeway{30};  // clock skew allowed on exp and nbf
};

class JwtVerifier {
 public:
  // `clock` must outlive the verifier. It holds no keys until SetKeys: every token is refused.
  JwtVerifier(JwtSettings settings, const base::Clock& clock);

  // Replaces the key set at once; tokens being verified finish with the set they started with.
  void SetKeys(std::shared_ptr<const JwtKeySet> keys);
  std::shared_ptr<const JwtKeySet> Keys() const;

  // Called (on the verifying thread, so it must not block) when a token names a kid the set does
  // not hold: the provider may have published a new key since the set was read. The refresher
  // sets it at its start and clears it when destroyed, which happens once no Verify runs.
  void OnUnknownKid(std::function<void()> callback);

  // The user id, or kInvalidArgument saying why the token is refused.
  base::Result<std::string> Verify(std::string_view token) const;

  const JwtSettings& settings() const { return settings_; }

 private:
  JwtSettings settings_;
  const base::Clock& clock_;
  mutable std::mutex mutex_;  // guards keys_ and on_unknown_kid_: held only to copy or swap
  std::shared_ptr<const JwtKeySet> keys_;
  std::function<void()> on_unknown_kid_;
};

// Where a JWKS comes from: a file, or an https:// URL.
struct JwksSourceOptions {
  std::string source;  // a path, or https://host[:port]/path
  std::chrono::milliseconds refresh_every{60000};
  std::chrono::milliseconds fetch_timeout{5000};  // an https fetch, connect to last byte
};

// The JWKS text of `source` (read or fetched within the timeout), or kUnavailable saying why.
base::Result<std::string> FetchJwks(const JwksSourceOptions& options);

// Keeps a verifier's key set fresh: Start loads it once (an error if that fails, so serve does
// not start without keys), then a thread of its own loads it again every `refresh_every`, and
// early when a token names an unknown kid (at most once every `kUnknownKidRefreshGap`, so tokens
// with made-up kids cannot make it fetch more often). A refresh that fails (unreachable,
// unparsable) is logged and the set in use stays. The verifier must outlive the refresher; the
// refresher stops and joins its thread on destruction.
class JwksRefresher {
 public:
  static constexpr std::chrono::seconds kUnknownKidRefreshGap{10};

  static base::Result<std::unique_ptr<JwksRefresher>> Start(JwksSourceOptions options,
                                                            JwtVerifier& verifier);
  ~JwksRefresher();
  JwksRefresher(const JwksRefresher&) = delete;
  JwksRefresher& operator=(const JwksRefresher&) = delete;

  // Loads the set now, on the caller's thread; swaps it in when it parsed and differs from the
  // last one read. What the timer runs; tests call it to refresh without waiting.
  base::Status RefreshNow();

 private:
  JwksRefresher(JwksSourceOptions options, JwtVerifier& verifier);
  void Run();
  void WakeForUnknownKid();  // from a verifying thread: never blocks on a fetch

  JwksSourceOptions options_;
  JwtVerifier& verifier_;
  std::mutex refresh_mutex_;  // one refresh at a time (the timer's, or a test's)
  std::string last_text_;     // the document the set in use was parsed from
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool wake_early_ = false;
  std::chrono::steady_clock::time_point last_early_{};  // the last early refresh asked for
  std::thread thread_;
};

}  // namespace flashsale::service
