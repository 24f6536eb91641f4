#include "store/records.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/crypto.h"

namespace flashsale::store::records {

using base::ErrorCode;
using base::MakeError;

std::string JoinWebhookUrls(const std::vector<std::string>& urls) {
  std::string text;
  for (const std::string& url : urls) {
    if (!text.empty()) text += '\n';
    text += url;
  }
  return text;
}

void SetWaitingRoomFromColumn(core::Activity& activity, std::string_view text) {
  auto room = core::DecodeWaitingRoom(text);
  if (room.ok()) {
    activity.waiting_room = *room;
    return;
  }
  spdlog::error("activity '{}': {}; it stays closed", activity.id, room.error().ToString());
  activity.open = false;
}

std::vector<std::string> SplitWebhookUrls(std::string_view text) {
  std::vector<std::string> urls;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (end != 0) urls.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return urls;
}

std::array<SqlValue, 18> ActivityInsertValues(const core::Activity& a, const std::string& lottery,
                                              const std::string& webhooks, const std::string& room,
                                              int64_t now_ms) {
  return {a.id,
          a.title,
          core::ToString(a.kind),
          a.start_ms,
          a.end_ms,
          a.per_user_limit,
          int64_t{a.open},
          a.InitialUnits(),
          a.user_rate.per_second,
          a.user_rate.burst,
          a.address_rate.per_second,
          a.address_rate.burst,
          now_ms,
          now_ms,
          lottery,
          a.payment_window_ms,
          webhooks,
          room};
}

std::array<SqlValue, 14> ActivityUpdateValues(const core::Activity& merged,
                                              const std::string& webhooks, const std::string& room,
                                              std::string_view id, int64_t now_ms) {
  const core::Activity& a = merged;
  return {a.title,
          a.start_ms,
          a.end_ms,
          a.per_user_limit,
          int64_t{a.open},
          a.user_rate.per_second,
          a.user_rate.burst,
          a.address_rate.per_second,
          a.address_rate.burst,
          a.payment_window_ms,
          webhooks,
          room,
          now_ms,
          id};
}

base::Result<core::Activity> MergeUpdate(const ActivityRecord& current,
                                         const ActivityUpdate& update) {
  core::Activity a = current.activity;
  if (update.title) a.title = *update.title;
  if (update.start_ms) a.start_ms = *update.start_ms;
  if (update.end_ms) a.end_ms = *update.end_ms;
  if (update.per_user_limit) a.per_user_limit = *update.per_user_limit;
  if (update.open) a.open = *update.open;
  if (update.user_rate) a.user_rate = *update.user_rate;
  if (update.address_rate) a.address_rate = *update.address_rate;
  if (update.payment_window_ms) a.payment_window_ms = *update.payment_window_ms;
  if (update.webhook_urls) a.webhook_urls = *update.webhook_urls;
  if (update.waiting_room) a.waiting_room = *update.waiting_room;
  a.items.clear();
  if (auto valid = core::Validate(a); !valid) return valid.error();
  return a;
}

base::Status CheckAddedStock(std::string_view id, const ActivityRecord& current, int64_t units,
                             std::span<const std::string> items) {
  const bool itemised = current.activity.kind == core::StockKind::kItemised;
  if (units < 1 || (itemised && static_cast<int64_t>(items.size()) != units) ||
      (!itemised && !items.empty())) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "add {} units to '{}': must be >= 1, and item ids exactly for itemised stock",
                     units, id);
  }
  if (current.total_units + units > core::kMaxUnits) {
    return MakeError(ErrorCode::kInvalidArgument, "'{}' would hold over {} units", id,
                     core::kMaxUnits);
  }
  if (itemised) {
    core::Activity check = current.activity;
    check.items.assign(items.begin(), items.end());
    if (auto valid = core::Validate(check); !valid) return valid.error();
  }
  return {};
}

std::array<SqlValue, 11> OrderInsertValues(const OrderRecord& order, const std::string& items,
                                           int64_t now_ms) {
  return {order.order_id,
          order.activity_id,
          order.user_id,
          order.quantity,
          items,
          ToString(order.state),
          int64_t{order.single_unit},
          order.created_ms,
          now_ms,
          order.stream_id,
          order.draw_no};
}

base::Result<std::vector<WrittenMark>> HighestWritten(std::span<const OrderRecord> orders) {
  std::vector<WrittenMark> marks;  // a batch is one activity's, in practice: a linear search
  for (const OrderRecord& order : orders) {
    if (order.written.epoch < 0 || order.written.seq < 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "order '{}': write sequence ({}, {}) is negative", order.order_id,
                       order.written.epoch, order.written.seq);
    }
    if (order.written.zero()) continue;
    auto mark = std::find_if(marks.begin(), marks.end(), [&](const WrittenMark& m) {
      return m.activity_id == order.activity_id;
    });
    if (mark == marks.end()) {
      marks.push_back({order.activity_id, order.written});
    } else if (order.written > mark->written) {
      mark->written = order.written;
    }
  }
  // Raised in one order by every writer: two writers of the same activities lock their rows in
  // the same order.
  std::sort(marks.begin(), marks.end(), [](const WrittenMark& a, const WrittenMark& b) {
    return a.activity_id < b.activity_id;
  });
  return marks;
}

std::string EventId(std::string_view order_id, std::string_view state) {
  std::string id;
  id.reserve(order_id.size() + 1 + state.size());
  id.append(order_id).append("/").append(state);
  return id;
}

std::string_view InsertedEventState(const OrderRecord& order) {
  if (order.state != OrderState::kReserved) return ToString(order.state);
  return order.draw_no > 0 ? kEventWon : kEventReserved;
}

base::Status CheckRefused(std::span<const RefusedOrder> orders) {
  for (const RefusedOrder& order : orders) {
    for (std::string_view id :
         {std::string_view(order.order_id), std::string_view(order.activity_id)}) {
      if (id.empty() || id.size() > 64) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "refused order '{}' of '{}': ids must be 1..64 bytes",
                         order.order_id.substr(0, 64), order.activity_id.substr(0, 64));
      }
    }
  }
  return {};
}

base::Status CheckAnswers(std::span<const AnswerCount> counts) {
  for (const AnswerCount& answer : counts) {
    if (answer.activity_id.empty() || answer.activity_id.size() > 64 || answer.word.empty() ||
        answer.word.size() > 32 || answer.count < 1) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "answer count '{}' of '{}': {} (ids 1..64 bytes, words 1..32, counts >= 1)",
                       answer.word.substr(0, 32), answer.activity_id.substr(0, 64), answer.count);
    }
  }
  return {};
}

base::Status CheckEventsRead(int64_t after, int64_t limit) {
  if (after < 0 || limit < 1 || limit > kMaxEventsPerRead) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "events after {} (limit {}): the cursor must be >= 0 and the limit 1..{}",
                     after, limit, kMaxEventsPerRead);
  }
  return {};
}

int64_t StatesMask(OrderStates states) {
  return (states.reserved ? 1 : 0) | (states.paid ? 2 : 0) | (states.cancelled ? 4 : 0);
}

namespace {
constexpr std::string_view kCursorVersion = "1\n";
}  // namespace

std::string EncodeOrderCursor(std::string_view activity_id, std::string_view last_order_id) {
  std::string payload(kCursorVersion);
  payload.append(activity_id).append("\n").append(last_order_id).append("\n");
  return base::Base64UrlEncode(payload);
}

base::Result<std::string> DecodeOrderCursor(std::string_view activity_id, std::string_view cursor) {
  if (cursor.empty()) return std::string();
  const auto bad = [&](std::string_view why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cursor '{}' is not one a page of activity '{}' gave ({}): start again "
                     "without a cursor",
                     CutTo(cursor, 120), activity_id, why);
  };
  std::string payload;
  if (cursor.size() > 400 || !base::Base64UrlDecode(cursor, payload)) return bad("not base64url");
  std::string_view rest = payload;
  if (!rest.starts_with(kCursorVersion)) return bad("unknown version");
  rest.remove_prefix(kCursorVersion.size());
  if (!rest.starts_with(activity_id) || rest.substr(activity_id.size(), 1) != "\n") {
    return bad("another activity's");
  }
  rest.remove_prefix(activity_id.size() + 1);
  if (rest.size() < 2 || !rest.ends_with('\n')) return bad("cut short");
  rest.remove_suffix(1);
  return std::string(rest);
}

base::Status CheckOrdersPage(int64_t limit, OrderStates states) {
  if (limit < 1 || limit > kMaxOrdersPerPage) {
    return MakeError(ErrorCode::kInvalidArgument, "a page of orders holds 1 to {}, not {}",
                     kMaxOrdersPerPage, limit);
  }
  if (states.Empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "a page of orders needs one state at least");
  }
  return {};
}

OrderPage PageOf(std::string_view activity_id, std::vector<OrderRecord> rows, int64_t limit) {
  OrderPage page;
  if (static_cast<int64_t>(rows.size()) > limit) {
    rows.resize(static_cast<size_t>(limit));
    page.next = EncodeOrderCursor(activity_id, rows.back().order_id);
  }
  page.orders = std::move(rows);
  return page;
}

std::string_view CutTo(std::string_view text, size_t bytes) {
  if (text.size() <= bytes) return text;
  size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

void MarkCancelled(OrderRecord& order, int64_t now_ms) {
  order.state = OrderState::kCancelled;
  order.state_ms = now_ms;
}

PayOutcome PayOutcomeFor(OrderState state) {
  switch (state) {
    case OrderState::kReserved:
      return PayOutcome::kPaid;
    case OrderState::kCancelled:
      return PayOutcome::kRefused;
    case OrderState::kPaid:
      break;
  }
  return PayOutcome::kAlreadyPaid;
}

base::Error NoActivity(std::string_view id) {
  return MakeError(ErrorCode::kNotFound, "no activity '{}'", id);
}

base::Error HasOrders(std::string_view id, int64_t orders) {
  return MakeError(ErrorCode::kInvalidArgument,
                   "'{}' has {} order(s): only an activity that sold nothing can be deleted (close "
                   "it instead)",
                   id, orders);
}

base::Error NoOrder(std::string_view order_id) {
  return MakeError(ErrorCode::kNotFound, "no order '{}'", order_id);
}

base::Error ActivityExists(std::string_view id) {
  return MakeError(ErrorCode::kAlreadyExists, "activity '{}' exists already", id);
}

base::Error ItemExists(std::string_view activity_id, std::string_view item) {
  return MakeError(ErrorCode::kAlreadyExists, "activity '{}' already has item '{}'", activity_id,
                   item);
}

int64_t ReportStepSeconds(int64_t first_ms, int64_t last_ms) {
  const int64_t span_s = last_ms / 1000 - first_ms / 1000 + 1;
  if (span_s <= kMaxReportBuckets) return 1;
  return (span_s + kMaxReportBuckets - 1) / kMaxReportBuckets;
}

std::string ReportBucketsSql(int64_t first_ms, int64_t step_s) {
  const int64_t base_ms = first_ms / 1000 * 1000;
  return fmt::format(
      "SELECT created_ms - ((created_ms - {0}) % {1}) AS bucket_ms, COUNT(*), "
      "CAST(COALESCE(SUM(quantity), 0) AS SIGNED) FROM orders WHERE activity_id = ? AND "
      "created_ms >= {0} GROUP BY bucket_ms ORDER BY bucket_ms",
      base_ms, step_s * 1000);
}

}  // namespace flashsale::store::records
