#pragma once
// What a script returns, declared in its header (`-- RETURNS:`, grammar in redis/scripts.h), and
// the reader that checks a reply against that declaration and gives its fields by name.
//
// A binding resolves the names it reads once, when it is constructed (IntField, StrField: an
// unknown name or a wrong type is a build defect and throws at startup, like ScriptSet::Get);
// per call, ScriptReply::Read checks the reply's shape and types in one pass, and the fields are
// read by index. A reply of the wrong shape is a kProtocol error naming the script, what came and
// what the script declares; nothing on the data path asserts.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "redis/reply.h"

namespace flashsale::redis {

struct Script;

// A script's RETURNS, parsed.
struct ReplyDecl {
  // kIntOrStr (`int|str`): either, read as an IntField (0 when a string) or a StrField ("" when
  // an integer).
  enum class Type : uint8_t { kInt, kStr, kIntOrStr };
  enum class Part : uint8_t { kFixed, kTail, kRest };
  struct Field {
    std::string name;
    Type type = Type::kInt;
    bool nullable = false;  // `|nil`: may also be nil (Lua false)
    Part part = Part::kFixed;
    size_t index = 0;  // kFixed, kTail: element index; kRest: position in the repeated group
  };

  bool array = false;  // false: a scalar reply, fields holds its one field
  std::vector<Field> fields;
  size_t fixed = 0;  // fields that are always there (the first `fixed` of `fields`)
  size_t tail = 0;   // `[...]`: present all together, or the reply ends before them
  size_t rest = 0;   // `name...` or `(a b)...`: repeated zero or more times, to the end
  std::string text;  // the declaration as written, for error messages

  const Field* Find(std::string_view name) const;
};

// Parses a RETURNS declaration (the text after `-- RETURNS:`, continuation lines joined with a
// space); the error says what is wrong.
base::Result<ReplyDecl> ParseReplyDecl(std::string_view text);

// A named field of one script's reply, resolved once. Throws std::logic_error if the script's
// RETURNS has no such field of that type.
class ReplyField {
 public:
  const Script& script() const { return *script_; }
  const ReplyDecl::Field& decl() const;

 protected:
  ReplyField(const Script& script, std::string_view name, ReplyDecl::Type type);

 private:
  const Script* script_;
  size_t field_;  // in script_->returns.fields
};
class IntField : public ReplyField {
 public:
  IntField(const Script& script, std::string_view name)
      : ReplyField(script, name, ReplyDecl::Type::kInt) {}
};
class StrField : public ReplyField {
 public:
  StrField(const Script& script, std::string_view name)
      : ReplyField(script, name, ReplyDecl::Type::kStr) {}
};

// A reply checked against its script's RETURNS. Holds a view: the Reply must outlive it.
class ScriptReply {
 public:
  // kProtocol if `reply` is not what the script declares (scalar vs array, element count, the
  // type of every element).
  static base::Result<ScriptReply> Read(const Script& script, ReplyView reply);
  // As above, or the call's error passed on.
  static base::Result<ScriptReply> Read(const Script& script, const base::Result<Reply>& reply);

  // A fixed field, or a tail field when HasTail(). A field of another script, or a tail field
  // of a reply without its tail, reads as 0 / "" (a binding defect the unit tests catch; never
  // undefined behaviour).
  int64_t Int(const IntField& field) const;
  std::string_view Str(const StrField& field) const;  // "" when nil
  bool IsNil(const ReplyField& field) const;

  // Whether the `[...]` tail is there; NeedTail(): kProtocol when it is not, for a code that
  // promises it.
  bool HasTail() const { return has_tail_; }
  base::Status NeedTail() const;

  // The repeated group: how many times it came, and a field of row `row` (< Rows()).
  size_t Rows() const { return rows_; }
  int64_t Int(const IntField& field, size_t row) const;
  std::string_view Str(const StrField& field, size_t row) const;

  const Script& script() const { return *script_; }
  ReplyView raw() const { return reply_; }

 private:
  ScriptReply(const Script& script, ReplyView reply) : script_(&script), reply_(reply) {}
  // The element of `field` (a group field: in `row`), or nothing if it is not in this reply.
  std::optional<ReplyView> Element(const ReplyField& field, bool in_group, size_t row) const;

  const Script* script_;
  ReplyView reply_;
  bool has_tail_ = false;
  size_t rows_ = 0;
};

}  // namespace flashsale::redis
