#pragma once
// Strings whose storage this thread keeps for reuse: the request path takes one for a reply body
// (base/json_writer.h does) and gives it back once the reply is written, so in steady state a
// reply costs no heap allocation. A string never given back is simply freed; one that grew past
// kMaxPooledCapacity is freed instead of kept.

#include <cstddef>
#include <string>

namespace flashsale::base {

inline constexpr size_t kMaxPooledCapacity = 64 * 1024;

// An empty string, with the capacity of one given back earlier on this thread when there is one.
std::string TakeString();
// Keeps `text`'s storage for a later TakeString on this thread (its content is dropped).
void GiveString(std::string&& text);

}  // namespace flashsale::base
