#pragma once
// Who is calling. Token mode (the default): `Authorization: Bearer <token>` signed by this
// service (core::TokenSigner). Gateway mode, chosen explicitly because it trusts a header: the
// user id in `X-User-Id`, set by a gateway in front that authenticated the user. Admin routes
// take `Authorization: Bearer <admin token>` in every mode. JWT mode: `Authorization: Bearer
// <the shop's access token>`, a JWT verified by service::JwtVerifier against the shop's JWKS. A
// request naming its caller twice (a repeated identity header) is refused, never read as the first
// or the last. In gateway mode an optional secret shared with the gateway (`X-Gateway-Secret`)
// proves the header came from it.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <memory>
#include <memory_resource>
#include <string>

#include "base/result.h"
#include "core/token.h"

namespace flashsale::service {
class JwtVerifier;
}  // namespace flashsale::service

namespace flashsale::server {

namespace http = boost::beast::http;
// A request's fields and body live in its connection's arena (server/session.cc): once the
// arena has grown to the connection's requests, parsing one allocates nothing.
using RequestAllocator = std::pmr::polymorphic_allocator<char>;
using RequestBody = http::basic_string_body<char, std::char_traits<char>, RequestAllocator>;
using Request = http::request<RequestBody, http::basic_fields<RequestAllocator>>;

enum class IdentityMode { kToken, kGateway, kJwt };

struct IdentityConfig {
  IdentityMode mode = IdentityMode::kToken;
  core::TokenSigner signer{""};
  std::string admin_token;
  std::string gateway_secret;  // gateway mode: when set, X-Gateway-Secret must equal it
  std::shared_ptr<const service::JwtVerifier> jwt;  // jwt mode: the verifier (keys kept fresh)
};

// kInvalidArgument (the reply is 400) when an identity header (X-User-Id, Authorization,
// X-Gateway-Secret) appears more than once.
base::Status CheckIdentityHeaders(const Request& request);

// The user id, or kInvalidArgument saying what is missing or wrong (the reply is 401).
base::Result<std::string> AuthenticateUser(const IdentityConfig& config, const Request& request,
                                           int64_t now_ms);
// Ok for the admin token; kInvalidArgument otherwise.
base::Status AuthenticateAdmin(const IdentityConfig& config, const Request& request);

}  // namespace flashsale::server
