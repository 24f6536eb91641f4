#pragma once
// Order ids: 26 characters of Crockford base32 holding a 48-bit millisecond timestamp and 80
// random bits (the ULID layout). They sort by creation time, which keeps the database's unique
// index append-mostly, and two instances never need to coordinate to stay unique.

#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/random.h"

namespace flashsale::base {

class OrderIdGenerator {
 public:
  OrderIdGenerator(const Clock& clock, Random& random) : clock_(clock), random_(random) {}
  std::string Next();

 private:
  const Clock& clock_;
  Random& random_;
};

// True for identifiers we accept from outside (activity, user, item ids): 1..64 characters from
// [A-Za-z0-9_.:@-]. Nothing that could break a Redis key, a stream field or a log line.
bool IsValidId(std::string_view id);

}  // namespace flashsale::base
