#include "core/activity.h"

#include <unordered_set>

#include "base/ids.h"

namespace flashsale::core {

using base::ErrorCode;
using base::MakeError;

std::string_view ToString(StockKind kind) {
  return kind == StockKind::kCounted ? "counted" : "items";
}

std::string_view ToString(Admission admission) {
  switch (admission) {
    case Admission::kDirect:
      return "direct";
    case Admission::kQueue:
      return "queue";
    case Admission::kFifo:
      return "fifo";
  }
  return "direct";
}

std::optional<Admission> AdmissionFrom(std::string_view text) {
  for (auto admission : {Admission::kDirect, Admission::kQueue, Admission::kFifo}) {
    if (ToString(admission) == text) return admission;
  }
  return std::nullopt;
}

std::string_view KindName(const Activity& activity) {
  return activity.is_lottery() ? "lottery" : ToString(activity.kind);
}

int64_t Lottery::TotalStock() const {
  int64_t total = 0;
  for (const auto& prize : prizes) total += prize.stock;
  return total;
}

const Prize* Lottery::Find(std::string_view prize_id) const {
  for (const auto& prize : prizes) {
    if (prize.id == prize_id) return &prize;
  }
  return nullptr;
}

WindowPosition Activity::PositionAt(int64_t now_ms) const {
  if (now_ms < start_ms) return WindowPosition::kBefore;
  if (now_ms >= end_ms) return WindowPosition::kAfter;
  return WindowPosition::kOpen;
}

int64_t Activity::InitialUnits() const {
  return kind == StockKind::kCounted ? stock : static_cast<int64_t>(items.size());
}

bool IsValidActivityId(std::string_view id) {
  return base::IsValidId(id) && id.find_first_of(":@.") == std::string_view::npos;
}

namespace {

base::Status ValidateLottery(const Activity& a) {
  const Lottery& lottery = *a.lottery;
  if (a.kind != StockKind::kCounted) {
    return MakeError(ErrorCode::kInvalidArgument, "lottery '{}': prizes are counted stock", a.id);
  }
  if (lottery.prizes.empty() || static_cast<int64_t>(lottery.prizes.size()) > kMaxPrizes) {
    return MakeError(ErrorCode::kInvalidArgument, "lottery '{}': needs 1 to {} prizes", a.id,
                     kMaxPrizes);
  }
  if (lottery.no_prize_weight < 0 || lottery.no_prize_weight > kMaxWeight) {
    return MakeError(ErrorCode::kInvalidArgument, "lottery '{}': no_prize_weight must be 0 to {}",
                     a.id, kMaxWeight);
  }
  if (lottery.queue_capacity < 1 || lottery.queue_capacity > kMaxQueueCapacity) {
    return MakeError(ErrorCode::kInvalidArgument, "lottery '{}': queue_capacity must be 1 to {}",
                     a.id, kMaxQueueCapacity);
  }
  std::unordered_set<std::string_view> seen;
  int64_t total_weight = lottery.no_prize_weight;
  for (const auto& prize : lottery.prizes) {
    // ':' separates the prize ids in the draw script's keys and replies.
    if (!base::IsValidId(prize.id) || prize.id.find_first_of(" :") != std::string::npos) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "lottery '{}': prize id '{}' must be 1-64 characters of [A-Za-z0-9_.@-] "
                       "(no ':')",
                       a.id, prize.id);
    }
    if (!seen.insert(prize.id).second) {
      return MakeError(ErrorCode::kInvalidArgument, "lottery '{}': prize id '{}' appears twice",
                       a.id, prize.id);
    }
    if (prize.name.empty() || prize.name.size() > 100) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "lottery '{}': prize '{}' needs a name of 1 to 100 bytes", a.id, prize.id);
    }
    if (prize.weight < 1 || prize.weight > kMaxWeight) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "lottery '{}': prize '{}' weight {} must be 1 to {}", a.id, prize.id,
                       prize.weight, kMaxWeight);
    }
    if (prize.stock < 0 || prize.stock > kMaxUnits) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "lottery '{}': prize '{}' stock {} must be 0 to {}", a.id, prize.id,
                       prize.stock, kMaxUnits);
    }
    total_weight += prize.weight;
  }
  if (total_weight > kMaxPrizes * kMaxWeight) {
    return MakeError(ErrorCode::kInvalidArgument, "lottery '{}': weights are too large", a.id);
  }
  if (a.stock != lottery.TotalStock()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "lottery '{}': stock {} must be the prizes' total {}", a.id, a.stock,
                     lottery.TotalStock());
  }
  return {};
}

// The activity's own webhook receivers: a few, each an https:// or http:// URL of sane length
// without spaces,
// line breaks or a fragment, none twice. (The relay parses each fully, service/event_relay.h; the
// admin API checks them with the same parser before they get here.)
base::Status ValidateWebhookUrls(const Activity& a) {
  if (a.webhook_urls.size() > kMaxActivityWebhooks) {
    return MakeError(ErrorCode::kInvalidArgument, "activity '{}': at most {} webhook_urls", a.id,
                     kMaxActivityWebhooks);
  }
  for (size_t i = 0; i < a.webhook_urls.size(); ++i) {
    const std::string& url = a.webhook_urls[i];
    if (!(url.starts_with("https://") || url.starts_with("http://")) ||
        url.size() > kMaxWebhookUrlBytes || url.find_first_of(" \t\r\n#") != std::string::npos) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          "activity '{}': webhook_urls[{}] must be https:// or http://host[:port][/path], at "
          "most {} bytes, without spaces or a fragment",
          a.id, i, kMaxWebhookUrlBytes);
    }
    for (size_t j = 0; j < i; ++j) {
      if (a.webhook_urls[j] == url) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "activity '{}': webhook_urls[{}] is there twice", a.id, i);
      }
    }
  }
  return {};
}

}  // namespace

base::Status Validate(const Activity& a) {
  if (!IsValidActivityId(a.id)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "activity id '{}' must be 1-64 characters of [A-Za-z0-9_-]", a.id);
  }
  if (a.end_ms <= a.start_ms) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "activity '{}': end_ms must be after start_ms ({} is not after {})", a.id,
                     a.end_ms, a.start_ms);
  }
  if (a.start_ms < 0 || a.end_ms > kMaxTimeMs) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "activity '{}': window [{}, {}) must be within [0, {}]", a.id, a.start_ms,
                     a.end_ms, kMaxTimeMs);
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
  if (a.payment_window_ms < 0 || a.payment_window_ms > kMaxPaymentWindowMs) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "activity '{}': payment_window_ms must be 0 (never expire) to {}", a.id,
                     kMaxPaymentWindowMs);
  }
  if (a.lottery && a.payment_window_ms != 0) {
    // A cancelled win is never returned to its prize, so a window would destroy prizes.
    return MakeError(ErrorCode::kInvalidArgument,
                     "lottery '{}': payment_window_ms must be 0 (a lottery's wins do not expire)",
                     a.id);
  }
  if (auto valid = ValidateWebhookUrls(a); !valid) return valid;
  if (a.waiting_room) {
    if (a.lottery) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "lottery '{}': waiting_room is for sales (a lottery has its admission "
                       "queue)",
                       a.id);
    }
    if (auto room = ValidateWaitingRoom(*a.waiting_room); !room) {
      return MakeError(ErrorCode::kInvalidArgument, "activity '{}': {}", a.id,
                       room.error().message);
    }
  }
  if (a.per_user_limit < 1) {
    return MakeError(ErrorCode::kInvalidArgument, "activity '{}': per-user limit {} must be >= 1",
                     a.id, a.per_user_limit);
  }
  if (a.lottery) {
    if (auto valid = ValidateLottery(a); !valid) return valid;
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
