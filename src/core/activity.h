#pragma once
// A seckill activity: what is sold, when, and how much each user may take. Pure data and rules;
// the Redis layer turns it into script arguments, the store layer into rows.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace flashsale::core {

enum class StockKind {
  kCounted,   // stock is a number of identical units
  kItemised,  // stock is a list of distinct item ids (coupon codes, serial numbers)
};

std::string_view ToString(StockKind kind);  // "counted" | "items"

enum class WindowPosition { kBefore, kOpen, kAfter };

// A GCRA rate: `per_second` requests on average, bursts of up to `burst`. Off when per_second is 0.
struct RateLimit {
  double per_second = 0;
  int64_t burst = 1;
  bool enabled() const { return per_second > 0; }
};

struct SeckillActivity {
  std::string id;
  std::string title;     // for people; 0-200 bytes, not interpreted
  int64_t start_ms = 0;  // sales open at start_ms (inclusive) ...
  int64_t end_ms = 0;    // ... and close at end_ms (exclusive)
  int64_t per_user_limit = 1;
  bool open = true;  // false: closed (paused) by an operator
  StockKind kind = StockKind::kCounted;
  int64_t stock = 0;               // kCounted: the number of units
  std::vector<std::string> items;  // kItemised: the distinct item ids
  RateLimit user_rate;             // per user of this activity; off by default
  RateLimit address_rate;          // per client address; off by default

  // Where `now_ms` falls in [start_ms, end_ms).
  WindowPosition PositionAt(int64_t now_ms) const;
  // The number of units this definition loads.
  int64_t InitialUnits() const;
};

// Activity ids become part of Redis keys and URLs: 1-64 characters of [A-Za-z0-9_-].
bool IsValidActivityId(std::string_view id);

// Rejects definitions the scripts must never see: bad ids, an empty or inverted window, a
// per-user limit below 1, negative stock, duplicate or invalid item ids.
base::Status Validate(const SeckillActivity& activity);

// The largest quantity one purchase may ask for; larger requests are bad input, not a sale.
inline constexpr int64_t kMaxQuantityPerPurchase = 100;
// Bounds that keep every number exact in Redis's Lua (doubles) and in 64-bit arithmetic.
inline constexpr int64_t kMaxTimeMs = 253'402'300'799'999;  // 9999-12-31T23:59:59.999Z
inline constexpr int64_t kMaxUnits = 1'000'000'000'000;     // stock of one activity
inline constexpr double kMinRatePerSecond = 0.001;          // a slower limit is no limit

base::Status ValidatePurchase(std::string_view user_id, int64_t quantity);

}  // namespace flashsale::core
