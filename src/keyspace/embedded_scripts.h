#pragma once
// The Lua files of src/keyspace/lua, compiled into the binary (see cmake/embed_lua.cmake), and
// the script set made of them.

#include <span>
#include <string_view>

#include "redis/scripts.h"

namespace flashsale::keyspace {

struct EmbeddedScript {
  std::string_view name;    // the file's stem: "sale_reserve"
  std::string_view source;  // the file's bytes
};

std::span<const EmbeddedScript> EmbeddedScripts();

// Every script embedded in the binary, what a ScriptRunner is made with. Parsed once; throws at
// startup if a script's header (KEYS, ARGV, RETURNS) is missing or malformed (a build defect, not
// a runtime condition: the unit test ScriptSetTest refuses it).
const redis::ScriptSet& Scripts();

}  // namespace flashsale::keyspace
