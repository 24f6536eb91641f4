#include "base/strings.h"

#include <algorithm>

namespace flashsale::base {

std::string JoinWords(std::span<const std::string> words) {
  std::string joined;
  for (const auto& word : words) {
    if (!joined.empty()) joined.push_back(' ');
    joined += word;
  }
  return joined;
}

std::vector<std::string> SplitWords(std::string_view text) {
  std::vector<std::string> words;
  for (size_t pos = 0; pos < text.size();) {
    const size_t space = std::min(text.find(' ', pos), text.size());
    if (space > pos) words.emplace_back(text.substr(pos, space - pos));
    pos = space + 1;
  }
  return words;
}

}  // namespace flashsale::base
