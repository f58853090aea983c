// Jinja2's builtin filters (jinja2/filters.py), with HF's tojson in place of
// Jinja's. The tests (`is ...`) are in jinja_tests.cc.
#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_text.h"

namespace specserve::jinja {
namespace {

// Positional argument I or keyword NAME of a filter/test (after its input).
const Value* Arg(const CallArgs& a, size_t i, std::string_view name) {
  if (i < a.pos.size()) return &a.pos[i];
  for (const auto& [k, v] : a.kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

absl::Status BadArg(absl::string_view filter, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("chat template: filter ", filter, ": ", what));
}

using FilterFn = absl::StatusOr<Value> (*)(const Value&, CallArgs&, const BuiltinContext&);

absl::StatusOr<std::string> Str(const Value& v, const BuiltinContext& ctx) { return ToString(v, ctx.max_bytes); }

absl::StatusOr<Value> StrFilter(const Value& in, const BuiltinContext& ctx, std::string (*f)(std::string_view)) {
  auto s = Str(in, ctx);
  if (!s.ok()) return s.status();
  return Value(f(*s));
}

absl::StatusOr<Value> FTrim(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  auto s = Str(in, ctx);
  if (!s.ok()) return s.status();
  const Value* chars = Arg(a, 0, "chars");
  std::optional<std::string> c;
  if (chars && !chars->is_none()) {
    if (!chars->is_string()) return BadArg("trim", "chars must be a string");
    c = chars->str();
  }
  return Value(PyStrip(*s, c, true, true));
}

absl::StatusOr<Value> FLength(const Value& in, CallArgs&, const BuiltinContext&) {
  auto n = Length(in);
  if (!n.ok()) return n.status();
  return Value(*n);
}

absl::StatusOr<Value> FUpper(const Value& in, CallArgs&, const BuiltinContext& ctx) {
  return StrFilter(in, ctx, AsciiUpper);
}
absl::StatusOr<Value> FLower(const Value& in, CallArgs&, const BuiltinContext& ctx) {
  return StrFilter(in, ctx, AsciiLower);
}
absl::StatusOr<Value> FCapitalize(const Value& in, CallArgs&, const BuiltinContext& ctx) {
  return StrFilter(in, ctx, PyCapitalize);
}
absl::StatusOr<Value> FTitle(const Value& in, CallArgs&, const BuiltinContext& ctx) {
  return StrFilter(in, ctx, JinjaTitle);
}

// HF: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
absl::StatusOr<Value> FToJson(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  JsonOptions o;
  if (const Value* v = Arg(a, 0, "ensure_ascii")) o.ensure_ascii = Truthy(*v);
  if (const Value* v = Arg(a, 1, "indent"); v && !v->is_none()) {
    if (v->is_string()) return BadArg("tojson", "a string indent is not supported");
    if (v->kind() != Kind::kInt || v->int_value() < 0 || v->int_value() > 64) {
      return BadArg("tojson", "indent must be an integer in 0..64");
    }
    o.indent = static_cast<int>(v->int_value());
  }
  if (const Value* v = Arg(a, 2, "separators"); v && !v->is_none()) {
    if (v->kind() != Kind::kList || v->items().size() != 2 || !v->items()[0].is_string() ||
        !v->items()[1].is_string()) {
      return BadArg("tojson", "separators must be two strings");
    }
    o.item_sep = v->items()[0].str();
    o.key_sep = v->items()[1].str();
    if (o.item_sep.empty()) o.item_sep = "\x01";  // marks "explicitly empty"
  }
  if (const Value* v = Arg(a, 3, "sort_keys")) o.sort_keys = Truthy(*v);
  std::string out;
  if (o.item_sep == "\x01") return BadArg("tojson", "an empty item separator is not supported");
  if (auto s = AppendJson(in, o, &out, ctx.max_bytes); !s.ok()) return s;
  return Value(std::move(out));
}

absl::StatusOr<Value> FDefault(const Value& in, CallArgs& a, const BuiltinContext&) {
  const Value* d = Arg(a, 0, "default_value");
  const Value* boolean = Arg(a, 1, "boolean");
  const bool use_default = in.is_undefined() || (boolean && Truthy(*boolean) && !Truthy(in));
  if (!use_default) return in;
  return d ? *d : Value("");
}

absl::StatusOr<Value> FFirst(const Value& in, CallArgs&, const BuiltinContext&) {
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  if (items->empty()) return Value::Undefined("first item");
  return items->front();
}

absl::StatusOr<Value> FLast(const Value& in, CallArgs&, const BuiltinContext&) {
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  if (items->empty()) return Value::Undefined("last item");
  return items->back();
}

absl::StatusOr<Value> FJoin(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  std::string sep;
  if (const Value* d = Arg(a, 0, "d")) {
    auto s = Str(*d, ctx);
    if (!s.ok()) return s.status();
    sep = *s;
  }
  const Value* attr = Arg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& x : *items) {
    if (!first) out += sep;
    first = false;
    const Value item = attr && attr->is_string() ? GetAttrPath(x, attr->str(), ctx) : x;
    if (auto s = AppendStr(item, &out, ctx.max_bytes); !s.ok()) return s;
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> FReplace(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  auto s = Str(in, ctx);
  if (!s.ok()) return s.status();
  const Value* from = Arg(a, 0, "old");
  const Value* to = Arg(a, 1, "new");
  const Value* count = Arg(a, 2, "count");
  if (!from || !to) return BadArg("replace", "needs old and new");
  auto f = Str(*from, ctx);
  auto t = Str(*to, ctx);
  if (!f.ok() || !t.ok()) return BadArg("replace", "arguments too large");
  const int64_t n = count && count->kind() == Kind::kInt ? count->int_value() : -1;
  if (!t->empty() && s->size() / std::max<size_t>(f->size(), 1) * t->size() > ctx.max_bytes) {
    return absl::ResourceExhaustedError("chat template: replace result too large");
  }
  std::string out = PyReplace(*s, *f, *t, n);
  if (out.size() > ctx.max_bytes) return absl::ResourceExhaustedError("chat template: replace result too large");
  return Value(std::move(out));
}

absl::StatusOr<Value> FString(const Value& in, CallArgs&, const BuiltinContext& ctx) {
  auto s = Str(in, ctx);
  if (!s.ok()) return s.status();
  return Value(std::move(*s));
}

absl::StatusOr<Value> FItems(const Value& in, CallArgs&, const BuiltinContext&) {
  if (in.is_undefined()) return Value::List({});
  if (!in.is_mapping()) return BadArg("items", "can only get item pairs from a mapping");
  std::vector<Value> pairs;
  for (const auto& [k, v] : in.entries()) {
    auto p = Value::Tuple({Value(k), v});
    if (!p.ok()) return p.status();
    pairs.push_back(*p);
  }
  return Value::List(std::move(pairs));
}

absl::StatusOr<Value> FSafe(const Value& in, CallArgs&, const BuiltinContext&) { return in; }

// Python's str.splitlines for the line breaks templates meet.
std::vector<std::string> SplitLines(std::string_view s) {
  std::vector<std::string> lines;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= '\x1c' && c <= '\x1e')) {
      lines.emplace_back(s.substr(start, i - start));
      i += (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ? 2 : 1;
      start = i;
    } else {
      ++i;
    }
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

absl::StatusOr<Value> FIndent(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  auto s = Str(in, ctx);
  if (!s.ok()) return s.status();
  std::string ind = "    ";
  if (const Value* w = Arg(a, 0, "width")) {
    if (w->is_string()) {
      ind = w->str();
    } else if (w->kind() == Kind::kInt && w->int_value() >= 0 && w->int_value() <= 256) {
      ind = std::string(static_cast<size_t>(w->int_value()), ' ');
    } else {
      return BadArg("indent", "width must be a string or an integer in 0..256");
    }
  }
  const Value* first = Arg(a, 1, "first");
  const Value* blank = Arg(a, 2, "blank");
  std::vector<std::string> lines = SplitLines(*s + "\n");
  if (s->size() + lines.size() * ind.size() > ctx.max_bytes) {
    return absl::ResourceExhaustedError("chat template: indent result too large");
  }
  std::string rv;
  if (blank && Truthy(*blank)) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind) + lines[i];
  }
  if (first && Truthy(*first)) rv = ind + rv;
  return Value(std::move(rv));
}

absl::StatusOr<Value> FList(const Value& in, CallArgs&, const BuiltinContext&) {
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  return Value::List(std::move(*items));
}

// select / reject / selectattr / rejectattr.
absl::StatusOr<Value> Select(const Value& in, CallArgs& a, const BuiltinContext& ctx, bool attr, bool keep) {
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  size_t next = 0;
  std::string path;
  if (attr) {
    if (a.pos.empty() || !a.pos[0].is_string()) return BadArg("selectattr", "needs an attribute name");
    path = a.pos[0].str();
    next = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (next < a.pos.size()) {
    if (!a.pos[next].is_string()) return BadArg("select", "the test must be named by a string");
    test = a.pos[next].str();
    if (!IsTest(*test)) return BadArg("select", absl::StrCat("no test named '", *test, "'"));
    test_args.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(next) + 1, a.pos.end());
  }
  std::vector<Value> out;
  for (const Value& x : *items) {
    const Value v = attr ? GetAttrPath(x, path, ctx) : x;
    bool pass;
    if (test) {
      CallArgs ta = test_args;
      auto r = ApplyTest(*test, v, ta);
      if (!r.ok()) return r.status();
      pass = *r;
    } else {
      pass = Truthy(v);
    }
    if (pass == keep) out.push_back(x);
  }
  return Value::List(std::move(out));
}
absl::StatusOr<Value> FSelect(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  return Select(in, a, ctx, false, true);
}
absl::StatusOr<Value> FReject(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  return Select(in, a, ctx, false, false);
}
absl::StatusOr<Value> FSelectAttr(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  return Select(in, a, ctx, true, true);
}
absl::StatusOr<Value> FRejectAttr(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  return Select(in, a, ctx, true, false);
}

absl::StatusOr<Value> FMap(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  std::vector<Value> out;
  if (const Value* attr = Arg(a, 99, "attribute")) {
    if (!attr->is_string()) return BadArg("map", "attribute must be a string");
    const Value* dflt = Arg(a, 99, "default");
    for (const Value& x : *items) {
      Value v = GetAttrPath(x, attr->str(), ctx);
      out.push_back(v.is_undefined() && dflt ? *dflt : v);
    }
    return Value::List(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string()) return BadArg("map", "needs a filter name or attribute=");
  const std::string name = a.pos[0].str();
  if (!IsFilter(name)) return BadArg("map", absl::StrCat("no filter named '", name, "'"));
  for (const Value& x : *items) {
    CallArgs fa;
    fa.pos.assign(a.pos.begin() + 1, a.pos.end());
    fa.kw = a.kw;
    auto v = ApplyFilter(name, x, fa, ctx);
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> FAbs(const Value& in, CallArgs&, const BuiltinContext&) {
  if (in.kind() == Kind::kFloat) return Value(std::fabs(in.float_value()));
  if (in.is_number()) {
    if (in.int_value() == INT64_MIN) return absl::InvalidArgumentError("chat template: integer overflow");
    return Value(in.int_value() < 0 ? -in.int_value() : in.int_value());
  }
  return BadArg("abs", "needs a number");
}

absl::StatusOr<Value> FInt(const Value& in, CallArgs& a, const BuiltinContext&) {
  const Value* d = Arg(a, 0, "default");
  const Value dflt = d ? *d : Value(0);
  if (in.kind() == Kind::kFloat) {
    double f = in.float_value();
    if (!std::isfinite(f) || std::fabs(f) > 9e18) return dflt;
    return Value(static_cast<int64_t>(f));
  }
  if (in.is_number()) return Value(in.int_value());
  if (in.is_string()) {
    std::string s = PyStrip(in.str(), std::nullopt, true, true);
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value(static_cast<int64_t>(v));
    double f = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(f) && std::fabs(f) < 9e18) {
      return Value(static_cast<int64_t>(f));
    }
  }
  return dflt;
}

absl::StatusOr<Value> FFloat(const Value& in, CallArgs& a, const BuiltinContext&) {
  const Value* d = Arg(a, 0, "default");
  if (in.is_number()) return Value(in.float_value());
  if (in.is_string()) {
    std::string s = PyStrip(in.str(), std::nullopt, true, true);
    char* end = nullptr;
    double f = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value(f);
  }
  return d ? *d : Value(0.0);
}

// Items sorted by Python's order (case-insensitive for strings unless asked).
absl::StatusOr<std::vector<Value>> Sorted(std::vector<Value> items, bool case_sensitive, const Value* attr,
                                          const BuiltinContext& ctx) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& x : items) {
    Value k = attr && attr->is_string() ? GetAttrPath(x, attr->str(), ctx) : x;
    if (k.is_string() && !case_sensitive) k = Value(AsciiLower(k.str()));
    keyed.emplace_back(std::move(k), std::move(x));
  }
  absl::Status err;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& p, const auto& q) {
    auto r = Less(p.first, q.first);
    if (!r.ok()) {
      err = r.status();
      return false;
    }
    return *r;
  });
  if (!err.ok()) return err;
  std::vector<Value> out;
  for (auto& [k, x] : keyed) out.push_back(std::move(x));
  return out;
}

absl::StatusOr<Value> FSort(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  const Value* rev = Arg(a, 0, "reverse");
  const Value* cs = Arg(a, 1, "case_sensitive");
  auto sorted = Sorted(std::move(*items), cs && Truthy(*cs), Arg(a, 2, "attribute"), ctx);
  if (!sorted.ok()) return sorted.status();
  if (rev && Truthy(*rev)) std::reverse(sorted->begin(), sorted->end());
  return Value::List(std::move(*sorted));
}

absl::StatusOr<Value> FDictSort(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  if (!in.is_mapping()) return BadArg("dictsort", "needs a mapping");
  const Value* cs = Arg(a, 0, "case_sensitive");
  const Value* by = Arg(a, 1, "by");
  const Value* rev = Arg(a, 2, "reverse");
  const bool by_value = by && by->is_string() && by->str() == "value";
  std::vector<Value> pairs;
  for (const auto& [k, v] : in.entries()) {
    auto p = Value::Tuple({Value(k), v});
    if (!p.ok()) return p.status();
    pairs.push_back(*p);
  }
  const Value attr(by_value ? "1" : "0");
  auto sorted = Sorted(std::move(pairs), cs && Truthy(*cs), &attr, ctx);
  if (!sorted.ok()) return sorted.status();
  if (rev && Truthy(*rev)) std::reverse(sorted->begin(), sorted->end());
  return Value::List(std::move(*sorted));
}

absl::StatusOr<Value> FReverse(const Value& in, CallArgs&, const BuiltinContext&) {
  if (in.is_string()) return Slice(in, std::nullopt, std::nullopt, -1);
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  std::reverse(items->begin(), items->end());
  return Value::List(std::move(*items));
}

absl::StatusOr<Value> FUnique(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  const Value* cs = Arg(a, 0, "case_sensitive");
  const Value* attr = Arg(a, 1, "attribute");
  std::vector<Value> out, seen;
  for (const Value& x : *items) {
    Value k = attr && attr->is_string() ? GetAttrPath(x, attr->str(), ctx) : x;
    if (k.is_string() && !(cs && Truthy(*cs))) k = Value(AsciiLower(k.str()));
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, k); })) {
      seen.push_back(k);
      out.push_back(x);
    }
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> MinMax(const Value& in, CallArgs& a, const BuiltinContext& ctx, bool max) {
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  const Value* cs = Arg(a, 0, "case_sensitive");
  auto sorted = Sorted(std::move(*items), cs && Truthy(*cs), Arg(a, 1, "attribute"), ctx);
  if (!sorted.ok()) return sorted.status();
  if (sorted->empty()) return Value::Undefined("min/max of an empty sequence");
  return max ? sorted->back() : sorted->front();
}
absl::StatusOr<Value> FMin(const Value& in, CallArgs& a, const BuiltinContext& ctx) { return MinMax(in, a, ctx, false); }
absl::StatusOr<Value> FMax(const Value& in, CallArgs& a, const BuiltinContext& ctx) { return MinMax(in, a, ctx, true); }

absl::StatusOr<Value> FSum(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  const Value* attr = Arg(a, 0, "attribute");
  const Value* start = Arg(a, 1, "start");
  Value total = start ? *start : Value(0);
  for (const Value& x : *items) {
    auto r = BinaryOp("+", total, attr && attr->is_string() ? GetAttrPath(x, attr->str(), ctx) : x, ctx.max_bytes);
    if (!r.ok()) return r.status();
    total = *r;
  }
  return total;
}

absl::StatusOr<Value> FEscape(const Value& in, CallArgs&, const BuiltinContext& ctx) {
  auto s = Str(in, ctx);
  if (!s.ok()) return s.status();
  std::string out;
  for (char c : *s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  if (out.size() > ctx.max_bytes) return absl::ResourceExhaustedError("chat template: escape result too large");
  return Value(std::move(out));
}

absl::StatusOr<Value> FAttr(const Value& in, CallArgs& a, const BuiltinContext& ctx) {
  const Value* name = Arg(a, 0, "name");
  if (!name || !name->is_string()) return BadArg("attr", "needs an attribute name");
  if (in.is_undefined()) return GetAttr(in, name->str(), ctx);
  Value m = BoundMethod(in, name->str(), ctx);
  if (!m.is_undefined() || in.kind() != Kind::kNamespace) return m;
  const Value* x = in.Find(name->str());
  return x ? *x : Value::Undefined(name->str());
}

absl::StatusOr<Value> FWordCount(const Value& in, CallArgs&, const BuiltinContext& ctx) {
  auto s = Str(in, ctx);
  if (!s.ok()) return s.status();
  return Value(static_cast<int64_t>(PySplit(*s, std::nullopt, -1).size()));
}

const absl::flat_hash_map<std::string, FilterFn>& Filters() {
  static const auto* const kFilters = new absl::flat_hash_map<std::string, FilterFn>{
      {"trim", FTrim},       {"length", FLength},         {"count", FLength},        {"upper", FUpper},
      {"lower", FLower},     {"capitalize", FCapitalize}, {"title", FTitle},         {"tojson", FToJson},
      {"default", FDefault}, {"d", FDefault},             {"first", FFirst},         {"last", FLast},
      {"join", FJoin},       {"replace", FReplace},       {"string", FString},       {"items", FItems},
      {"safe", FSafe},       {"indent", FIndent},         {"list", FList},           {"select", FSelect},
      {"reject", FReject},   {"selectattr", FSelectAttr}, {"rejectattr", FRejectAttr}, {"map", FMap},
      {"abs", FAbs},         {"int", FInt},               {"float", FFloat},         {"sort", FSort},
      {"dictsort", FDictSort}, {"reverse", FReverse},     {"unique", FUnique},       {"min", FMin},
      {"max", FMax},         {"sum", FSum},               {"e", FEscape},            {"escape", FEscape},
      {"forceescape", FEscape}, {"attr", FAttr},          {"wordcount", FWordCount},
  };
  return *kFilters;
}

}  // namespace

bool IsFilter(std::string_view name) { return Filters().contains(std::string(name)); }

absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& input, CallArgs& args,
                                  const BuiltinContext& ctx) {
  auto it = Filters().find(name);
  if (it == Filters().end()) return absl::InvalidArgumentError(absl::StrCat("chat template: no filter named '", name, "'"));
  return it->second(input, args, ctx);
}

}  // namespace specserve::jinja
