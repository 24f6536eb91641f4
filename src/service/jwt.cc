#include "service/jwt.h"

#include <cjose/header.h>
#include <cjose/jwk.h>
#include <cjose/jws.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/url/parse.hpp>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/crypto.h"
#include "base/ids.h"
#include "base/redact.h"
#include "service/http_client.h"

namespace flashsale::service {

namespace asio = boost::asio;
namespace json = boost::json;
using base::ErrorCode;
using base::MakeError;
using base::Result;

struct JwtKeySet::Key {
  std::string kid;
  std::string alg;  // the key's own "alg", or empty
  cjose_jwk_kty_t kty = CJOSE_JWK_KTY_RSA;
  cjose_jwk_ec_curve curve = CJOSE_JWK_EC_INVALID;
  std::shared_ptr<cjose_jwk_t> jwk;
};

namespace {

constexpr size_t kMaxTokenBytes = 16 * 1024;
constexpr size_t kMaxJwksBytes = 1024 * 1024;

// What an accepted alg asks of its key.
struct AlgRule {
  std::string_view alg;
  cjose_jwk_kty_t kty;
  cjose_jwk_ec_curve curve;  // EC only
};
constexpr std::array<AlgRule, 9> kAllowedAlgs{{
    {"RS256", CJOSE_JWK_KTY_RSA, CJOSE_JWK_EC_INVALID},
    {"RS384", CJOSE_JWK_KTY_RSA, CJOSE_JWK_EC_INVALID},
    {"RS512", CJOSE_JWK_KTY_RSA, CJOSE_JWK_EC_INVALID},
    {"PS256", CJOSE_JWK_KTY_RSA, CJOSE_JWK_EC_INVALID},
    {"PS384", CJOSE_JWK_KTY_RSA, CJOSE_JWK_EC_INVALID},
    {"PS512", CJOSE_JWK_KTY_RSA, CJOSE_JWK_EC_INVALID},
    {"ES256", CJOSE_JWK_KTY_EC, CJOSE_JWK_EC_P_256},
    {"ES384", CJOSE_JWK_KTY_EC, CJOSE_JWK_EC_P_384},
    {"ES512", CJOSE_JWK_KTY_EC, CJOSE_JWK_EC_P_521},
}};

const AlgRule* FindAlg(std::string_view alg) {
  for (const AlgRule& rule : kAllowedAlgs) {
    if (rule.alg == alg) return &rule;
  }
  return nullptr;
}

bool KeyFits(const JwtKeySet::Key& key, const AlgRule& rule) {
  if (key.kty != rule.kty) return false;
  if (rule.kty == CJOSE_JWK_KTY_EC && key.curve != rule.curve) return false;
  return key.alg.empty() || key.alg == rule.alg;
}

std::string_view StringOr(const json::object& object, std::string_view name,
                          std::string_view otherwise = "") {
  const json::value* value = object.if_contains(name);
  if (value == nullptr || !value->is_string()) return otherwise;
  return value->get_string();
}

std::string CjoseMessage(const cjose_err& err) {
  return err.message != nullptr ? std::string(err.message) : std::string("unknown error");
}

// A NumericDate claim: a JSON number of seconds. Empty when absent; kInvalidArgument when not a
// number.
Result<std::optional<double>> NumericDate(const json::object& claims, std::string_view name) {
  const json::value* value = claims.if_contains(name);
  if (value == nullptr) return std::optional<double>();
  if (!value->is_number()) {
    return MakeError(ErrorCode::kInvalidArgument, "claim '{}' is not a number", name);
  }
  boost::system::error_code ec;
  const double seconds = value->to_number<double>(ec);
  if (ec || !std::isfinite(seconds)) {
    return MakeError(ErrorCode::kInvalidArgument, "claim '{}' is not a number", name);
  }
  return std::optional<double>(seconds);
}

}  // namespace

// --- JwtKeySet ----------------------------------------------------------------------------------

JwtKeySet::JwtKeySet() = default;
JwtKeySet::~JwtKeySet() = default;

Result<std::shared_ptr<const JwtKeySet>> JwtKeySet::Parse(std::string_view jwks_json) {
  boost::system::error_code ec;
  json::value document = json::parse(jwks_json, ec);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "the JWKS is not JSON: {}", ec.message());
  const json::object* root = document.if_object();
  const json::value* keys = root != nullptr ? root->if_contains("keys") : nullptr;
  if (keys == nullptr || !keys->is_array()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the JWKS is not an object with a \"keys\" array");
  }
  std::shared_ptr<JwtKeySet> set(new JwtKeySet());
  size_t index = 0;
  for (const json::value& entry : keys->get_array()) {
    ++index;
    const json::object* object = entry.if_object();
    if (object == nullptr) {
      return MakeError(ErrorCode::kInvalidArgument, "JWKS key {} is not an object", index);
    }
    const std::string kid(StringOr(*object, "kid"));
    const std::string where =
        kid.empty() ? fmt::format("key {}", index) : fmt::format("key {} (kid '{}')", index, kid);
    const std::string_view kty = StringOr(*object, "kty");
    const std::string_view use = StringOr(*object, "use", "sig");
    if (use != "sig") {
      set->skipped_.push_back(fmt::format("{}: use is '{}', not sig", where, use));
      continue;
    }
    if (kty != "RSA" && kty != "EC") {
      set->skipped_.push_back(fmt::format("{}: kty '{}' is not RSA or EC", where, kty));
      continue;
    }
    const std::string alg(StringOr(*object, "alg"));
    if (!alg.empty() && FindAlg(alg) == nullptr) {
      set->skipped_.push_back(fmt::format("{}: alg '{}' is not accepted", where, alg));
      continue;
    }
    const std::string text = json::serialize(entry);
    cjose_err err{};
    cjose_jwk_t* imported = cjose_jwk_import(text.data(), text.size(), &err);
    if (imported == nullptr) {
      // A malformed key, or an EC key on a curve cjose does not know: left out like the others,
      // so one odd key does not take the provider's other keys with it.
      set->skipped_.push_back(fmt::format("{}: cannot be imported: {}", where, CjoseMessage(err)));
      continue;
    }
    Key key;
    key.kid = kid;
    key.alg = alg;
    key.jwk =
        std::shared_ptr<cjose_jwk_t>(imported, [](cjose_jwk_t* jwk) { cjose_jwk_release(jwk); });
    key.kty = cjose_jwk_get_kty(imported, &err);
    if (key.kty == CJOSE_JWK_KTY_EC) key.curve = cjose_jwk_EC_get_curve(imported, &err);
    set->keys_.push_back(std::move(key));
  }
  if (set->keys_.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the JWKS holds no RSA or EC signature key ({} key(s) in it{}{})", index,
                     set->skipped_.empty() ? "" : ": ", fmt::join(set->skipped_, "; "));
  }
  return std::shared_ptr<const JwtKeySet>(std::move(set));
}

std::vector<std::string> JwtKeySet::Kids() const {
  std::vector<std::string> kids;
  kids.reserve(keys_.size());
  for (const Key& key : keys_) kids.push_back(key.kid);
  return kids;
}

// --- JwtVerifier --------------------------------------------------------------------------------

JwtVerifier::JwtVerifier(JwtSettings settings, const base::Clock& clock)
    : settings_(std::move(settings)), clock_(clock) {}

void JwtVerifier::SetKeys(std::shared_ptr<const JwtKeySet> keys) {
  std::lock_guard lock(mutex_);
  keys_.swap(keys);
}

void JwtVerifier::OnUnknownKid(std::function<void()> callback) {
  std::lock_guard lock(mutex_);
  on_unknown_kid_.swap(callback);
}

std::shared_ptr<const JwtKeySet> JwtVerifier::Keys() const {
  std::lock_guard lock(mutex_);
  return keys_;
}

Result<std::string> JwtVerifier::Verify(std::string_view token) const {
  const auto refuse = [](std::string message) {
    return Result<std::string>(base::Error{ErrorCode::kInvalidArgument, std::move(message)});
  };
  if (token.size() > kMaxTokenBytes) {
    return refuse(fmt::format("the JWT is over {} bytes", kMaxTokenBytes));
  }
  const size_t first_dot = token.find('.');
  const size_t second_dot =
      first_dot == std::string_view::npos ? first_dot : token.find('.', first_dot + 1);
  if (second_dot == std::string_view::npos ||
      token.find('.', second_dot + 1) != std::string_view::npos) {
    return refuse("not a JWT (three base64url parts separated by dots)");
  }

  // The header, read by us first: the alg and the key are chosen before cjose sees the token.
  std::string header_text;
  if (!base::Base64UrlDecode(token.substr(0, first_dot), header_text)) {
    return refuse("the JWT header is not base64url");
  }
  boost::system::error_code ec;
  json::value header_value = json::parse(header_text, ec);
  if (ec || !header_value.is_object()) return refuse("the JWT header is not a JSON object");
  const json::object& header = header_value.get_object();
  const json::value* alg_value = header.if_contains("alg");
  if (alg_value == nullptr || !alg_value->is_string()) return refuse("the JWT header has no alg");
  const std::string_view alg = alg_value->get_string();
  const AlgRule* rule = FindAlg(alg);
  if (rule == nullptr) {
    return refuse(fmt::format(
        "alg '{}' is not accepted (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, "
        "ES512)",
        alg.substr(0, 32)));
  }
  if (second_dot + 1 == token.size()) return refuse("the JWT has no signature");
  if (header.contains("crit")) return refuse("the JWT header has 'crit', which is not supported");

  const std::shared_ptr<const JwtKeySet> keys = Keys();
  if (keys == nullptr) return refuse("no JWKS loaded yet");
  const JwtKeySet::Key* key = nullptr;
  const json::value* kid_value = header.if_contains("kid");
  if (kid_value != nullptr) {
    if (!kid_value->is_string()) return refuse("the JWT header's kid is not a string");
    const std::string_view kid = kid_value->get_string();
    for (const JwtKeySet::Key& candidate : keys->keys_) {
      if (candidate.kid == kid) {
        key = &candidate;
        break;
      }
    }
    if (key == nullptr) {
      std::function<void()> wake;
      {
        std::lock_guard lock(mutex_);
        wake = on_unknown_kid_;
      }
      if (wake) wake();
      return refuse(fmt::format("unknown kid '{}' (not in the JWKS)", kid.substr(0, 64)));
    }
    if (!KeyFits(*key, *rule)) {
      return refuse(
          fmt::format("the key of kid '{}' is not a key for alg {}", kid.substr(0, 64), alg));
    }
  } else {
    for (const JwtKeySet::Key& candidate : keys->keys_) {
      if (!KeyFits(candidate, *rule)) continue;
      if (key != nullptr) return refuse("the JWT has no kid and the JWKS has several keys for it");
      key = &candidate;
    }
    if (key == nullptr) return refuse(fmt::format("the JWKS has no key for alg {}", alg));
  }

  cjose_err err{};
  std::unique_ptr<cjose_jws_t, void (*)(cjose_jws_t*)> jws(
      cjose_jws_import(token.data(), token.size(), &err), cjose_jws_release);
  if (jws == nullptr) return refuse(fmt::format("the JWT cannot be read: {}", CjoseMessage(err)));
  // cjose reads the header again: it must have read the alg we checked.
  const char* cjose_alg = cjose_header_get(cjose_jws_get_protected(jws.get()), CJOSE_HDR_ALG, &err);
  if (cjose_alg == nullptr || alg != cjose_alg) return refuse("the JWT header cannot be read");
  if (!cjose_jws_verify(jws.get(), key->jwk.get(), &err)) {
    return refuse("bad signature");
  }
  uint8_t* payload = nullptr;
  size_t payload_size = 0;
  if (!cjose_jws_get_plaintext(jws.get(), &payload, &payload_size, &err)) {
    return refuse(fmt::format("the JWT payload cannot be read: {}", CjoseMessage(err)));
  }
  json::value claims_value =
      json::parse(std::string_view(reinterpret_cast<const char*>(payload), payload_size), ec);
  if (ec || !claims_value.is_object()) return refuse("the JWT payload is not a JSON object");
  const json::object& claims = claims_value.get_object();

  const int64_t now_ms = clock_.NowMs();
  const double now = static_cast<double>(now_ms) / 1000.0;
  const auto leeway = static_cast<double>(settings_.leeway.count());
  auto exp = NumericDate(claims, "exp");
  if (!exp.ok()) return refuse(exp.error().message);
  if (!exp->has_value()) return refuse("the JWT has no exp");
  if (now > **exp + leeway) {
    return refuse(fmt::format("the JWT expired at {:.0f} (now {:.0f}, leeway {} s)", **exp, now,
                              settings_.leeway.count()));
  }
  auto nbf = NumericDate(claims, "nbf");
  if (!nbf.ok()) return refuse(nbf.error().message);
  if (nbf->has_value() && now + leeway < **nbf) {
    return refuse(fmt::format("the JWT is not valid before {:.0f} (now {:.0f}, leeway {} s)", **nbf,
                              now, settings_.leeway.count()));
  }
  const json::value* iss = claims.if_contains("iss");
  if (iss == nullptr || !iss->is_string() || iss->get_string() != settings_.issuer) {
    return refuse(fmt::format("wrong issuer: iss must be '{}'", settings_.issuer));
  }
  const json::value* aud = claims.if_contains("aud");
  bool audience_ok = false;
  if (aud != nullptr && aud->is_string()) {
    audience_ok = aud->get_string() == settings_.audience;
  } else if (aud != nullptr && aud->is_array()) {
    for (const json::value& one : aud->get_array()) {
      if (one.is_string() && one.get_string() == settings_.audience) audience_ok = true;
    }
  }
  if (!audience_ok) {
    return refuse(fmt::format("wrong audience: aud must be or contain '{}'", settings_.audience));
  }
  const json::value* user = claims.if_contains(settings_.user_claim);
  if (user == nullptr || !user->is_string()) {
    return refuse(
        fmt::format("the JWT has no string claim '{}' (the user id)", settings_.user_claim));
  }
  const std::string_view user_id = user->get_string();
  if (!base::IsValidId(user_id)) {
    return refuse(fmt::format("claim '{}' must be 1-64 characters of [A-Za-z0-9_.:@-]",
                              settings_.user_claim));
  }
  return std::string(user_id);
}

// --- Fetching a JWKS ----------------------------------------------------------------------------

namespace {

Result<std::string> ReadJwksFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorCode::kUnavailable, "cannot read the JWKS file {}", path);
  std::string text;
  text.resize(kMaxJwksBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxJwksBytes) {
    return MakeError(ErrorCode::kUnavailable, "the JWKS file {} is over {} bytes", path,
                     kMaxJwksBytes);
  }
  return text;
}

Result<HttpTarget> ParseHttpsUrl(std::string_view text) {
  auto url = boost::urls::parse_uri(text);
  if (!url || url->scheme() != "https" || url->encoded_host().empty() || url->has_userinfo()) {
    return MakeError(ErrorCode::kInvalidArgument, "'{}' is not an https://host[:port]/path URL",
                     base::RedactUrl(text.substr(0, 200)));
  }
  HttpTarget target;
  target.tls = true;
  target.host = url->host();
  target.port = url->has_port() ? std::string(url->port()) : "443";
  target.target = url->encoded_path().empty() ? "/" : std::string(url->encoded_path());
  if (url->has_query()) target.target += "?" + std::string(url->encoded_query());
  return target;
}

asio::awaitable<Result<std::string>> GetHttps(HttpTarget url, asio::ssl::context& tls,
                                              std::chrono::milliseconds timeout) {
  HttpRequest request{.headers = {{"User-Agent", "flashsale-jwks"}, {"Accept", "application/json"}},
                      .timeout = timeout,
                      .max_answer_bytes = kMaxJwksBytes};
  auto answer = co_await HttpExchange(url, request, &tls);
  if (!answer.ok()) co_return std::move(answer).error();
  if (answer->status != 200) {
    co_return MakeError(ErrorCode::kUnavailable, "answered HTTP {}", answer->status);
  }
  co_return std::move(answer->body);
}

}  // namespace

Result<std::string> FetchJwks(const JwksSourceOptions& options) {
  if (!options.source.starts_with("https://")) return ReadJwksFile(options.source);
  auto url = ParseHttpsUrl(options.source);
  if (!url.ok()) return MakeError(ErrorCode::kUnavailable, "JWKS URL: {}", url.error().message);
  // The system's CAs (SSL_CERT_FILE / SSL_CERT_DIR name others, as for every OpenSSL client).
  asio::ssl::context tls = MakeTlsClientContext();
  asio::io_context io;
  std::optional<Result<std::string>> result;
  const HttpTarget& target = *url;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        result = co_await GetHttps(target, tls, options.fetch_timeout);
      },
      [](const std::exception_ptr&) {});
  io.run();
  if (!result.has_value()) return MakeError(ErrorCode::kUnavailable, "fetch did not finish");
  if (!result->ok()) {
    return MakeError(ErrorCode::kUnavailable, "JWKS from {}: {}", base::RedactUrl(options.source),
                     result->error().message);
  }
  return std::move(*result);
}

// --- JwksRefresher ------------------------------------------------------------------------------

JwksRefresher::JwksRefresher(JwksSourceOptions options, JwtVerifier& verifier)
    : options_(std::move(options)), verifier_(verifier) {}

Result<std::unique_ptr<JwksRefresher>> JwksRefresher::Start(JwksSourceOptions options,
                                                            JwtVerifier& verifier) {
  std::unique_ptr<JwksRefresher> refresher(new JwksRefresher(std::move(options), verifier));
  if (auto loaded = refresher->RefreshNow(); !loaded.ok()) return std::move(loaded).error();
  refresher->verifier_.OnUnknownKid([raw = refresher.get()] { raw->WakeForUnknownKid(); });
  refresher->thread_ = std::thread([raw = refresher.get()] { raw->Run(); });
  return refresher;
}

JwksRefresher::~JwksRefresher() {
  if (thread_.joinable()) verifier_.OnUnknownKid(nullptr);
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

base::Status JwksRefresher::RefreshNow() {
  std::lock_guard refreshing(refresh_mutex_);
  auto text = FetchJwks(options_);
  if (!text.ok()) return std::move(text).error();
  if (*text == last_text_) return {};
  auto keys = JwtKeySet::Parse(*text);
  // The source as it may be printed (a password in the URL replaced).
  const std::string shown = base::RedactUrl(options_.source);
  if (!keys.ok()) {
    return MakeError(ErrorCode::kInvalidArgument, "JWKS from {}: {}", shown, keys.error().message);
  }
  for (const std::string& skipped : (*keys)->skipped()) {
    spdlog::info("JWKS from {}: left out {}", shown, skipped);
  }
  spdlog::info("JWKS from {}: {} key(s), kid {}", shown, (*keys)->Kids().size(),
               fmt::join((*keys)->Kids(), ", "));
  verifier_.SetKeys(std::move(*keys));
  last_text_ = std::move(*text);
  return {};
}

void JwksRefresher::WakeForUnknownKid() {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    if (wake_early_ || (last_early_ != std::chrono::steady_clock::time_point{} &&
                        now - last_early_ < kUnknownKidRefreshGap)) {
      return;
    }
    wake_early_ = true;
    last_early_ = now;
  }
  wake_.notify_all();
}

void JwksRefresher::Run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (wake_.wait_for(lock, options_.refresh_every, [this] { return stop_ || wake_early_; }) &&
        stop_) {
      break;
    }
    wake_early_ = false;
    lock.unlock();
    if (auto refreshed = RefreshNow(); !refreshed.ok()) {
      spdlog::warn("{}; the keys read before stay in use", refreshed.error().message);
    }
    lock.lock();
  }
}

}  // namespace flashsale::service
