// Jinja's filters (`x | trim`), tests (`x is defined`), global functions
// (range, namespace, raise_exception, strftime_now) and the Python methods
// templates call on strings, lists and dicts (`.strip()`, `.items()`,
// `.get()`, ...).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "chat/jinja_value.h"

namespace specserve::jinja {

// What a builtin needs from the render: a bound for the strings it builds,
// and a way to apply a filter by name (map / select take filter names).
struct BuiltinContext {
  size_t max_bytes = 0;
};

bool IsFilter(std::string_view name);
bool IsTest(std::string_view name);

absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& input, CallArgs& args,
                                  const BuiltinContext& ctx);
absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& input, CallArgs& args);

// OBJ.NAME where NAME is a method Python gives OBJ's type (str.strip,
// dict.items, ...): the method bound to OBJ; undefined when there is none.
Value BoundMethod(const Value& obj, const std::string& name, const BuiltinContext& ctx);

// Globals every render sees: range, namespace, dict, raise_exception,
// strftime_now (local time, as HF's datetime.now().strftime).
std::vector<std::pair<std::string, Value>> GlobalFunctions();

// The error raise_exception(msg) returns: INVALID_ARGUMENT whose message is
// kRaisedPrefix + msg.
inline constexpr char kRaisedPrefix[] = "chat template raised: ";

}  // namespace specserve::jinja
