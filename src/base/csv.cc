#include "base/csv.h"

namespace flashsale::base {

bool LooksLikeFormula(std::string_view field) {
  if (field.empty()) return false;
  switch (field.front()) {
    case '=':
    case '+':
    case '-':
    case '@':
    case '\t':
    case '\r':
      return true;
    default:
      return false;
  }
}

void AppendCsvField(std::string& out, std::string_view field, bool guard_formula) {
  const bool guard = guard_formula && LooksLikeFormula(field);
  const bool quote = field.find_first_of(",\"\r\n") != std::string_view::npos;
  if (quote) out.push_back('"');
  if (guard) out.push_back('\'');
  for (const char c : field) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  if (quote) out.push_back('"');
}

}  // namespace flashsale::base
