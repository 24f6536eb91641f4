#include "store/store.h"

#include <spdlog/spdlog.h>

#include <boost/json.hpp>

#include "base/redact.h"
#include "store/mysql/store.h"
#include "store/sqlite_store.h"

namespace flashsale::store {

namespace json = boost::json;
using base::ErrorCode;
using base::MakeError;
using base::Result;

std::string EncodeLottery(const std::optional<core::Lottery>& lottery) {
  if (!lottery) return {};
  json::array prizes;
  for (const auto& prize : lottery->prizes) {
    prizes.push_back(json::object{
        {"id", prize.id}, {"name", prize.name}, {"weight", prize.weight}, {"stock", prize.stock}});
  }
  const json::object object{{"prizes", std::move(prizes)},
                            {"no_prize_weight", lottery->no_prize_weight},
                            {"admission", core::ToString(lottery->admission)},
                            {"queue_capacity", lottery->queue_capacity}};
  return json::serialize(object);
}

base::Result<std::optional<core::Lottery>> DecodeLottery(std::string_view text) {
  if (text.empty()) return std::optional<core::Lottery>();
  const auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument, "unreadable lottery definition '{}'", text);
  };
  boost::system::error_code ec;
  const json::value value = json::parse(text, ec);
  if (ec || !value.is_object()) return bad();
  const json::object& object = value.get_object();
  const auto integer = [&](const json::object& from, std::string_view key) -> const int64_t* {
    const json::value* field = from.if_contains(key);
    return field != nullptr ? field->if_int64() : nullptr;
  };
  const auto text_of = [&](const json::object& from, std::string_view key) -> const json::string* {
    const json::value* field = from.if_contains(key);
    return field != nullptr && field->is_string() ? &field->get_string() : nullptr;
  };
  core::Lottery lottery;
  const json::value* prizes = object.if_contains("prizes");
  const int64_t* none = integer(object, "no_prize_weight");
  const int64_t* capacity = integer(object, "queue_capacity");
  const json::string* admission_text = text_of(object, "admission");
  if (prizes == nullptr || !prizes->is_array() || none == nullptr || capacity == nullptr ||
      admission_text == nullptr) {
    return bad();
  }
  auto admission = core::AdmissionFrom(*admission_text);
  if (!admission) return bad();
  lottery.no_prize_weight = *none;
  lottery.queue_capacity = *capacity;
  lottery.admission = *admission;
  for (const json::value& entry : prizes->get_array()) {
    if (!entry.is_object()) return bad();
    const json::object& p = entry.get_object();
    const json::string* id = text_of(p, "id");
    const json::string* name = text_of(p, "name");
    const int64_t* weight = integer(p, "weight");
    const int64_t* stock = integer(p, "stock");
    if (id == nullptr || name == nullptr || weight == nullptr || stock == nullptr) return bad();
    lottery.prizes.push_back({std::string(*id), std::string(*name), *weight, *stock});
  }
  return std::optional<core::Lottery>(std::move(lottery));
}

void SetLotteryFromColumn(core::Activity& activity, std::string_view text) {
  auto lottery = DecodeLottery(text);
  if (lottery.ok()) {
    activity.lottery = std::move(*lottery);
    return;
  }
  spdlog::error("activity '{}': {}; it stays closed", activity.id, lottery.error().ToString());
  activity.open = false;
}

std::string_view ToString(OrderState state) {
  switch (state) {
    case OrderState::kReserved:
      return "reserved";
    case OrderState::kPaid:
      return "paid";
    case OrderState::kCancelled:
      return "cancelled";
  }
  return "reserved";
}

bool OrderStates::Has(OrderState state) const {
  switch (state) {
    case OrderState::kReserved:
      return reserved;
    case OrderState::kPaid:
      return paid;
    case OrderState::kCancelled:
      return cancelled;
  }
  return false;
}

OrderState OrderStateFrom(std::string_view text) {
  if (text == "paid") return OrderState::kPaid;
  if (text == "cancelled") return OrderState::kCancelled;
  return OrderState::kReserved;
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& url) {
  Result<std::unique_ptr<Store>> opened =
      MakeError(ErrorCode::kInvalidArgument,
                "a database URL must be sqlite:/path/to.db or "
                "mysql://user[:password]@host[:port]/database, not \"{}\"",
                base::RedactUrl(url));
  if (url.starts_with("sqlite:")) {
    auto store = SqliteStore::Open(url.substr(7));
    opened = store ? Result<std::unique_ptr<Store>>(std::move(*store))
                   : Result<std::unique_ptr<Store>>(std::move(store).error());
  } else if (url.starts_with("mysql://")) {
    auto store = MySqlStore::Open(url);
    opened = store ? Result<std::unique_ptr<Store>>(std::move(*store))
                   : Result<std::unique_ptr<Store>>(std::move(store).error());
  }
  if (!opened) return opened;
  if (auto migrated = (*opened)->Migrate(); !migrated) return migrated.error();
  return opened;
}

}  // namespace flashsale::store
