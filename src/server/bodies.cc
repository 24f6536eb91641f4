#include "server/bodies.h"

#include <algorithm>
#include <array>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cctype>
#include <charconv>
#include <set>
#include <utility>

#include "base/ids.h"
#include "service/event_relay.h"

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

#define FLASHSALE_ROOM_FIELD(out, expr)            \
  do {                                             \
    auto field_ = (expr);                          \
    if (!field_) return std::move(field_).error(); \
    if (field_->has_value()) (out) = **field_;     \
  } while (false)

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
  // "waiting_room": {opens_before_ms, admit_per_s, pass_ttl_ms, max_waiting} (each optional, at
  // core::WaitingRoom's defaults), or null: none. Outer nullopt: the field is absent.
  Result<std::optional<std::optional<core::WaitingRoom>>> Room(std::string_view name) const {
    using Out = std::optional<std::optional<core::WaitingRoom>>;
    const json::value* v = Find(name);
    if (v == nullptr) return Out();
    if (v->is_null()) return Out(std::optional<core::WaitingRoom>());
    if (!v->is_object()) {
      return Wrong(name,
                   "an object {\"opens_before_ms\", \"admit_per_s\", \"pass_ttl_ms\", "
                   "\"max_waiting\"}, or null (none)");
    }
    Fields room(v->as_object(), fmt::format("{}.", name));
    if (auto only = room.Only({"opens_before_ms", "admit_per_s", "pass_ttl_ms", "max_waiting"});
        !only) {
      return only.error();
    }
    core::WaitingRoom out;
    FLASHSALE_ROOM_FIELD(out.opens_before_ms, room.Int("opens_before_ms"));
    FLASHSALE_ROOM_FIELD(out.admit_per_s, room.Int("admit_per_s"));
    FLASHSALE_ROOM_FIELD(out.pass_ttl_ms, room.Int("pass_ttl_ms"));
    FLASHSALE_ROOM_FIELD(out.max_waiting, room.Int("max_waiting"));
    if (auto valid = core::ValidateWaitingRoom(out); !valid) return valid.error();
    return Out(std::optional<core::WaitingRoom>(out));
  }
  Result<std::optional<core::RateLimit>> Rate(std::string_view name) const {
    const json::value* v = Find(name);
    if (v == nullptr) return std::optional<core::RateLimit>();
    if (v->is_null()) return std::optional<core::RateLimit>(core::RateLimit{});  // off, as GET says
    if (!v->is_object()) {
      return Wrong(name, "an object {\"per_second\": r, \"burst\": b}, or null (off)");
    }
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

// "webhook_urls": an activity's own webhook receivers, each checked as --webhook-url is
// (service::ParseWebhookUrl; its error names the URL with any password redacted).
Result<std::optional<std::vector<std::string>>> WebhookUrls(const Fields& fields) {
  auto urls = fields.Strings("webhook_urls");
  if (!urls || !urls->has_value()) return urls;
  for (const std::string& url : **urls) {
    if (auto parsed = service::ParseWebhookUrl(url); !parsed) {
      return MakeError(ErrorCode::kInvalidArgument, "field 'webhook_urls': {}",
                       parsed.error().message);
    }
  }
  return urls;
}

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

// The fields GET .../admin/activities/{id} returns that the record keeps for itself: accepted
// back (and ignored) so that what the API returns, it accepts.
constexpr std::array<std::string_view, 3> kReadOnlyFields = {"version", "created_ms", "updated_ms"};

bool SameLottery(const core::Lottery& a, const core::Lottery& b) {
  if (a.no_prize_weight != b.no_prize_weight || a.admission != b.admission ||
      a.queue_capacity != b.queue_capacity || a.prizes.size() != b.prizes.size()) {
    return false;
  }
  for (size_t i = 0; i < a.prizes.size(); ++i) {
    const core::Prize& x = a.prizes[i];
    const core::Prize& y = b.prizes[i];
    if (x.id != y.id || x.name != y.name || x.weight != y.weight || x.stock != y.stock) {
      return false;
    }
  }
  return true;
}

// PATCH takes back the fields it cannot change (id, kind, total_units, a lottery's prizes and
// admission) when they equal the record's, and refuses them, naming the field, when they differ.
base::Status CheckUnchanged(const Fields& fields, const store::ActivityRecord& current) {
  const core::Activity& a = current.activity;
  std::optional<std::string> id, kind;
  std::optional<int64_t> total_units;
  FLASHSALE_FIELD(id, fields.String("id"));
  FLASHSALE_FIELD(kind, fields.String("kind"));
  FLASHSALE_FIELD(total_units, fields.Int("total_units"));
  if (id && *id != a.id) {
    return MakeError(ErrorCode::kInvalidArgument, "field 'id' cannot be changed (it is '{}')",
                     a.id);
  }
  if (kind && *kind != core::KindName(a)) {
    return MakeError(ErrorCode::kInvalidArgument, "field 'kind' cannot be changed (it is \"{}\")",
                     core::KindName(a));
  }
  if (total_units && *total_units != current.total_units) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "field 'total_units' cannot be changed by PATCH (it is {}; add stock with "
                     "POST .../stock)",
                     current.total_units);
  }
  const bool lottery_fields =
      fields.Find("prizes") != nullptr || fields.Find("no_prize_weight") != nullptr ||
      fields.Find("admission") != nullptr || fields.Find("queue_capacity") != nullptr;
  if (!lottery_fields) return {};
  if (!a.is_lottery()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "fields 'prizes', 'no_prize_weight', 'admission' and 'queue_capacity' are "
                     "for kind \"lottery\"");
  }
  auto given = ParseLottery(fields);
  if (!given) return std::move(given).error();
  if (!SameLottery(*given, *a.lottery)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "fields 'prizes', 'no_prize_weight', 'admission' and 'queue_capacity' cannot "
                     "be changed once the lottery is created");
  }
  return {};
}

// The key=value pairs of a query string, in order; nullopt for a pair without '=' or a trailing
// '&'. An empty query has none.
std::optional<std::vector<std::pair<std::string_view, std::string_view>>> QueryPairs(
    std::string_view query) {
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (amp != std::string_view::npos && query.empty()) return std::nullopt;  // a trailing '&'
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    pairs.emplace_back(pair.substr(0, eq), pair.substr(eq + 1));
  }
  return pairs;
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

Result<std::string> ParseWebhookRetryBody(std::string_view body) {
  std::string receiver;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return receiver;
  auto object = ParseObject(body);
  if (!object) return std::move(object).error();
  Fields fields(*object, "");
  if (auto only = fields.Only({"receiver"}); !only) return only.error();
  FLASHSALE_FIELD(receiver, fields.String("receiver"));
  if (receiver.size() > 512) {
    return MakeError(ErrorCode::kInvalidArgument, "field 'receiver' is over 512 bytes");
  }
  return receiver;
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

Result<EventsQuery> ParseEventsQuery(std::string_view query) {
  EventsQuery parsed;
  const auto bad = [] {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the query takes after=N (N >= 0), limit=N (1 to 1000) and wait_ms=N (0 to "
                     "25000), each at most once");
  };
  bool seen[3] = {false, false, false};
  const auto pairs = QueryPairs(query);
  if (!pairs) return bad();
  for (const auto& [key, digits] : *pairs) {
    int64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return bad();
    int slot = -1;
    if (key == "after" && value >= 0) {
      slot = 0;
      parsed.after = value;
    } else if (key == "limit" && value >= 1 && value <= 1000) {
      slot = 1;
      parsed.limit = value;
    } else if (key == "wait_ms" && value >= 0 && value <= 25'000) {
      slot = 2;
      parsed.wait_ms = value;
    }
    if (slot < 0 || seen[slot]) return bad();
    seen[slot] = true;
  }
  return parsed;
}

Result<OrdersQuery> ParseOrdersQuery(std::string_view query) {
  OrdersQuery parsed;
  const auto bad = [] {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the query takes after=<cursor> (a page's next), limit=N (1 to {}), "
                     "state=reserved,paid,cancelled (any of them) and format=csv|json, each at "
                     "most once",
                     store::kMaxOrdersPerPage);
  };
  bool seen[4] = {false, false, false, false};
  const auto pairs = QueryPairs(query);
  if (!pairs) return bad();
  for (const auto& [key, value] : *pairs) {
    int slot = -1;
    if (key == "after") {
      slot = 0;
      constexpr std::string_view kBase64Url =
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
      if (value.empty() || value.size() > 400 ||
          value.find_first_not_of(kBase64Url) != std::string_view::npos) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "after= takes the cursor a page gave (its next), as it was");
      }
      parsed.after = value;
    } else if (key == "limit") {
      slot = 1;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed.limit);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
          parsed.limit < 1 || parsed.limit > store::kMaxOrdersPerPage) {
        return bad();
      }
    } else if (key == "state") {
      slot = 2;
      parsed.states = {false, false, false};
      std::string_view rest = value;
      for (;;) {
        size_t comma = rest.find(',');
        size_t skip = 1;
        const size_t encoded = std::min(rest.find("%2C"), rest.find("%2c"));
        if (encoded < comma) {
          comma = encoded;
          skip = 3;
        }
        const std::string_view name = rest.substr(0, comma);
        if (name == "reserved") {
          parsed.states.reserved = true;
        } else if (name == "paid") {
          parsed.states.paid = true;
        } else if (name == "cancelled") {
          parsed.states.cancelled = true;
        } else {
          return MakeError(ErrorCode::kInvalidArgument,
                           "state= takes reserved, paid and cancelled, comma-separated");
        }
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + skip);
      }
    } else if (key == "format") {
      slot = 3;
      if (value == "csv") {
        parsed.format = OrdersFormat::kCsv;
      } else if (value == "json") {
        parsed.format = OrdersFormat::kJson;
      } else {
        return MakeError(ErrorCode::kInvalidArgument, "format= takes csv or json");
      }
    }
    if (slot < 0 || seen[slot]) return bad();
    seen[slot] = true;
  }
  return parsed;
}

namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// How much a media range of an Accept header wants text/csv and application/json: its q (0 to
// 1000, thousandths) and how exactly it names each (2: the type itself, 1: type/*, 0: */*; -1:
// not at all).
struct Preference {
  int q = 0;
  int specificity = -1;
  bool Beats(const Preference& other) const {
    return q != other.q ? q > other.q : specificity > other.specificity;
  }
};

}  // namespace

OrdersFormat OrdersFormatFor(const OrdersQuery& query, std::string_view accept) {
  if (query.format) return *query.format;
  Preference csv;
  Preference json;
  while (!accept.empty()) {
    const size_t comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    const size_t semicolon = range.find(';');
    const std::string_view type = Trim(range.substr(0, semicolon));
    int q = 1000;
    std::string_view params =
        semicolon == std::string_view::npos ? std::string_view() : range.substr(semicolon + 1);
    while (!params.empty()) {
      const size_t next = params.find(';');
      const std::string_view param = Trim(params.substr(0, next));
      params = next == std::string_view::npos ? std::string_view() : params.substr(next + 1);
      if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=') continue;
      // q = 0(.ddd) or 1(.000): read as thousandths; anything else counts as 0.
      const std::string_view number = param.substr(2);
      q = 0;
      if (!number.empty() && (number[0] == '0' || number[0] == '1')) {
        q = (number[0] - '0') * 1000;
        int scale = 100;
        for (size_t i = 2; i < number.size() && i < 5 && number[1] == '.'; ++i, scale /= 10) {
          if (number[i] < '0' || number[i] > '9') break;
          q += (number[i] - '0') * scale;
        }
        q = std::min(q, 1000);
      }
    }
    const auto weigh = [&](Preference& preference, std::string_view exact,
                           std::string_view family) {
      int specificity = -1;
      if (EqualsNoCase(type, exact)) {
        specificity = 2;
      } else if (EqualsNoCase(type, family)) {
        specificity = 1;
      } else if (type == "*/*") {
        specificity = 0;
      }
      if (specificity < 0) return;
      const Preference here{q, specificity};
      // The most exact range naming the type decides its q (RFC 9110, 12.5.1).
      if (specificity > preference.specificity) preference = here;
    };
    weigh(csv, "text/csv", "text/*");
    weigh(json, "application/json", "application/*");
  }
  return csv.q > 0 && csv.Beats(json) ? OrdersFormat::kCsv : OrdersFormat::kJson;
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

Result<core::Activity> ParseActivityBody(std::string_view body, int64_t now_ms) {
  auto object = ParseObject(body);
  if (!object) return std::move(object).error();
  Fields fields(*object, "");
  if (auto only = fields.Only({"id",
                               "title",
                               "kind",
                               "start_ms",
                               "end_ms",
                               "per_user_limit",
                               "open",
                               "stock",
                               "total_units",
                               "items",
                               "user_rate",
                               "address_rate",
                               "prizes",
                               "no_prize_weight",
                               "admission",
                               "queue_capacity",
                               "payment_window_ms",
                               "webhook_urls",
                               "waiting_room",
                               "version",
                               "created_ms",
                               "updated_ms"});
      !only) {
    return only.error();
  }
  // What GET returns: read-only fields must at least be integers; their values are the record's.
  for (std::string_view name : kReadOnlyFields) {
    std::optional<int64_t> ignored;
    FLASHSALE_FIELD(ignored, fields.Int(name));
  }
  core::Activity a;
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
  FLASHSALE_FIELD(a.webhook_urls, WebhookUrls(fields));
  FLASHSALE_FIELD(a.waiting_room, fields.Room("waiting_room"));
  if (a.kind == core::StockKind::kItemised && fields.Find("stock") != nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "kind \"items\" takes its stock from 'items', not 'stock'");
  }
  if (a.kind == core::StockKind::kCounted && fields.Find("items") != nullptr) {
    return MakeError(ErrorCode::kInvalidArgument, "kind \"counted\" takes 'stock', not 'items'");
  }
  // total_units (what GET says) is the stock: alone it sets a counted stock; with 'stock',
  // 'items' or 'prizes' it must agree with them.
  std::optional<int64_t> total_units;
  FLASHSALE_FIELD(total_units, fields.Int("total_units"));
  if (total_units) {
    if (a.kind == core::StockKind::kCounted && !lottery && fields.Find("stock") == nullptr) {
      a.stock = *total_units;
    } else if (*total_units != a.InitialUnits()) {
      return MakeError(ErrorCode::kInvalidArgument, "field 'total_units' is {} but the {} make {}",
                       *total_units,
                       lottery                                ? "prizes"
                       : a.kind == core::StockKind::kItemised ? "items"
                                                              : "stock",
                       a.InitialUnits());
    }
  }
  for (auto name : {"start_ms", "end_ms"}) {
    const int64_t value = std::string_view(name) == "start_ms" ? a.start_ms : a.end_ms;
    if (fields.Find(name) != nullptr && value >= kSecondsFrom && value < kSecondsUntil) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "{} {} looks like seconds; send milliseconds ({}000)", name, value, value);
    }
  }
  if (auto valid = core::Validate(a); !valid) return valid.error();
  if (a.kind == core::StockKind::kCounted && !lottery && fields.Find("stock") == nullptr &&
      fields.Find("total_units") == nullptr) {
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

Result<store::ActivityUpdate> ParseActivityUpdate(std::string_view body,
                                                  const store::ActivityRecord* current) {
  auto object = ParseObject(body);
  if (!object) return std::move(object).error();
  Fields fields(*object, "");
  if (auto only = fields.Only({"title",
                               "start_ms",
                               "end_ms",
                               "per_user_limit",
                               "open",
                               "user_rate",
                               "address_rate",
                               "payment_window_ms",
                               "webhook_urls",
                               "waiting_room",
                               "id",
                               "kind",
                               "total_units",
                               "prizes",
                               "no_prize_weight",
                               "admission",
                               "queue_capacity",
                               "version",
                               "created_ms",
                               "updated_ms"});
      !only) {
    return only.error();
  }
  for (std::string_view name : kReadOnlyFields) {
    std::optional<int64_t> ignored;
    FLASHSALE_FIELD(ignored, fields.Int(name));
  }
  if (current != nullptr) {
    if (auto unchanged = CheckUnchanged(fields, *current); !unchanged) return unchanged.error();
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
  FLASHSALE_FIELD(update.webhook_urls, WebhookUrls(fields));
  {
    auto room = fields.Room("waiting_room");
    if (!room) return std::move(room).error();
    if (room->has_value()) update.waiting_room = **room;
  }
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
