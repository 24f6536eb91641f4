#include "store/store.h"

namespace flashsale::store {

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

}  // namespace flashsale::store
