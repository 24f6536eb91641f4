#include "keyspace/embedded_scripts.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace flashsale::keyspace {

const redis::ScriptSet& Scripts() {
  static const redis::ScriptSet kSet = [] {
    std::vector<std::pair<std::string, std::string>> sources;
    for (const auto& embedded : EmbeddedScripts()) {
      sources.emplace_back(std::string(embedded.name), std::string(embedded.source));
    }
    auto set = redis::ScriptSet::Parse(sources);
    if (!set) throw std::logic_error(set.error().message);
    return std::move(*set);
  }();
  return kSet;
}

}  // namespace flashsale::keyspace
