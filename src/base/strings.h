#pragma once
// Space-separated lists of ids, the form item ids take in stream fields, Redis records and
// database columns (ids never contain spaces: base::IsValidId).

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashsale::base {

std::string JoinWords(std::span<const std::string> words);
// Splits on single spaces; empty words (leading, trailing or double spaces) are dropped.
std::vector<std::string> SplitWords(std::string_view text);

}  // namespace flashsale::base
