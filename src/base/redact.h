#pragma once
// URLs as they may be printed: a password in them (the userinfo's "user:password@", or a
// password=... query parameter, as redis and mysql URLs take) replaced by "***". For every line
// that names a URL a person gave (banners, reports, error messages); the rest of the URL is kept
// so that it still says which server is meant.

#include <string>
#include <string_view>

namespace flashsale::base {

// "redis://:s3cret@host:6379/0" -> "redis://:***@host:6379/0";
// "mysql://app:pw@db/shop?ssl-mode=REQUIRED" -> "mysql://app:***@db/shop?ssl-mode=REQUIRED";
// "redis://host/0?password=pw&x=1" -> "redis://host/0?password=***&x=1". Text that is not a URL
// with a password comes back as it is.
std::string RedactUrl(std::string_view url);

}  // namespace flashsale::base
