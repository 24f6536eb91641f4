// libFuzzer target: arbitrary bytes as an HTTP request, through everything that runs before a
// handler touches Redis or the database: Beast's parser with the server's limits, the route
// table, identity (both modes), the admin check, and the body parser of the matched route.
// Crashes, sanitizer reports and hangs are failures; refusals are the expected outcome.

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/activity.h"
#include "server/bodies.h"
#include "server/handlers.h"
#include "server/identity.h"
#include "server/router.h"

namespace {

using namespace flashsale;

void ParseBodyOf(const server::Route& route, std::string_view body, std::string_view query) {
  if (route.handler == server::HandlePurchase) {
    (void)server::ParsePurchaseBody(body);
  } else if (route.handler == server::HandleDraw) {
    (void)server::ParseDrawBody(body);
  } else if (route.handler == server::HandleTicket) {
    (void)server::ParseTicketQuery(query);
  } else if (route.handler == server::HandleAdminCreate) {
    (void)server::ParseActivityBody(body, 1'800'000'000'000);
  } else if (route.handler == server::HandleAdminUpdate) {
    (void)server::ParseActivityUpdate(body);
  } else if (route.handler == server::HandleAdminStock) {
    (void)server::ParseStockBody(body);
  } else if (route.handler == server::HandleAdminJob) {
    (void)server::ParseJobBody(body);
  } else if (route.handler == server::HandleAdminToken) {
    (void)server::ParseTokenBody(body);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace http = boost::beast::http;
  // The server's request type: fields and body on a polymorphic allocator (the server gives it a
  // per-connection arena; the default resource here).
  http::request_parser<server::RequestBody, server::RequestAllocator> parser;
  parser.header_limit(8192);  // the server's defaults
  parser.body_limit(65536);
  parser.eager(true);
  boost::system::error_code error;
  boost::asio::const_buffer input(data, size);
  while (input.size() > 0 && !parser.is_done()) {
    const size_t used = parser.put(input, error);
    if (error == http::error::need_more) break;
    if (error) return 0;
    input += used;
  }
  if (!parser.is_done()) {
    parser.put_eof(error);
    if (error || !parser.is_done()) return 0;
  }
  const server::Request& request = parser.get();
  const server::RouteMatch match =
      server::MatchRoute(server::Routes(), request.method(), request.target());
  if (match.route == nullptr) return 0;

  static const server::IdentityConfig kToken{server::IdentityMode::kToken,
                                             core::TokenSigner("fuzz-secret"), "fuzz-admin"};
  static const server::IdentityConfig kGateway{server::IdentityMode::kGateway,
                                               core::TokenSigner("fuzz-secret"), "fuzz-admin"};
  (void)server::AuthenticateUser(kToken, request, 1'800'000'000'000);
  (void)server::AuthenticateUser(kGateway, request, 1'800'000'000'000);
  (void)server::AuthenticateAdmin(kToken, request);
  for (std::string_view param : match.params) (void)core::IsValidActivityId(param);
  ParseBodyOf(*match.route, request.body(), match.query);
  return 0;
}
