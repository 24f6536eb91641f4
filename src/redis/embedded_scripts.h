#pragma once
// The Lua files of src/redis/lua, compiled into the binary (see cmake/embed_lua.cmake).

#include <span>
#include <string_view>

namespace flashsale::redis {

struct EmbeddedScript {
  std::string_view name;    // the file's stem: "seckill_reserve"
  std::string_view source;  // the file's bytes
};

std::span<const EmbeddedScript> EmbeddedScripts();

}  // namespace flashsale::redis
