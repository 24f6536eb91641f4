#include "base/json_writer.h"

#include <charconv>
#include <cmath>

#include "base/string_pool.h"

namespace flashsale::base {

JsonWriter::JsonWriter() : out_(TakeString()) {}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (depth_ == 0) return;
  const size_t at = depth_ - 1;
  bool first;
  if (at < 64) {
    first = (first_bits_ >> at) & 1;
    first_bits_ &= ~(uint64_t{1} << at);
  } else {
    first = deeper_[at - 64];
    deeper_[at - 64] = false;
  }
  if (!first) out_.push_back(',');
}

void JsonWriter::Open() {
  if (depth_ < 64) {
    first_bits_ |= uint64_t{1} << depth_;
  } else {
    deeper_.push_back(true);
  }
  ++depth_;
}

void JsonWriter::Close() {
  if (depth_ == 0) return;
  --depth_;
  if (depth_ >= 64) deeper_.pop_back();
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  Open();
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  out_.push_back('}');
  Close();
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  Open();
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  out_.push_back(']');
  Close();
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  BeforeValue();
  AppendEscaped(out_, key);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendEscaped(out_, value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  char buffer[24];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out_.append(buffer, end);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_ += "null";
    return *this;
  }
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out_.append(buffer, end);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::Raw(std::string_view json) {
  BeforeValue();
  out_.append(json);
  return *this;
}

JsonWriter& JsonWriter::Strings(std::span<const std::string> values) {
  BeginArray();
  for (const auto& value : values) String(value);
  return EndArray();
}

void JsonWriter::AppendEscaped(std::string& out, std::string_view value) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  // Runs of characters that need no escape (all of an id or a status word) are appended whole.
  size_t plain = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    const auto byte = static_cast<unsigned char>(value[i]);
    if (byte >= 0x20 && byte != '"' && byte != '\\') continue;
    out.append(value.data() + plain, i - plain);
    plain = i + 1;
    switch (byte) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out.push_back(kHex[byte >> 4]);
        out.push_back(kHex[byte & 15]);
    }
  }
  out.append(value.data() + plain, value.size() - plain);
  out.push_back('"');
}

}  // namespace flashsale::base
