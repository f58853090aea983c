// The operations expressions perform on values, with Python's semantics
// and Jinja's lookups: iteration, x[i] / x.attr, slices, len, and the
// arithmetic, concatenation and `in` operators.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_value.h"

namespace specserve::jinja {

// The items `for x in v` visits: a list's items, a dict's keys, a string's
// characters; undefined gives none. INVALID_ARGUMENT otherwise.
absl::StatusOr<std::vector<Value>> Iterate(const Value& v);

// v[key] as Jinja's getitem: list/string index (negative from the end), dict
// key, else the attribute of that name; undefined when absent.
// INVALID_ARGUMENT when V is undefined (Jinja's UndefinedError).
absl::StatusOr<Value> GetItem(const Value& v, const Value& key, const BuiltinContext& ctx);
// v.name as Jinja's getattr: a method of V's type first, then a dict key.
absl::StatusOr<Value> GetAttr(const Value& v, const std::string& name, const BuiltinContext& ctx);
// "a.b.0" as Jinja's attribute= arguments resolve it.
Value GetAttrPath(const Value& v, const std::string& path, const BuiltinContext& ctx);

// v[start:stop:step] for lists and strings (code points).
absl::StatusOr<Value> Slice(const Value& v, std::optional<int64_t> start, std::optional<int64_t> stop,
                            std::optional<int64_t> step);

// len(v): list, dict, string (code points), undefined (0).
absl::StatusOr<int64_t> Length(const Value& v);

// a OP b for OP in + - * / // % ** ~; strings and lists repeat and join
// within MAX_BYTES.
absl::StatusOr<Value> BinaryOp(const std::string& op, const Value& a, const Value& b, size_t max_bytes);
// `needle in haystack`.
absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle);
// str(v) as a string value (soft_str: undefined is "").
absl::StatusOr<std::string> ToString(const Value& v, size_t max_bytes);

}  // namespace specserve::jinja
