#include "core/activity.h"

#include <unordered_set>

#include "base/ids.h"

namespace flashsale::core {

using base::ErrorCode;
using base::MakeError;

std::string_view ToString(StockKind kind) {
  return kind == StockKind::kCounted ? "counted" : "items";
}

WindowPosition SeckillActivity::PositionAt(int64_t now_ms) const {
  if (now_ms < start_ms) return WindowPosition::kBefore;
  if (now_ms >= end_ms) return WindowPosition::kAfter;
  return WindowPosition::kOpen;
}

int64_t SeckillActivity::InitialUnits() const {
  return kind == StockKind::kCounted ? stock : static_cast<int64_t>(items.size());
}

bool IsValidActivityId(std::string_view id) {
  return base::IsValidId(id) && id.find_first_of(":@.") == std::string_view::npos;
}

base::Status Validate(const SeckillActivity& a) {
  if (!IsValidActivityId(a.id)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "activity id '{}' must be 1-64 characters of [A-Za-z0-9_-]", a.id);
  }
  if (a.start_ms < 0 || a.end_ms <= a.start_ms || a.end_ms > kMaxTimeMs) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "activity '{}': window [{}, {}) must be non-empty, within [0, {}]", a.id,
                     a.start_ms, a.end_ms, kMaxTimeMs);
  }
  if (a.title.size() > 200) {
    return MakeError(ErrorCode::kInvalidArgument, "activity '{}': title is over 200 bytes", a.id);
  }
  for (const auto& [name, rate] :
       {std::pair{"user_rate", &a.user_rate}, std::pair{"address_rate", &a.address_rate}}) {
    const bool rate_ok =
        rate->per_second == 0 || (rate->per_second >= kMinRatePerSecond && rate->per_second <= 1e6);
    if (!rate_ok || rate->burst < 1 || rate->burst > 1'000'000) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "activity '{}': {} needs per_second 0 (off) or {} to 1e6, and burst 1 to "
                       "1e6",
                       a.id, name, kMinRatePerSecond);
    }
  }
  if (a.per_user_limit < 1) {
    return MakeError(ErrorCode::kInvalidArgument, "activity '{}': per-user limit {} must be >= 1",
                     a.id, a.per_user_limit);
  }
  if (a.kind == StockKind::kCounted) {
    if (a.stock < 0 || a.stock > kMaxUnits) {
      return MakeError(ErrorCode::kInvalidArgument, "activity '{}': stock {} must be 0 to {}", a.id,
                       a.stock, kMaxUnits);
    }
    if (!a.items.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "activity '{}': counted stock takes no item ids", a.id);
    }
    return {};
  }
  std::unordered_set<std::string_view> seen;
  seen.reserve(a.items.size());
  for (const auto& item : a.items) {
    if (!base::IsValidId(item)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "activity '{}': item id '{}' must be 1-64 characters of [A-Za-z0-9_.:@-]",
                       a.id, item);
    }
    if (!seen.insert(item).second) {
      return MakeError(ErrorCode::kInvalidArgument, "activity '{}': item id '{}' appears twice",
                       a.id, item);
    }
  }
  return {};
}

base::Status ValidatePurchase(std::string_view user_id, int64_t quantity) {
  if (!base::IsValidId(user_id)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "user id must be 1-64 characters of [A-Za-z0-9_.:@-]");
  }
  if (quantity < 1 || quantity > kMaxQuantityPerPurchase) {
    return MakeError(ErrorCode::kInvalidArgument, "quantity {} must be between 1 and {}", quantity,
                     kMaxQuantityPerPurchase);
  }
  return {};
}

}  // namespace flashsale::core
