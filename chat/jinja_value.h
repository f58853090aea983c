// The values a Jinja template computes with, with Python's semantics where
// templates can see them: truthiness, equality, ordering, str() and repr().
// Lists and dicts are immutable once built (HF renders in Jinja's
// ImmutableSandboxedEnvironment, where `.append()` is refused); a namespace()
// is the one mutable object, shared by reference.
//
// Strings are UTF-8 bytes; where Python counts characters (length, slices,
// indexing, iteration) the helpers in jinja_text.h count code points.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace specserve::jinja {

class Value;

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};
using NativeFn = std::function<absl::StatusOr<Value>(CallArgs&)>;

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };

// How deep containers may nest (a[0][0]...): bounds the recursion of repr,
// tojson and equality on values a hostile template builds.
inline constexpr int kMaxNesting = 64;

struct ListData;
struct DictData;
struct FunctionData;

class Value {
 public:
  Value() = default;  // undefined
  static Value Undefined(std::string hint);  // hint: what was undefined, for the error
  static Value None();
  Value(bool b) : kind_(Kind::kBool), v_(b) {}  // NOLINT: implicit on purpose
  Value(int64_t i) : kind_(Kind::kInt), v_(i) {}  // NOLINT
  Value(int i) : kind_(Kind::kInt), v_(int64_t{i}) {}  // NOLINT
  Value(double d) : kind_(Kind::kFloat), v_(d) {}  // NOLINT
  Value(std::string s) : kind_(Kind::kString), v_(std::move(s)) {}  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  // INVALID_ARGUMENT when an item nests deeper than kMaxNesting.
  static absl::StatusOr<Value> List(std::vector<Value> items);
  // A Python tuple: a list that prints as (a, b) and is never equal to a list.
  static absl::StatusOr<Value> Tuple(std::vector<Value> items);
  static absl::StatusOr<Value> Dict(std::vector<std::pair<std::string, Value>> items);
  static Value Namespace(std::vector<std::pair<std::string, Value>> items);
  static Value Function(std::string name, NativeFn fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }

  // The accessors never throw: on a value of another kind they give false,
  // 0, "" or an empty sequence (callers check kind() first; this keeps a
  // missed check from becoming a crash).
  bool bool_value() const;
  int64_t int_value() const;   // bool and int; a float truncated (clamped)
  double float_value() const;  // any number
  const std::string& str() const;  // string, or an undefined value's hint
  const std::vector<Value>& items() const;  // list
  // dict or namespace entries, in insertion order
  const std::vector<std::pair<std::string, Value>>& entries() const;
  const Value* Find(std::string_view key) const;  // dict or namespace; null if absent
  // Namespace only: sets KEY (INVALID_ARGUMENT when VALUE holds a namespace,
  // which could make a cycle).
  absl::Status NamespaceSet(const std::string& key, Value value) const;
  const FunctionData& function() const;
  bool is_tuple() const;
  int depth() const;        // 0 for scalars
  bool has_namespace() const;

 private:
  static absl::StatusOr<Value> MakeList(std::vector<Value> items, bool tuple);

  Kind kind_ = Kind::kUndefined;
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<const ListData>,
               std::shared_ptr<DictData>, std::shared_ptr<const FunctionData>>
      v_;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
  int depth = 1;
  bool has_namespace = false;
};
struct DictData {
  std::vector<std::pair<std::string, Value>> entries;
  absl::flat_hash_map<std::string, size_t> index;  // key -> position in entries
  // The position of KEY, or -1; and KEY set to VALUE (in place or appended).
  int64_t IndexOf(std::string_view key) const;
  void Set(std::string key, Value value);
  int depth = 1;
  bool has_namespace = false;
};
struct FunctionData {
  std::string name;
  NativeFn fn;
};

// Python's bool(x); undefined is false.
bool Truthy(const Value& v);
// Python's ==: 1 == 1.0 == True, lists and dicts by content, two undefined
// values are equal.
bool Equals(const Value& a, const Value& b);
// Python's <: numbers, strings (code point order) and lists; INVALID_ARGUMENT
// for anything else.
absl::StatusOr<bool> Less(const Value& a, const Value& b);

// Appends Python's str(v) (what {{ v }} prints; undefined prints nothing) or
// repr(v); RESOURCE_EXHAUSTED when OUT would pass LIMIT bytes.
absl::Status AppendStr(const Value& v, std::string* out, size_t limit);
absl::Status AppendRepr(const Value& v, std::string* out, size_t limit);
// Python's repr(float): shortest round trip, '1.0', '1e+16', 'inf', 'nan'.
std::string FloatRepr(double d);
const char* KindName(Kind k);  // "string", "list", ... for messages

// json.dumps as HF's tojson filter calls it (ensure_ascii=False by default).
struct JsonOptions {
  int indent = -1;                 // -1: None (one line)
  std::string item_sep;            // "" picks Python's default: ", " (or "," with indent)
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
absl::Status AppendJson(const Value& v, const JsonOptions& o, std::string* out, size_t limit);

}  // namespace specserve::jinja
