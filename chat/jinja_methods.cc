// Python methods templates call on strings and dicts, and the global
// functions HF's chat environment defines.
#include <ctime>
#include <optional>

#include "absl/strings/str_cat.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_text.h"

namespace specserve::jinja {
namespace {

// Sandbox (jinja2.sandbox.MAX_RANGE): range() longer than this is refused.
constexpr int64_t kMaxRange = 100000;

absl::Status MethodError(absl::string_view method, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("chat template: ", method, "(): ", what));
}

const Value* Arg(const CallArgs& a, size_t i, std::string_view name) {
  if (i < a.pos.size()) return &a.pos[i];
  for (const auto& [k, v] : a.kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

absl::StatusOr<std::optional<std::string>> OptString(const Value* v, absl::string_view method) {
  if (!v || v->is_none()) return std::optional<std::string>();
  if (!v->is_string()) return MethodError(method, "argument must be a string or None");
  return std::optional<std::string>(v->str());
}

// s.startswith(p) / s.endswith(p), P a string or a tuple (list) of them.
absl::StatusOr<Value> Affix(const std::string& s, const Value* p, bool start, absl::string_view method) {
  if (!p) return MethodError(method, "takes a prefix");
  std::vector<Value> options = p->kind() == Kind::kList ? p->items() : std::vector<Value>{*p};
  for (const Value& o : options) {
    if (!o.is_string()) return MethodError(method, "argument must be a string or a tuple of strings");
    const std::string& x = o.str();
    if (x.size() > s.size()) continue;
    if (start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0) return Value(true);
  }
  return Value(false);
}

absl::StatusOr<Value> StringMethod(const std::string& s, const std::string& name, CallArgs& a,
                                   const BuiltinContext& ctx) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto chars = OptString(Arg(a, 0, "chars"), name);
    if (!chars.ok()) return chars.status();
    return Value(PyStrip(s, *chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    auto sep = OptString(Arg(a, 0, "sep"), name);
    if (!sep.ok()) return sep.status();
    if (*sep && (*sep)->empty()) return MethodError(name, "empty separator");
    const Value* maxsplit = Arg(a, 1, "maxsplit");
    std::vector<Value> parts;
    for (std::string& p : PySplit(s, *sep, maxsplit && maxsplit->is_number() ? maxsplit->int_value() : -1)) {
      parts.emplace_back(std::move(p));
    }
    return Value::List(std::move(parts));
  }
  if (name == "startswith" || name == "endswith") return Affix(s, Arg(a, 0, "prefix"), name == "startswith", name);
  if (name == "upper") return Value(AsciiUpper(s));
  if (name == "lower") return Value(AsciiLower(s));
  if (name == "title") return Value(PyTitle(s));
  if (name == "capitalize") return Value(PyCapitalize(s));
  if (name == "replace") {
    const Value* from = Arg(a, 0, "old");
    const Value* to = Arg(a, 1, "new");
    const Value* count = Arg(a, 2, "count");
    if (!from || !to || !from->is_string() || !to->is_string()) return MethodError(name, "needs two strings");
    if (!to->str().empty() && s.size() / std::max<size_t>(from->str().size(), 1) * to->str().size() > ctx.max_bytes) {
      return absl::ResourceExhaustedError("chat template: replace result too large");
    }
    return Value(PyReplace(s, from->str(), to->str(), count && count->is_number() ? count->int_value() : -1));
  }
  if (name == "join") {
    const Value* items = Arg(a, 0, "iterable");
    if (!items) return MethodError(name, "takes an iterable");
    auto list = Iterate(*items);
    if (!list.ok()) return list.status();
    std::string out;
    for (size_t i = 0; i < list->size(); ++i) {
      if (!(*list)[i].is_string()) return MethodError(name, "sequence item is not a string");
      if (i) out += s;
      out += (*list)[i].str();
      if (out.size() > ctx.max_bytes) return absl::ResourceExhaustedError("chat template: join result too large");
    }
    return Value(std::move(out));
  }
  if (name == "find" || name == "count") {
    const Value* sub = Arg(a, 0, "sub");
    if (!sub || !sub->is_string()) return MethodError(name, "needs a string");
    if (name == "find") {
      size_t at = s.find(sub->str());
      if (at == std::string::npos) return Value(-1);
      return Value(static_cast<int64_t>(CodePointCount(std::string_view(s).substr(0, at))));
    }
    if (sub->str().empty()) return Value(static_cast<int64_t>(CodePointCount(s) + 1));
    int64_t n = 0;
    for (size_t at = s.find(sub->str()); at != std::string::npos; at = s.find(sub->str(), at + sub->str().size())) ++n;
    return Value(n);
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace") {
    if (s.empty()) return Value(false);
    for (size_t i = 0; i < s.size();) {
      size_t len;
      uint32_t cp = DecodeAt(s, i, &len);
      i += len;
      const bool digit = cp >= '0' && cp <= '9';
      const bool alpha = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
      const bool ok = name == "isdigit" ? digit : name == "isalpha" ? alpha : name == "isalnum" ? digit || alpha
                                                                                            : PyIsSpace(cp);
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  return MethodError(name, "unknown string method");
}

absl::StatusOr<Value> DictMethod(const Value& d, const std::string& name, CallArgs& a) {
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.entries()) {
      if (name == "keys") {
        out.emplace_back(k);
      } else if (name == "values") {
        out.push_back(v);
      } else {
        auto p = Value::Tuple({Value(k), v});
        if (!p.ok()) return p.status();
        out.push_back(*p);
      }
    }
    return Value::List(std::move(out));
  }
  if (name == "get") {
    const Value* key = Arg(a, 0, "key");
    if (!key) return MethodError(name, "takes a key");
    const Value* dflt = Arg(a, 1, "default");
    const Value* x = key->is_string() ? d.Find(key->str()) : nullptr;
    if (x) return *x;
    return dflt ? *dflt : Value::None();
  }
  return MethodError(name, "unknown dict method");
}

bool IsStringMethod(const std::string& n) {
  static const char* const kNames[] = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper",
                                       "lower", "title", "capitalize", "replace", "join", "find", "count",
                                       "isdigit", "isalpha", "isalnum", "isspace"};
  for (const char* k : kNames) {
    if (n == k) return true;
  }
  return false;
}

absl::StatusOr<Value> Range(CallArgs& a) {
  int64_t start = 0, stop, step = 1;
  for (const Value& v : a.pos) {
    if (v.kind() != Kind::kInt && v.kind() != Kind::kBool) return MethodError("range", "arguments must be integers");
  }
  if (a.pos.size() == 1) {
    stop = a.pos[0].int_value();
  } else if (a.pos.size() == 2 || a.pos.size() == 3) {
    start = a.pos[0].int_value();
    stop = a.pos[1].int_value();
    if (a.pos.size() == 3) step = a.pos[2].int_value();
  } else {
    return MethodError("range", "takes 1 to 3 integers");
  }
  if (step == 0) return MethodError("range", "step must not be zero");
  // Length without overflow: how many of start, start+step, ... before stop.
  __int128 n = 0;
  if (step > 0 && start < stop) n = ((__int128)stop - start + step - 1) / step;
  if (step < 0 && start > stop) n = ((__int128)start - stop - step - 1) / -step;
  if (n > kMaxRange) return MethodError("range", absl::StrCat("longer than the sandbox's ", kMaxRange));
  std::vector<Value> out;
  for (__int128 i = 0; i < n; ++i) out.emplace_back(static_cast<int64_t>(start + i * step));
  return Value::List(std::move(out));
}

}  // namespace

Value BoundMethod(const Value& obj, const std::string& name, const BuiltinContext& ctx) {
  if (obj.is_string() && IsStringMethod(name)) {
    std::string s = obj.str();
    return Value::Function(name, [s, name, ctx](CallArgs& a) { return StringMethod(s, name, a, ctx); });
  }
  if (obj.kind() == Kind::kDict && (name == "items" || name == "keys" || name == "values" || name == "get")) {
    return Value::Function(name, [obj, name](CallArgs& a) { return DictMethod(obj, name, a); });
  }
  return Value();
}

std::vector<std::pair<std::string, Value>> GlobalFunctions() {
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("range", Value::Function("range", Range));
  auto kwargs_dict = [](CallArgs& a, bool allow_dict) -> absl::StatusOr<std::vector<std::pair<std::string, Value>>> {
    std::vector<std::pair<std::string, Value>> items;
    if (!a.pos.empty()) {
      if (!allow_dict || a.pos.size() > 1 || !a.pos[0].is_mapping()) {
        return MethodError("namespace", "takes keyword arguments or one dict");
      }
      items = a.pos[0].entries();
    }
    items.insert(items.end(), a.kw.begin(), a.kw.end());
    return items;
  };
  g.emplace_back("namespace", Value::Function("namespace", [kwargs_dict](CallArgs& a) -> absl::StatusOr<Value> {
                   auto items = kwargs_dict(a, true);
                   if (!items.ok()) return items.status();
                   for (const auto& [k, v] : *items) {
                     if (v.has_namespace()) return MethodError("namespace", "a namespace cannot hold a namespace");
                   }
                   return Value::Namespace(std::move(*items));
                 }));
  g.emplace_back("dict", Value::Function("dict", [kwargs_dict](CallArgs& a) -> absl::StatusOr<Value> {
                   auto items = kwargs_dict(a, true);
                   if (!items.ok()) return items.status();
                   return Value::Dict(std::move(*items));
                 }));
  g.emplace_back("raise_exception", Value::Function("raise_exception", [](CallArgs& a) -> absl::StatusOr<Value> {
                   std::string msg;
                   if (!a.pos.empty()) (void)AppendStr(a.pos[0], &msg, 1 << 16);
                   return absl::InvalidArgumentError(absl::StrCat(kRaisedPrefix, msg));
                 }));
  g.emplace_back("strftime_now", Value::Function("strftime_now", [](CallArgs& a) -> absl::StatusOr<Value> {
                   if (a.pos.empty() || !a.pos[0].is_string() || a.pos[0].str().size() > 256) {
                     return MethodError("strftime_now", "takes a format string");
                   }
                   std::time_t now = std::time(nullptr);
                   std::tm tm{};
                   localtime_r(&now, &tm);
                   char buf[1024];
                   size_t n = std::strftime(buf, sizeof buf, a.pos[0].str().c_str(), &tm);
                   return Value(std::string(buf, n));
                 }));
  return g;
}

}  // namespace specserve::jinja
