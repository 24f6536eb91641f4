#pragma once
// An activity, a sale or a lottery: what is sold or drawn, when, and how much each user may take.
// Pure data and rules; the Redis layer turns it into script arguments, the store layer into rows.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/waiting_room.h"

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

// A lottery's prize: `weight` is its share of the draws, `stock` how many can be won.
struct Prize {
  std::string id;    // 1-64 characters of [A-Za-z0-9_.:@-], unique in the lottery
  std::string name;  // for people; 1-100 bytes
  int64_t weight = 1;
  int64_t stock = 0;
};

// How draws reach the draw script.
enum class Admission {
  kDirect,  // the request runs the script itself (the default)
  kQueue,   // the request joins the activity's queue and gets a ticket; consumers draw (S3-3)
  kFifo,    // kQueue with one consumer at a time, under a lock: strict first come, first served
};
std::string_view ToString(Admission admission);  // "direct" | "queue" | "fifo"
std::optional<Admission> AdmissionFrom(std::string_view text);

// What makes an activity a lottery (抽奖) instead of a sale. A draw picks among the prizes and
// "no prize" by weight; see src/keyspace/lua/lottery_draw.lua for the fall-through rule.
struct Lottery {
  std::vector<Prize> prizes;
  int64_t no_prize_weight = 0;
  Admission admission = Admission::kDirect;
  int64_t queue_capacity = 100'000;  // queued draws waiting; beyond it 503 with Retry-After

  int64_t TotalStock() const;
  const Prize* Find(std::string_view prize_id) const;
};

struct Activity {
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
  // A reserved order not paid within this long after it was reserved is cancelled and its unit
  // returned (the expire job). 0: orders never expire.
  int64_t payment_window_ms = 0;
  // Set: a lottery. Its stock is counted (kCounted) and `stock` is the prizes' total; the
  // per-user limit counts draws.
  std::optional<Lottery> lottery;
  // Webhook receivers of this activity's order events only, besides the global ones
  // (service/event_relay.h): each http://host[:port][/path], at most kMaxActivityWebhooks.
  std::vector<std::string> webhook_urls;
  // Set: a sale with a waiting room (core/waiting_room.h): buyers join, are admitted in a fair
  // order at a rate, and a purchase needs the pass of an admitted buyer. Not for lotteries.
  std::optional<WaitingRoom> waiting_room;

  bool is_lottery() const { return lottery.has_value(); }

  // Where `now_ms` falls in [start_ms, end_ms).
  WindowPosition PositionAt(int64_t now_ms) const;
  // The number of units this definition loads.
  int64_t InitialUnits() const;
};

// "counted" | "items" | "lottery": what the API calls the activity's kind.
std::string_view KindName(const Activity& activity);

// Activity ids become part of Redis keys and URLs: 1-64 characters of [A-Za-z0-9_-].
bool IsValidActivityId(std::string_view id);

// Rejects definitions the scripts must never see: bad ids, an empty or inverted window, a
// per-user limit below 1, negative stock, duplicate or invalid item ids.
base::Status Validate(const Activity& activity);

// The largest quantity one purchase may ask for; larger requests are bad input, not a sale.
inline constexpr int64_t kMaxQuantityPerPurchase = 100;
// Bounds that keep every number exact in Redis's Lua (doubles) and in 64-bit arithmetic.
inline constexpr int64_t kMaxTimeMs = 253'402'300'799'999;  // 9999-12-31T23:59:59.999Z
inline constexpr int64_t kMaxUnits = 1'000'000'000'000;     // stock of one activity
inline constexpr double kMinRatePerSecond = 0.001;          // a slower limit is no limit
// Lottery bounds: the total weight stays far below 2^52, the range of a draw's random numbers,
// so the modulo bias of a pick is under 2^-22.
inline constexpr int64_t kMaxPaymentWindowMs = int64_t{30} * 24 * 3600 * 1000;  // 30 days
inline constexpr int64_t kMaxPrizes = 64;
inline constexpr int64_t kMaxWeight = 1'000'000'000;
inline constexpr int64_t kMaxQueueCapacity = 10'000'000;
inline constexpr size_t kMaxActivityWebhooks = 8;
inline constexpr size_t kMaxWebhookUrlBytes = 512;

base::Status ValidatePurchase(std::string_view user_id, int64_t quantity);

}  // namespace flashsale::core
