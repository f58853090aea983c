#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "chat/jinja_text.h"

namespace specserve::jinja {

Value Value::Undefined(std::string hint) {
  Value v;
  v.v_ = std::move(hint);
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

namespace {
template <class T>
void Measure(const T& child, int* depth, bool* has_ns) {
  *depth = std::max(*depth, child.depth() + 1);
  *has_ns = *has_ns || child.has_namespace();
}
absl::Status CheckDepth(int depth) {
  if (depth > kMaxNesting) {
    return absl::InvalidArgumentError(absl::StrCat("chat template: values nest deeper than ", kMaxNesting));
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<Value> Value::MakeList(std::vector<Value> items, bool tuple) {
  auto d = std::make_shared<ListData>();
  for (const Value& x : items) Measure(x, &d->depth, &d->has_namespace);
  if (auto s = CheckDepth(d->depth); !s.ok()) return s;
  d->items = std::move(items);
  d->tuple = tuple;
  Value v;
  v.kind_ = Kind::kList;
  v.v_ = std::shared_ptr<const ListData>(std::move(d));
  return v;
}

absl::StatusOr<Value> Value::List(std::vector<Value> items) { return MakeList(std::move(items), false); }
absl::StatusOr<Value> Value::Tuple(std::vector<Value> items) { return MakeList(std::move(items), true); }

bool Value::is_tuple() const {
  const auto* l = std::get_if<std::shared_ptr<const ListData>>(&v_);
  return l != nullptr && (*l)->tuple;
}

absl::StatusOr<Value> Value::Dict(std::vector<std::pair<std::string, Value>> items) {
  auto d = std::make_shared<DictData>();
  // Later duplicates overwrite earlier ones in place, as in a Python dict.
  for (auto& item : items) {
    Measure(item.second, &d->depth, &d->has_namespace);
    d->Set(std::move(item.first), std::move(item.second));
  }
  if (auto s = CheckDepth(d->depth); !s.ok()) return s;
  Value v;
  v.kind_ = Kind::kDict;
  v.v_ = std::move(d);
  return v;
}

Value Value::Namespace(std::vector<std::pair<std::string, Value>> items) {
  auto d = std::make_shared<DictData>();
  d->has_namespace = true;
  Value v;
  v.kind_ = Kind::kNamespace;
  v.v_ = d;
  for (auto& [k, x] : items) {
    if (x.has_namespace()) continue;  // refused, as NamespaceSet refuses it
    (void)v.NamespaceSet(k, std::move(x));
  }
  return v;
}

Value Value::Function(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.v_ = std::make_shared<const FunctionData>(FunctionData{std::move(name), std::move(fn)});
  return v;
}

bool Value::bool_value() const {
  const bool* b = std::get_if<bool>(&v_);
  return b != nullptr && *b;
}

int64_t Value::int_value() const {
  if (const int64_t* i = std::get_if<int64_t>(&v_)) return *i;
  if (const double* d = std::get_if<double>(&v_)) {
    if (!(*d > -9.2e18)) return std::isnan(*d) ? 0 : INT64_MIN;
    if (*d > 9.2e18) return INT64_MAX;
    return static_cast<int64_t>(*d);
  }
  return bool_value() ? 1 : 0;
}

double Value::float_value() const {
  if (const double* d = std::get_if<double>(&v_)) return *d;
  return static_cast<double>(int_value());
}

const std::string& Value::str() const {
  static const std::string* const kEmpty = new std::string();
  const std::string* s = std::get_if<std::string>(&v_);
  return s != nullptr ? *s : *kEmpty;
}

const std::vector<Value>& Value::items() const {
  static const std::vector<Value>* const kEmpty = new std::vector<Value>();
  const auto* l = std::get_if<std::shared_ptr<const ListData>>(&v_);
  return l != nullptr ? (*l)->items : *kEmpty;
}

const std::vector<std::pair<std::string, Value>>& Value::entries() const {
  static const auto* const kEmpty = new std::vector<std::pair<std::string, Value>>();
  const auto* d = std::get_if<std::shared_ptr<DictData>>(&v_);
  return d != nullptr ? (*d)->entries : *kEmpty;
}

const Value* Value::Find(std::string_view key) const {
  const auto* d = std::get_if<std::shared_ptr<DictData>>(&v_);
  if (d == nullptr) return nullptr;
  const int64_t at = (*d)->IndexOf(key);
  return at < 0 ? nullptr : &(*d)->entries[static_cast<size_t>(at)].second;
}

int64_t DictData::IndexOf(std::string_view key) const {
  auto it = index.find(absl::string_view(key.data(), key.size()));
  return it == index.end() ? -1 : static_cast<int64_t>(it->second);
}

void DictData::Set(std::string key, Value value) {
  const int64_t at = IndexOf(key);
  if (at >= 0) {
    entries[static_cast<size_t>(at)].second = std::move(value);
    return;
  }
  index.emplace(key, entries.size());
  entries.emplace_back(std::move(key), std::move(value));
}

absl::Status Value::NamespaceSet(const std::string& key, Value value) const {
  if (value.has_namespace()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template: a namespace cannot hold a namespace (attribute '", key, "')"));
  }
  auto* p = std::get_if<std::shared_ptr<DictData>>(&v_);
  if (kind_ != Kind::kNamespace || p == nullptr) {
    return absl::InvalidArgumentError("chat template: attribute assignment on a non-namespace");
  }
  DictData& d = **p;
  d.depth = std::max(d.depth, value.depth() + 1);
  d.Set(key, std::move(value));
  return absl::OkStatus();
}

const FunctionData& Value::function() const { return *std::get<std::shared_ptr<const FunctionData>>(v_); }

int Value::depth() const {
  if (kind_ == Kind::kList) return std::get<std::shared_ptr<const ListData>>(v_)->depth;
  if (kind_ == Kind::kDict || kind_ == Kind::kNamespace) return std::get<std::shared_ptr<DictData>>(v_)->depth;
  return 0;
}

bool Value::has_namespace() const {
  if (kind_ == Kind::kList) return std::get<std::shared_ptr<const ListData>>(v_)->has_namespace;
  if (kind_ == Kind::kDict || kind_ == Kind::kNamespace) {
    return std::get<std::shared_ptr<DictData>>(v_)->has_namespace;
  }
  return false;
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.bool_value();
    case Kind::kInt: return v.int_value() != 0;
    case Kind::kFloat: return v.float_value() != 0.0;
    case Kind::kString: return !v.str().empty();
    case Kind::kList: return !v.items().empty();
    case Kind::kDict: return !v.entries().empty();
    case Kind::kNamespace:
    case Kind::kFunction: return true;
  }
  return false;
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.float_value() == b.float_value();
    return a.int_value() == b.int_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.str() == b.str();
    case Kind::kList: {
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size() || a.is_tuple() != b.is_tuple()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [k, x] : a.entries()) {
        const Value* y = b.Find(k);
        if (y == nullptr || !Equals(x, *y)) return false;
      }
      return true;
    }
    case Kind::kNamespace: return &a.entries() == &b.entries();
    case Kind::kFunction: return &a.function() == &b.function();
    default: return false;
  }
}

absl::StatusOr<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.float_value() < b.float_value();
    return a.int_value() < b.int_value();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order is code point order
  if (a.kind() == Kind::kList && b.kind() == Kind::kList) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("chat template: cannot order ", KindName(a.kind()), " and ", KindName(b.kind())));
}

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "namespace";
    case Kind::kFunction: return "function";
  }
  return "?";
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // "-1.2345e+02"
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    i = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e; ++k) {
    if (sci[k] != '.') digits.push_back(sci[k]);
  }
  const int exp = std::stoi(sci.substr(e + 1));
  const int n = static_cast<int>(digits.size());
  if (exp >= -4 && exp < 16) {
    const int point = exp + 1;  // digits before the decimal point
    // (append, not operator+: GCC 12 warns falsely about the temporaries)
    if (point <= 0) {
      out.append("0.").append(static_cast<size_t>(-point), '0').append(digits);
    } else if (point >= n) {
      out.append(digits).append(static_cast<size_t>(point - n), '0').append(".0");
    } else {
      out.append(digits, 0, static_cast<size_t>(point)).append(".").append(digits, static_cast<size_t>(point));
    }
    return out;
  }
  out.push_back(digits[0]);
  if (n > 1) out.append(".").append(digits, 1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + ebuf;
}

namespace {
absl::Status Room(const std::string& out, size_t limit) {
  if (out.size() > limit) {
    return absl::ResourceExhaustedError(absl::StrCat("chat template: output passes ", limit, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status AppendReprImpl(const Value& v, std::string* out, size_t limit) {
  switch (v.kind()) {
    case Kind::kString: AppendPyStringRepr(v.str(), out); break;
    case Kind::kList: {
      out->push_back(v.is_tuple() ? '(' : '[');
      bool first = true;
      for (const Value& x : v.items()) {
        if (!first) out->append(", ");
        first = false;
        if (auto s = AppendReprImpl(x, out, limit); !s.ok()) return s;
      }
      if (v.is_tuple() && v.items().size() == 1) out->push_back(',');
      out->push_back(v.is_tuple() ? ')' : ']');
      break;
    }
    case Kind::kDict: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, x] : v.entries()) {
        if (!first) out->append(", ");
        first = false;
        AppendPyStringRepr(k, out);
        out->append(": ");
        if (auto s = AppendReprImpl(x, out, limit); !s.ok()) return s;
      }
      out->push_back('}');
      break;
    }
    case Kind::kNamespace: {
      out->append("<Namespace {");
      bool first = true;
      for (const auto& [k, x] : v.entries()) {
        if (!first) out->append(", ");
        first = false;
        AppendPyStringRepr(k, out);
        out->append(": ");
        if (auto s = AppendReprImpl(x, out, limit); !s.ok()) return s;
      }
      out->append("}>");
      break;
    }
    default: return AppendStr(v, out, limit);
  }
  return Room(*out, limit);
}
}  // namespace

absl::Status AppendStr(const Value& v, std::string* out, size_t limit) {
  switch (v.kind()) {
    case Kind::kUndefined: break;
    case Kind::kNone: out->append("None"); break;
    case Kind::kBool: out->append(v.bool_value() ? "True" : "False"); break;
    case Kind::kInt: out->append(std::to_string(v.int_value())); break;
    case Kind::kFloat: out->append(FloatRepr(v.float_value())); break;
    case Kind::kString: out->append(v.str()); break;
    case Kind::kFunction: absl::StrAppend(out, "<function ", v.function().name, ">"); break;
    default: return AppendReprImpl(v, out, limit);
  }
  return Room(*out, limit);
}

absl::Status AppendRepr(const Value& v, std::string* out, size_t limit) { return AppendReprImpl(v, out, limit); }

namespace {
absl::Status AppendJsonImpl(const Value& v, const JsonOptions& o, int level, std::string* out, size_t limit) {
  const std::string item_sep = !o.item_sep.empty() ? o.item_sep : (o.indent >= 0 ? "," : ", ");
  auto newline = [&](int lvl) {
    if (o.indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(o.indent) * lvl, ' ');
  };
  switch (v.kind()) {
    case Kind::kNone: out->append("null"); break;
    case Kind::kBool: out->append(v.bool_value() ? "true" : "false"); break;
    case Kind::kInt: out->append(std::to_string(v.int_value())); break;
    case Kind::kFloat: {
      double d = v.float_value();
      if (std::isnan(d)) {
        out->append("NaN");
      } else if (std::isinf(d)) {
        out->append(d > 0 ? "Infinity" : "-Infinity");
      } else {
        out->append(FloatRepr(d));
      }
      break;
    }
    case Kind::kString: AppendJsonString(v.str(), o.ensure_ascii, out); break;
    case Kind::kList: {
      if (v.items().empty()) {
        out->append("[]");
        break;
      }
      out->push_back('[');
      bool first = true;
      for (const Value& x : v.items()) {
        if (!first) out->append(item_sep);
        first = false;
        newline(level + 1);
        if (auto s = AppendJsonImpl(x, o, level + 1, out, limit); !s.ok()) return s;
      }
      newline(level);
      out->push_back(']');
      break;
    }
    case Kind::kDict: {
      if (v.entries().empty()) {
        out->append("{}");
        break;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.entries()) entries.push_back(&e);
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      out->push_back('{');
      bool first = true;
      for (const auto* e : entries) {
        if (!first) out->append(item_sep);
        first = false;
        newline(level + 1);
        AppendJsonString(e->first, o.ensure_ascii, out);
        out->append(o.key_sep);
        if (auto s = AppendJsonImpl(e->second, o, level + 1, out, limit); !s.ok()) return s;
      }
      newline(level);
      out->push_back('}');
      break;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("chat template: tojson: object of type ", KindName(v.kind()), " is not JSON serializable"));
  }
  return Room(*out, limit);
}
}  // namespace

absl::Status AppendJson(const Value& v, const JsonOptions& o, std::string* out, size_t limit) {
  return AppendJsonImpl(v, o, 0, out, limit);
}

}  // namespace specserve::jinja
