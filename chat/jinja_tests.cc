// Jinja2's builtin tests (jinja2/tests.py): `x is defined`, `x is none`,
// `x is divisibleby 3`, the comparison tests (`eq`, `lt`, ...) and the rest.
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_text.h"

namespace specserve::jinja {
namespace {

bool IsInt(const Value& v) { return v.kind() == Kind::kInt; }

absl::StatusOr<bool> CompareTest(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "<") return Less(a, b);
  if (op == ">") return Less(b, a);
  auto lt = op == "<=" ? Less(b, a) : Less(a, b);  // <=: not b < a; >=: not a < b
  if (!lt.ok()) return lt.status();
  return !*lt;
}

const absl::flat_hash_map<std::string, std::string>& ComparisonTests() {
  static const auto* const kTests = new absl::flat_hash_map<std::string, std::string>{
      {"eq", "=="}, {"equalto", "=="}, {"==", "=="}, {"ne", "!="}, {"!=", "!="},
      {"lt", "<"},  {"lessthan", "<"}, {"<", "<"},   {"le", "<="}, {"<=", "<="},
      {"gt", ">"},  {"greaterthan", ">"}, {">", ">"}, {"ge", ">="}, {">=", ">="},
  };
  return *kTests;
}

const char* const kPlainTests[] = {"defined", "undefined", "none", "boolean", "false", "true", "integer",
                                   "float", "number", "string", "mapping", "iterable", "sequence", "callable",
                                   "in", "odd", "even", "divisibleby", "sameas", "lower", "upper", "escaped",
                                   "filter", "test"};

}  // namespace

bool IsTest(std::string_view name) {
  if (ComparisonTests().contains(std::string(name))) return true;
  for (const char* t : kPlainTests) {
    if (name == t) return true;
  }
  return false;
}

absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& v, CallArgs& a) {
  if (auto it = ComparisonTests().find(name); it != ComparisonTests().end()) {
    if (a.pos.empty()) return absl::InvalidArgumentError(absl::StrCat("chat template: test ", name, " needs an argument"));
    return CompareTest(it->second, v, a.pos[0]);
  }
  const Kind k = v.kind();
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return k == Kind::kBool;
  if (name == "false") return k == Kind::kBool && !v.bool_value();
  if (name == "true") return k == Kind::kBool && v.bool_value();
  if (name == "integer") return IsInt(v);
  if (name == "float") return k == Kind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return k == Kind::kDict;
  if (name == "iterable") return k == Kind::kString || k == Kind::kList || k == Kind::kDict || v.is_undefined();
  if (name == "sequence") return k == Kind::kString || k == Kind::kList || k == Kind::kDict;
  if (name == "callable") return k == Kind::kFunction;
  if (name == "lower") return v.is_string() && AsciiLower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && AsciiUpper(v.str()) == v.str();
  if (name == "escaped") return false;
  if (name == "filter") return v.is_string() && IsFilter(v.str());
  if (name == "test") return v.is_string() && IsTest(v.str());
  if (name == "odd" || name == "even") {
    if (!v.is_number() || k == Kind::kFloat) {
      return absl::InvalidArgumentError(absl::StrCat("chat template: test ", name, " needs an integer"));
    }
    const bool odd = (v.int_value() % 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (a.pos.empty()) return absl::InvalidArgumentError(absl::StrCat("chat template: test ", name, " needs an argument"));
  const Value& arg = a.pos[0];
  if (name == "in") return Contains(arg, v);
  if (name == "divisibleby") {
    if (!v.is_number() || !arg.is_number() || k == Kind::kFloat || arg.kind() == Kind::kFloat ||
        arg.int_value() == 0) {
      return absl::InvalidArgumentError("chat template: divisibleby needs non-zero integers");
    }
    return v.int_value() % arg.int_value() == 0;
  }
  if (name == "sameas") {  // Python `is`: singletons and same objects
    if (k != arg.kind()) return false;
    switch (k) {
      case Kind::kNone:
      case Kind::kUndefined: return true;
      case Kind::kBool: return v.bool_value() == arg.bool_value();
      case Kind::kList: return &v.items() == &arg.items();
      case Kind::kDict:
      case Kind::kNamespace: return &v.entries() == &arg.entries();
      default: return Equals(v, arg);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("chat template: no test named '", name, "'"));
}

}  // namespace specserve::jinja
