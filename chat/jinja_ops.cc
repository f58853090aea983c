#include "chat/jinja_ops.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "chat/jinja_text.h"

namespace specserve::jinja {
namespace {

absl::Status Undefined(const Value& v) {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template: '", v.str().empty() ? "value" : v.str(), "' is undefined"));
}

absl::Status TypeError(absl::string_view what, const Value& a, const Value& b) {
  return absl::InvalidArgumentError(absl::StrCat("chat template: unsupported operand types for ", what, ": ",
                                                 KindName(a.kind()), " and ", KindName(b.kind())));
}

absl::Status Overflow() { return absl::InvalidArgumentError("chat template: integer overflow"); }

absl::Status TooBig(size_t max_bytes) {
  return absl::ResourceExhaustedError(absl::StrCat("chat template: a value passes ", max_bytes, " bytes"));
}

bool IsIntLike(const Value& v) { return v.kind() == Kind::kInt || v.kind() == Kind::kBool; }

// A list or string repeated N times within MAX_BYTES.
absl::StatusOr<Value> Repeat(const Value& seq, int64_t n, size_t max_bytes) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const size_t len = seq.str().size();
    if (len > 0 && static_cast<uint64_t>(n) > max_bytes / len) return TooBig(max_bytes);
    std::string out;
    out.reserve(len * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  const size_t len = seq.items().size();
  if (len > 0 && static_cast<uint64_t>(n) > max_bytes / 8 / len) return TooBig(max_bytes);
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::List(std::move(out));
}

}  // namespace

absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return std::vector<Value>{};
    case Kind::kList: return v.items();
    case Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.entries()) keys.emplace_back(k);
      return keys;
    }
    case Kind::kString: {
      std::vector<Value> chars;
      std::vector<size_t> off = CodePointOffsets(v.str());
      for (size_t i = 0; i + 1 < off.size(); ++i) chars.emplace_back(v.str().substr(off[i], off[i + 1] - off[i]));
      return chars;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("chat template: ", KindName(v.kind()), " is not iterable"));
  }
}

absl::StatusOr<Value> GetItem(const Value& v, const Value& key, const BuiltinContext& ctx) {
  if (v.is_undefined()) return Undefined(v);
  if (IsIntLike(key) && (v.kind() == Kind::kList || v.is_string())) {
    int64_t i = key.int_value();
    if (v.kind() == Kind::kList) {
      const int64_t n = static_cast<int64_t>(v.items().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined("list index out of range");
      return v.items()[static_cast<size_t>(i)];
    }
    std::vector<size_t> off = CodePointOffsets(v.str());
    const int64_t n = static_cast<int64_t>(off.size()) - 1;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::Undefined("string index out of range");
    return Value(v.str().substr(off[i], off[i + 1] - off[i]));
  }
  if (key.is_string()) {
    if (v.is_mapping()) {
      if (const Value* x = v.Find(key.str())) return *x;
    }
    return GetAttr(v, key.str(), ctx);
  }
  return Value::Undefined("item");
}

absl::StatusOr<Value> GetAttr(const Value& v, const std::string& name, const BuiltinContext& ctx) {
  if (v.is_undefined()) return Undefined(v);
  Value m = BoundMethod(v, name, ctx);
  if (!m.is_undefined()) return m;
  if (v.is_mapping()) {
    if (const Value* x = v.Find(name)) return *x;
  }
  return Value::Undefined(name);
}

Value GetAttrPath(const Value& v, const std::string& path, const BuiltinContext& ctx) {
  Value cur = v;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    bool digits = !part.empty();
    for (char c : part) digits = digits && c >= '0' && c <= '9';
    absl::StatusOr<Value> next = digits && part.size() < 18
                                     ? GetItem(cur, Value(static_cast<int64_t>(std::stoll(std::string(part)))), ctx)
                                     : GetItem(cur, Value(std::string(part)), ctx);
    if (!next.ok()) return Value::Undefined(std::string(part));
    cur = *next;
  }
  return cur;
}

absl::StatusOr<Value> Slice(const Value& v, std::optional<int64_t> start, std::optional<int64_t> stop,
                            std::optional<int64_t> step_opt) {
  const int64_t step = step_opt.value_or(1);
  if (step == 0) return absl::InvalidArgumentError("chat template: slice step cannot be zero");
  std::vector<size_t> off;
  int64_t n;
  if (v.is_string()) {
    off = CodePointOffsets(v.str());
    n = static_cast<int64_t>(off.size()) - 1;
  } else if (v.kind() == Kind::kList) {
    n = static_cast<int64_t>(v.items().size());
  } else if (v.is_undefined()) {
    return Undefined(v);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("chat template: cannot slice ", KindName(v.kind())));
  }
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> x, int64_t dflt) {
    if (!x) return dflt;
    int64_t i = *x;
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t lo = adjust(start, step < 0 ? n - 1 : 0);
  const int64_t hi = adjust(stop, step < 0 ? -1 : n);
  std::vector<int64_t> idx;
  for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) idx.push_back(i);
  if (v.is_string()) {
    std::string out;
    for (int64_t i : idx) out.append(v.str(), off[i], off[i + 1] - off[i]);
    return Value(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i : idx) out.push_back(v.items()[static_cast<size_t>(i)]);
  return Value::List(std::move(out));
}

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(CodePointCount(v.str()));
    case Kind::kList: return static_cast<int64_t>(v.items().size());
    case Kind::kDict: return static_cast<int64_t>(v.entries().size());
    default:
      return absl::InvalidArgumentError(absl::StrCat("chat template: object of type ", KindName(v.kind()),
                                                     " has no len()"));
  }
}

absl::StatusOr<std::string> ToString(const Value& v, size_t max_bytes) {
  std::string s;
  if (auto st = AppendStr(v, &s, max_bytes); !st.ok()) return st;
  return s;
}

absl::StatusOr<Value> BinaryOp(const std::string& op, const Value& a, const Value& b, size_t max_bytes) {
  if (op == "~") {
    std::string s;
    if (auto st = AppendStr(a, &s, max_bytes); !st.ok()) return st;
    if (auto st = AppendStr(b, &s, max_bytes); !st.ok()) return st;
    return Value(std::move(s));
  }
  if (a.is_undefined()) return Undefined(a);
  if (b.is_undefined()) return Undefined(b);
  const bool ints = IsIntLike(a) && IsIntLike(b);
  const bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.int_value(), b.int_value(), &r)) return Overflow();
      return Value(r);
    }
    if (nums) return Value(a.float_value() + b.float_value());
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > max_bytes) return TooBig(max_bytes);
      return Value(a.str() + b.str());
    }
    if (a.kind() == Kind::kList && b.kind() == Kind::kList) {
      if ((a.items().size() + b.items().size()) * 8 > max_bytes) return TooBig(max_bytes);
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::List(std::move(out));
    }
    return TypeError("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.int_value(), b.int_value(), &r)) return Overflow();
      return Value(r);
    }
    if (nums) return Value(a.float_value() - b.float_value());
    return TypeError("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(a.int_value(), b.int_value(), &r)) return Overflow();
      return Value(r);
    }
    if (nums) return Value(a.float_value() * b.float_value());
    if ((a.is_string() || a.kind() == Kind::kList) && IsIntLike(b)) return Repeat(a, b.int_value(), max_bytes);
    if ((b.is_string() || b.kind() == Kind::kList) && IsIntLike(a)) return Repeat(b, a.int_value(), max_bytes);
    return TypeError("*", a, b);
  }
  if (!nums) return TypeError(op, a, b);
  if (op == "/") {
    if (b.float_value() == 0) return absl::InvalidArgumentError("chat template: division by zero");
    return Value(a.float_value() / b.float_value());
  }
  if (op == "//" || op == "%") {
    if (ints) {
      const int64_t x = a.int_value(), y = b.int_value();
      if (y == 0) return absl::InvalidArgumentError("chat template: integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return Overflow();
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {  // Python floors
        q -= 1;
        r += y;
      }
      return op == "//" ? Value(q) : Value(r);
    }
    // CPython's float_divmod.
    const double x = a.float_value(), y = b.float_value();
    if (y == 0) return absl::InvalidArgumentError("chat template: float division or modulo by zero");
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0) {
      if ((y < 0) != (mod < 0)) {
        mod += y;
        div -= 1.0;
      }
    } else {
      mod = std::copysign(0.0, y);
    }
    if (op == "%") return Value(mod);
    double floordiv;
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
      floordiv = std::copysign(0.0, x / y);
    }
    return Value(floordiv);
  }
  if (op == "**") {
    if (ints && b.int_value() >= 0) {
      int64_t base = a.int_value(), e = b.int_value(), r = 1;
      while (e > 0) {
        if (e & 1) {
          if (__builtin_mul_overflow(r, base, &r)) return Overflow();
        }
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
      }
      return Value(r);
    }
    return Value(std::pow(a.float_value(), b.float_value()));
  }
  return absl::InvalidArgumentError(absl::StrCat("chat template: unknown operator ", op));
}

absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Kind::kUndefined: return false;
    case Kind::kString:
      if (!needle.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("chat template: 'in <string>' requires string as left operand, not ", KindName(needle.kind())));
      }
      return haystack.str().find(needle.str()) != std::string::npos;
    case Kind::kList:
      for (const Value& x : haystack.items()) {
        if (Equals(x, needle)) return true;
      }
      return false;
    case Kind::kDict:
    case Kind::kNamespace: return needle.is_string() && haystack.Find(needle.str()) != nullptr;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("chat template: argument of type ", KindName(haystack.kind()), " is not iterable"));
  }
}

}  // namespace specserve::jinja
