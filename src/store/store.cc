#include "store/store.h"

#include "store/mysql_store.h"
#include "store/sqlite_store.h"

namespace flashsale::store {

using base::ErrorCode;
using base::MakeError;
using base::Result;

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
                url.starts_with("mysql://") ? std::string("mysql://...") : url);
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
