// A use-case error as a reply, with no server: what the status and the body say.

#include "server/handlers.h"

#include <gtest/gtest.h>

#include "service/redis_watch.h"

namespace flashsale::server {
namespace {

using base::ErrorCode;

// Issue 33 point 4: the freeze is told by its detail, not by comparing the message.
TEST(ErrorToReplyTest, AFrozenSaleSaysSoAndOtherUnavailabilityInGeneralWords) {
  const Reply frozen = ErrorToReply(service::FrozenError());
  EXPECT_EQ(frozen.status, http::status::service_unavailable);
  EXPECT_EQ(frozen.retry_after_s, 1);
  EXPECT_NE(frozen.body.find(service::kFrozenMessage), std::string::npos) << frozen.body;

  // The same words without the detail are not a freeze: an error's text is never searched.
  const Reply other =
      ErrorToReply(base::Error{ErrorCode::kUnavailable, std::string(service::kFrozenMessage)});
  EXPECT_EQ(other.status, http::status::service_unavailable);
  EXPECT_EQ(other.body.find(service::kFrozenMessage), std::string::npos) << other.body;
  EXPECT_NE(other.body.find("a service behind this one is unavailable"), std::string::npos)
      << other.body;
}

}  // namespace
}  // namespace flashsale::server
