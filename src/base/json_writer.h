#pragma once
// A small, fast JSON writer for responses: objects and arrays appended to one string, strings
// escaped per RFC 8259. Input strings must be valid UTF-8 (everything we write is either an
// id we validated or text that arrived in JSON, which the parser checked).
//
//   JsonWriter w;
//   w.BeginObject().Key("code").Int(1).Key("status").String("reserved").EndObject();
//   std::string body = std::move(w).Take();

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashsale::base {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // Already-serialised JSON, written as one value.
  JsonWriter& Raw(std::string_view json);
  JsonWriter& Strings(std::span<const std::string> values);

  // The text starts in a string of this thread's pool (base/string_pool.h): a reply body handed
  // back with GiveString after its write makes the next writer's appends allocation-free.
  JsonWriter();

  const std::string& str() const { return out_; }
  std::string Take() && { return std::move(out_); }

  static void AppendEscaped(std::string& out, std::string_view value);

 private:
  void BeforeValue();
  void Open();
  void Close();
  std::string out_;
  // Per open container, whether no element was written yet: bit i of first_bits_ for depth i
  // below 64 (no allocation), deeper ones in deeper_.
  uint64_t first_bits_ = 0;
  size_t depth_ = 0;
  std::vector<bool> deeper_;
  bool after_key_ = false;
};

}  // namespace flashsale::base
