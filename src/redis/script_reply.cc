#include "redis/script_reply.h"

#include <stdexcept>

#include "redis/scripts.h"

namespace flashsale::redis {

using base::ErrorCode;
using base::MakeError;
using base::Result;
using Field = ReplyDecl::Field;
using Part = ReplyDecl::Part;
using Type = ReplyDecl::Type;

namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

std::string TypeName(const Field& field) {
  const char* type = field.type == Type::kInt   ? "int"
                     : field.type == Type::kStr ? "str"
                                                : "int|str";
  return std::string(type) + (field.nullable ? "|nil" : "");
}

bool Matches(const Field& field, ReplyView value) {
  if (field.nullable && value.is_nil()) return true;
  switch (field.type) {
    case Type::kInt:
      return value.is_integer();
    case Type::kStr:
      return value.is_string();
    case Type::kIntOrStr:
      return value.is_integer() || value.is_string();
  }
  return false;
}

// The grammar of redis/scripts.h, read left to right.
class DeclParser {
 public:
  explicit DeclParser(std::string_view text) : text_(Trim(text)) {}

  Result<ReplyDecl> Parse() {
    decl_.text = std::string(text_);
    if (Eat("{")) {
      decl_.array = true;
      bool ended = false;  // after the tail or the repeated group only '}' may come
      while (!Eat("}")) {
        if (AtEnd()) return Fail("'}' expected");
        if (ended) return Fail("nothing may follow the [tail] or the repeated group");
        if (Eat("[")) {
          if (auto group = Group(Part::kTail, "]"); !group) return group.error();
          ended = true;
        } else if (Eat("(")) {
          if (auto group = Group(Part::kRest, ")"); !group) return group.error();
          if (!Eat("...")) return Fail("'...' expected after ')'");
          ended = true;
        } else {
          if (auto field = One(Part::kFixed); !field) return field.error();
          if (Eat("...")) {
            Retag(decl_.fields.size() - 1, Part::kRest);
            ended = true;
          }
        }
      }
    } else {
      if (auto field = One(Part::kFixed); !field) return field.error();
    }
    if (!AtEnd()) return Fail("unexpected text");
    return std::move(decl_);
  }

 private:
  void Skip() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool AtEnd() {
    Skip();
    return pos_ >= text_.size();
  }
  bool Eat(std::string_view token) {
    Skip();
    if (text_.substr(pos_).starts_with(token)) {
      pos_ += token.size();
      return true;
    }
    return false;
  }
  base::Error Fail(std::string_view what) const {
    return MakeError(ErrorCode::kInvalidArgument, "RETURNS '{}': {} at column {}", text_, what,
                     pos_ + 1);
  }

  // `name:type` or `name:type|nil`, appended as a field of `part`.
  base::Status One(Part part) {
    Skip();
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           ((text_[pos_] >= 'a' && text_[pos_] <= 'z') || text_[pos_] == '_' ||
            (pos_ > start && text_[pos_] >= '0' && text_[pos_] <= '9'))) {
      ++pos_;
    }
    Field field;
    field.name = std::string(text_.substr(start, pos_ - start));
    if (field.name.empty()) return Fail("a field name ([a-z_][a-z0-9_]*) expected");
    if (decl_.Find(field.name) != nullptr) return Fail("a field name used twice");
    if (!Eat(":")) return Fail("':type' expected after the field name");
    if (Eat("int")) {
      field.type = Eat("|str") ? Type::kIntOrStr : Type::kInt;
    } else if (Eat("str")) {
      field.type = Type::kStr;
    } else {
      return Fail("type 'int' or 'str' expected");
    }
    field.nullable = Eat("|nil");
    decl_.fields.push_back(std::move(field));
    Retag(decl_.fields.size() - 1, part);
    return {};
  }

  // Fields up to `close` (at least one), all of `part`.
  base::Status Group(Part part, std::string_view close) {
    for (;;) {
      if (auto field = One(part); !field) return field;
      if (Eat(close)) return {};
      if (AtEnd()) return Fail(fmt::format("'{}' expected", close));
    }
  }

  // Moves field i into `part` and numbers it there (fields are appended in order).
  void Retag(size_t i, Part part) {
    Field& field = decl_.fields[i];
    if (field.part == Part::kFixed && i < decl_.fixed) --decl_.fixed;
    field.part = part;
    switch (part) {
      case Part::kFixed:
        field.index = decl_.fixed++;
        break;
      case Part::kTail:
        field.index = decl_.fixed + decl_.tail++;
        break;
      case Part::kRest:
        field.index = decl_.rest++;
        break;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  ReplyDecl decl_;
};

}  // namespace

const Field* ReplyDecl::Find(std::string_view name) const {
  for (const auto& field : fields) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

Result<ReplyDecl> ParseReplyDecl(std::string_view text) { return DeclParser(text).Parse(); }

ReplyField::ReplyField(const Script& script, std::string_view name, Type type)
    : script_(&script), field_(0) {
  const Field* field = script.returns.Find(name);
  if (field == nullptr || (field->type != type && field->type != Type::kIntOrStr)) {
    throw std::logic_error(fmt::format("script {} declares no {} field '{}' in RETURNS {}",
                                       script.name, type == Type::kInt ? "int" : "str", name,
                                       script.returns.text));
  }
  field_ = static_cast<size_t>(field - script.returns.fields.data());
}

const Field& ReplyField::decl() const { return script_->returns.fields[field_]; }

Result<ScriptReply> ScriptReply::Read(const Script& script, ReplyView reply) {
  const ReplyDecl& decl = script.returns;
  auto bad = [&](std::string what) {
    return MakeError(ErrorCode::kProtocol, "script {} returned {}: {} (RETURNS {})", script.name,
                     reply.Describe(), what, decl.text);
  };
  ScriptReply out(script, reply);
  if (!decl.array) {
    if (decl.fields.size() != 1 || !Matches(decl.fields[0], reply)) {
      return bad(fmt::format("expected {}", decl.fields.empty() ? "?" : TypeName(decl.fields[0])));
    }
    return out;
  }
  if (!reply.is_array()) return bad("expected an array");
  const size_t n = reply.size();
  if (n < decl.fixed) return bad(fmt::format("expected at least {} elements", decl.fixed));
  const size_t extra = n - decl.fixed;
  if (decl.tail > 0) {
    if (extra != 0 && extra != decl.tail) {
      return bad(fmt::format("expected {} or {} elements", decl.fixed, decl.fixed + decl.tail));
    }
    out.has_tail_ = extra == decl.tail;
  } else if (decl.rest > 0) {
    if (extra % decl.rest != 0) {
      return bad(fmt::format("expected {} elements, then groups of {}", decl.fixed, decl.rest));
    }
    out.rows_ = extra / decl.rest;
  } else if (extra != 0) {
    return bad(fmt::format("expected {} elements", decl.fixed));
  }
  // Tail and group fields follow the fixed ones in `fields`; the two never come together.
  for (size_t i = 0; i < n; ++i) {
    const Field& field = i < decl.fixed || decl.tail > 0
                             ? decl.fields[i]
                             : decl.fields[decl.fixed + (i - decl.fixed) % decl.rest];
    if (!Matches(field, reply[i])) {
      return bad(fmt::format("element {} ({}) is {}, expected {}", i + 1, field.name,
                             reply[i].Describe(), TypeName(field)));
    }
  }
  return out;
}

Result<ScriptReply> ScriptReply::Read(const Script& script, const Result<Reply>& reply) {
  if (!reply.ok()) return reply.error();
  return Read(script, *reply);
}

std::optional<ReplyView> ScriptReply::Element(const ReplyField& field, bool in_group,
                                              size_t row) const {
  if (&field.script() != script_) return std::nullopt;
  const Field& decl = field.decl();
  if ((decl.part == Part::kRest) != in_group) return std::nullopt;
  if (!script_->returns.array) return reply_;
  size_t i = decl.index;
  if (decl.part == Part::kTail && !has_tail_) return std::nullopt;
  if (decl.part == Part::kRest) {
    if (row >= rows_) return std::nullopt;
    i = script_->returns.fixed + row * script_->returns.rest + decl.index;
  }
  if (i >= reply_.size()) return std::nullopt;
  return reply_[i];
}

int64_t ScriptReply::Int(const IntField& field) const {
  auto value = Element(field, false, 0);
  return value && value->is_integer() ? value->integer() : 0;
}

std::string_view ScriptReply::Str(const StrField& field) const {
  auto value = Element(field, false, 0);
  return value && value->is_string() ? value->str() : std::string_view();
}

bool ScriptReply::IsNil(const ReplyField& field) const {
  auto value = Element(field, field.decl().part == Part::kRest, 0);
  return value && value->is_nil();
}

int64_t ScriptReply::Int(const IntField& field, size_t row) const {
  auto value = Element(field, true, row);
  return value && value->is_integer() ? value->integer() : 0;
}

std::string_view ScriptReply::Str(const StrField& field, size_t row) const {
  auto value = Element(field, true, row);
  return value && value->is_string() ? value->str() : std::string_view();
}

base::Status ScriptReply::NeedTail() const {
  if (has_tail_) return {};
  return MakeError(ErrorCode::kProtocol,
                   "script {} returned {} without the [tail] its code promises (RETURNS {})",
                   script_->name, reply_.Describe(), script_->returns.text);
}

}  // namespace flashsale::redis
