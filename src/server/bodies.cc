#include "server/bodies.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <set>

#include "base/ids.h"

namespace flashsale::server {

namespace json = boost::json;
using base::ErrorCode;
using base::MakeError;
using base::Result;

namespace {

constexpr int64_t kHourMs = 3'600'000;
// Times in milliseconds from 1970-01-12 to 1973-03-03 are, in practice, times in seconds from 2001
// to 5138: a create refuses them with a message saying so.
constexpr int64_t kSecondsFrom = 1'000'000'000;
constexpr int64_t kSecondsUntil = 100'000'000'000;

Result<json::object> ParseObject(std::string_view body) {
  json::parse_options options;
  options.max_depth = 8;
  boost::system::error_code ec;
  json::value value = json::parse(body, ec, {}, options);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "body is not JSON: {}", ec.message());
  if (!value.is_object())
    return MakeError(ErrorCode::kInvalidArgument, "body must be a JSON object");
  return std::move(value.as_object());
}

// Reads the fields of one object, refusing unknown ones and wrong types.
class Fields {
 public:
  Fields(const json::object& object, std::string_view where) : object_(object), where_(where) {}

  base::Status Only(std::initializer_list<std::string_view> allowed) const {
    for (const auto& [key, value] : object_) {
      bool known = false;
      for (auto name : allowed) known = known || key == name;
      if (!known) {
        return MakeError(ErrorCode::kInvalidArgument, "unknown field '{}{}'", where_,
                         std::string_view(key));
      }
    }
    return {};
  }
  const json::value* Find(std::string_view name) const { return object_.if_contains(name); }

  Result<std::optional<int64_t>> Int(std::string_view name) const {
    const json::value* v = Find(name);
    if (v == nullptr) return std::optional<int64_t>();
    if (v->is_int64()) return std::optional<int64_t>(v->as_int64());
    if (v->is_uint64() && v->as_uint64() <= static_cast<uint64_t>(INT64_MAX)) {
      return std::optional<int64_t>(static_cast<int64_t>(v->as_uint64()));
    }
    return Wrong(name, "an integer");
  }
  Result<std::optional<double>> Number(std::string_view name) const {
    const json::value* v = Find(name);
    if (v == nullptr) return std::optional<double>();
    if (v->is_number()) return std::optional<double>(v->to_number<double>());
    return Wrong(name, "a number");
  }
  Result<std::optional<bool>> Bool(std::string_view name) const {
    const json::value* v = Find(name);
    if (v == nullptr) return std::optional<bool>();
    if (v->is_bool()) return std::optional<bool>(v->as_bool());
    return Wrong(name, "true or false");
  }
  Result<std::optional<std::string>> String(std::string_view name) const {
    const json::value* v = Find(name);
    if (v == nullptr) return std::optional<std::string>();
    if (v->is_string()) return std::optional<std::string>(std::string(v->as_string()));
    return Wrong(name, "a string");
  }
  Result<std::optional<std::vector<std::string>>> Strings(std::string_view name) const {
    const json::value* v = Find(name);
    if (v == nullptr) return std::optional<std::vector<std::string>>();
    if (!v->is_array()) return Wrong(name, "an array of strings");
    std::vector<std::string> out;
    out.reserve(v->as_array().size());
    for (const auto& element : v->as_array()) {
      if (!element.is_string()) return Wrong(name, "an array of strings");
      out.emplace_back(element.as_string());
    }
    return std::optional<std::vector<std::string>>(std::move(out));
  }
  Result<std::optional<core::RateLimit>> Rate(std::string_view name) const {
    const json::value* v = Find(name);
    if (v == nullptr) return std::optional<core::RateLimit>();
    if (!v->is_object()) return Wrong(name, "an object {\"per_second\": r, \"burst\": b}");
    Fields rate(v->as_object(), fmt::format("{}.", name));
    if (auto only = rate.Only({"per_second", "burst"}); !only) return only.error();
    auto per_second = rate.Number("per_second");
    auto burst = rate.Int("burst");
    if (!per_second) return std::move(per_second).error();
    if (!burst) return std::move(burst).error();
    return std::optional<core::RateLimit>(
        core::RateLimit{per_second->value_or(0), burst->value_or(1)});
  }

 private:
  base::Error Wrong(std::string_view name, std::string_view what) const {
    return MakeError(ErrorCode::kInvalidArgument, "field '{}{}' must be {}", where_, name, what);
  }
  const json::object& object_;
  std::string where_;
};

// Unwraps a Result<std::optional<T>> into `out` when present; returns the error otherwise.
#define FLASHSALE_FIELD(out, expr)                 \
  do {                                             \
    auto field_ = (expr);                          \
    if (!field_) return std::move(field_).error(); \
    if (field_->has_value()) (out) = **field_;     \
  } while (false)

// A lottery's fields: "prizes": [{"id", "name", "weight", "stock"}, ...], "no_prize_weight",
// "admission" ("direct" | "queue" | "fifo"), "queue_capacity".
Result<core::Lottery> ParseLottery(const Fields& fields) {
  core::Lottery lottery;
  const json::value* prizes = fields.Find("prizes");
  if (prizes == nullptr || !prizes->is_array() || prizes->as_array().empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "field 'prizes' must be a non-empty array of {{\"id\", \"name\", "
                     "\"weight\", \"stock\"}}");
  }
  for (const json::value& entry : prizes->as_array()) {
    if (!entry.is_object()) {
      return MakeError(ErrorCode::kInvalidArgument, "each of 'prizes' must be an object");
    }
    Fields prize_fields(entry.as_object(), "prizes[].");
    if (auto only = prize_fields.Only({"id", "name", "weight", "stock"}); !only) {
      return only.error();
    }
    core::Prize prize;
    FLASHSALE_FIELD(prize.id, prize_fields.String("id"));
    FLASHSALE_FIELD(prize.name, prize_fields.String("name"));
    FLASHSALE_FIELD(prize.weight, prize_fields.Int("weight"));
    FLASHSALE_FIELD(prize.stock, prize_fields.Int("stock"));
    if (prize.name.empty()) prize.name = prize.id;
    lottery.prizes.push_back(std::move(prize));
  }
  FLASHSALE_FIELD(lottery.no_prize_weight, fields.Int("no_prize_weight"));
  FLASHSALE_FIELD(lottery.queue_capacity, fields.Int("queue_capacity"));
  std::string admission = "direct";
  FLASHSALE_FIELD(admission, fields.String("admission"));
  auto parsed = core::AdmissionFrom(admission);
  if (!parsed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "field 'admission' must be \"direct\", \"queue\" or \"fifo\"");
  }
  lottery.admission = *parsed;
  return lottery;
}

}  // namespace

Result<JobBody> ParseJobBody(std::string_view body) {
  JobBody job;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return job;
  auto object = ParseObject(body);
  if (!object) return std::move(object).error();
  Fields fields(*object, "");
  if (auto only = fields.Only({"activity_id", "repair"}); !only) return only.error();
  FLASHSALE_FIELD(job.activity_id, fields.String("activity_id"));
  FLASHSALE_FIELD(job.repair, fields.Bool("repair"));
  if (!job.activity_id.empty() && !core::IsValidActivityId(job.activity_id)) {
    return MakeError(ErrorCode::kInvalidArgument, "field 'activity_id' is not an activity id");
  }
  return job;
}

Result<int64_t> ParseTicketQuery(std::string_view query) {
  constexpr int64_t kMaxWaitMs = 25'000;
  if (query.empty()) return int64_t{0};
  constexpr std::string_view kWait = "wait_ms=";
  int64_t wait_ms = -1;
  if (query.starts_with(kWait)) {
    const std::string_view digits = query.substr(kWait.size());
    int64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec == std::errc() && end == digits.data() + digits.size()) wait_ms = value;
  }
  if (wait_ms < 0 || wait_ms > kMaxWaitMs) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the query must be empty or wait_ms=N with N from 0 to {}", kMaxWaitMs);
  }
  return wait_ms;
}

base::Status ParseDrawBody(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return {};
  auto object = ParseObject(body);
  if (!object) return std::move(object).error();
  return Fields(*object, "").Only({});
}

Result<int64_t> ParsePurchaseBody(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return int64_t{1};
  auto object = ParseObject(body);
  if (!object) return std::move(object).error();
  Fields fields(*object, "");
  if (auto only = fields.Only({"quantity"}); !only) return only.error();
  int64_t quantity = 1;
  FLASHSALE_FIELD(quantity, fields.Int("quantity"));
  if (quantity < 1 || quantity > core::kMaxQuantityPerPurchase) {
    return MakeError(ErrorCode::kInvalidArgument, "quantity must be between 1 and {}",
                     core::kMaxQuantityPerPurchase);
  }
  return quantity;
}

Result<core::SeckillActivity> ParseActivityBody(std::string_view body, int64_t now_ms) {
  auto object = ParseObject(body);
  if (!object) return std::move(object).error();
  Fields fields(*object, "");
  if (auto only =
          fields.Only({"id", "title", "kind", "start_ms", "end_ms", "per_user_limit", "open",
                       "stock", "items", "user_rate", "address_rate", "prizes", "no_prize_weight",
                       "admission", "queue_capacity", "payment_window_ms"});
      !only) {
    return only.error();
  }
  core::SeckillActivity a;
  FLASHSALE_FIELD(a.id, fields.String("id"));
  if (a.id.empty()) return MakeError(ErrorCode::kInvalidArgument, "field 'id' is required");
  FLASHSALE_FIELD(a.title, fields.String("title"));
  std::string kind = "counted";
  FLASHSALE_FIELD(kind, fields.String("kind"));
  if (kind != "counted" && kind != "items" && kind != "lottery") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "field 'kind' must be \"counted\", \"items\" or \"lottery\"");
  }
  const bool lottery = kind == "lottery";
  for (auto name : {"prizes", "no_prize_weight", "admission", "queue_capacity"}) {
    if (!lottery && fields.Find(name) != nullptr) {
      return MakeError(ErrorCode::kInvalidArgument, "field '{}' is for kind \"lottery\"", name);
    }
  }
  if (lottery) {
    if (fields.Find("stock") != nullptr || fields.Find("items") != nullptr) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "kind \"lottery\" takes its stock from 'prizes', not 'stock' or 'items'");
    }
    auto parsed = ParseLottery(fields);
    if (!parsed) return std::move(parsed).error();
    a.lottery = std::move(*parsed);
    a.stock = a.lottery->TotalStock();
  }
  a.kind = kind == "items" ? core::StockKind::kItemised : core::StockKind::kCounted;
  a.start_ms = now_ms;
  FLASHSALE_FIELD(a.start_ms, fields.Int("start_ms"));
  if (a.start_ms < 0 || a.start_ms >= core::kMaxTimeMs) {
    return MakeError(ErrorCode::kInvalidArgument, "field 'start_ms' must be 0 to {}",
                     core::kMaxTimeMs - 1);
  }
  a.end_ms = std::min(a.start_ms + kHourMs, core::kMaxTimeMs);
  FLASHSALE_FIELD(a.end_ms, fields.Int("end_ms"));
  FLASHSALE_FIELD(a.per_user_limit, fields.Int("per_user_limit"));
  FLASHSALE_FIELD(a.open, fields.Bool("open"));
  FLASHSALE_FIELD(a.stock, fields.Int("stock"));
  FLASHSALE_FIELD(a.items, fields.Strings("items"));
  FLASHSALE_FIELD(a.user_rate, fields.Rate("user_rate"));
  FLASHSALE_FIELD(a.address_rate, fields.Rate("address_rate"));
  FLASHSALE_FIELD(a.payment_window_ms, fields.Int("payment_window_ms"));
  if (a.kind == core::StockKind::kItemised && fields.Find("stock") != nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "kind \"items\" takes its stock from 'items', not 'stock'");
  }
  if (a.kind == core::StockKind::kCounted && fields.Find("items") != nullptr) {
    return MakeError(ErrorCode::kInvalidArgument, "kind \"counted\" takes 'stock', not 'items'");
  }
  for (auto name : {"start_ms", "end_ms"}) {
    const int64_t value = std::string_view(name) == "start_ms" ? a.start_ms : a.end_ms;
    if (fields.Find(name) != nullptr && value >= kSecondsFrom && value < kSecondsUntil) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "{} {} looks like seconds; send milliseconds ({}000)", name, value, value);
    }
  }
  if (auto valid = core::Validate(a); !valid) return valid.error();
  if (a.kind == core::StockKind::kCounted && !lottery && fields.Find("stock") == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "field 'stock' is required: the units on sale (or \"kind\":\"items\" with "
                     "'items')");
  }
  if (a.kind == core::StockKind::kItemised && a.items.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "kind \"items\" needs a non-empty 'items' array: the item ids on sale");
  }
  if (a.end_ms <= now_ms) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the window is already over: end_ms {} is before now ({})", a.end_ms, now_ms);
  }
  // No title: the id, which the operator chose and which is unique, reads better on the buyer
  // page and the dashboard than an empty heading.
  if (a.title.empty()) a.title = a.id;
  return a;
}

Result<store::ActivityUpdate> ParseActivityUpdate(std::string_view body) {
  auto object = ParseObject(body);
  if (!object) return std::move(object).error();
  Fields fields(*object, "");
  if (auto only = fields.Only({"title", "start_ms", "end_ms", "per_user_limit", "open", "user_rate",
                               "address_rate", "payment_window_ms"});
      !only) {
    return only.error();
  }
  store::ActivityUpdate update;
  FLASHSALE_FIELD(update.title, fields.String("title"));
  FLASHSALE_FIELD(update.start_ms, fields.Int("start_ms"));
  FLASHSALE_FIELD(update.end_ms, fields.Int("end_ms"));
  FLASHSALE_FIELD(update.per_user_limit, fields.Int("per_user_limit"));
  FLASHSALE_FIELD(update.open, fields.Bool("open"));
  FLASHSALE_FIELD(update.user_rate, fields.Rate("user_rate"));
  FLASHSALE_FIELD(update.address_rate, fields.Rate("address_rate"));
  FLASHSALE_FIELD(update.payment_window_ms, fields.Int("payment_window_ms"));
  if (object->empty()) return MakeError(ErrorCode::kInvalidArgument, "nothing to update");
  return update;
}

Result<StockBody> ParseStockBody(std::string_view body) {
  auto object = ParseObject(body);
  if (!object) return std::move(object).error();
  Fields fields(*object, "");
  if (auto only = fields.Only({"units", "items"}); !only) return only.error();
  StockBody stock;
  FLASHSALE_FIELD(stock.units, fields.Int("units"));
  FLASHSALE_FIELD(stock.items, fields.Strings("items"));
  if (!stock.items.empty()) {
    if (fields.Find("units") != nullptr &&
        stock.units != static_cast<int64_t>(stock.items.size())) {
      return MakeError(ErrorCode::kInvalidArgument, "'units' must equal the number of 'items'");
    }
    stock.units = static_cast<int64_t>(stock.items.size());
    std::set<std::string_view> seen;
    for (const auto& item : stock.items) {
      if (!base::IsValidId(item)) {
        return MakeError(ErrorCode::kInvalidArgument, "item id '{}' is not valid", item);
      }
      if (!seen.insert(item).second) {
        return MakeError(ErrorCode::kInvalidArgument, "item id '{}' appears twice", item);
      }
    }
  }
  if (stock.units < 1 ||
      stock.units > 10'000'000) {  // per call; the activity's total is bounded too
    return MakeError(ErrorCode::kInvalidArgument,
                     "give 'units' (1 to 10,000,000) or a non-empty 'items' array");
  }
  return stock;
}

Result<TokenBody> ParseTokenBody(std::string_view body) {
  auto object = ParseObject(body);
  if (!object) return std::move(object).error();
  Fields fields(*object, "");
  if (auto only = fields.Only({"user_id", "ttl_s"}); !only) return only.error();
  TokenBody token;
  FLASHSALE_FIELD(token.user_id, fields.String("user_id"));
  FLASHSALE_FIELD(token.ttl_s, fields.Int("ttl_s"));
  if (!base::IsValidId(token.user_id)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "field 'user_id' must be 1-64 characters of [A-Za-z0-9_.:@-]");
  }
  if (token.ttl_s < 1 || token.ttl_s > 366 * 86400) {
    return MakeError(ErrorCode::kInvalidArgument, "field 'ttl_s' must be 1 to 31622400");
  }
  return token;
}

}  // namespace flashsale::server
