#include "chat/jinja_eval.h"

#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_ops.h"

namespace specserve::jinja {
namespace {

// Counted nesting of Exec/Eval calls; with the parser's bounds and
// max_call_depth it keeps the native stack small.
constexpr int kMaxEvalDepth = 1000;

#define EVAL_ASSIGN(lhs, expr)                  \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(lhs##_or).value()
#define EVAL_CHECK(expr)       \
  do {                         \
    absl::Status st_ = (expr); \
    if (!st_.ok()) return st_; \
  } while (0)

enum class Flow { kNormal, kBreak, kContinue };

class Evaluator {
 public:
  Evaluator(std::string_view src, const RenderLimits& limits) : src_(src), limits_(limits) {
    ctx_.max_bytes = limits.max_output_bytes;
  }

  absl::StatusOr<std::string> Run(const Body& body, const Vars& vars) {
    auto root = std::make_shared<Scope>();
    for (auto& [k, v] : GlobalFunctions()) (*root)[k] = std::move(v);
    for (const auto& [k, v] : vars) (*root)[k] = v;
    scopes_.push_back(std::move(root));
    std::string out;
    EVAL_ASSIGN(flow, Exec(body, &out));
    (void)flow;
    return out;
  }

 private:
  using Scope = absl::flat_hash_map<std::string, Value>;

  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };

  absl::Status Tick() {
    if (++steps_ > limits_.max_steps) {
      return absl::ResourceExhaustedError(absl::StrCat("chat template: more than ", limits_.max_steps, " steps"));
    }
    if (depth_ > kMaxEvalDepth) return absl::ResourceExhaustedError("chat template: evaluation nests too deep");
    return absl::OkStatus();
  }

  // Work a builtin does in proportion to its input (a filter over a list,
  // `in`, a method on a long string) counts against max_steps too: one step
  // per item, or per 16 bytes of a string.
  static int64_t Cost(const Value& v) {
    switch (v.kind()) {
      case Kind::kString: return static_cast<int64_t>(v.str().size() / 16);
      case Kind::kList: return static_cast<int64_t>(v.items().size());
      case Kind::kDict:
      case Kind::kNamespace: return static_cast<int64_t>(v.entries().size());
      default: return 0;
    }
  }
  absl::Status Charge(int64_t n) {
    steps_ += n;
    if (steps_ > limits_.max_steps) {
      return absl::ResourceExhaustedError(absl::StrCat("chat template: more than ", limits_.max_steps, " steps"));
    }
    return absl::OkStatus();
  }

  // Adds the position of the expression at fault, once (errors raised by the
  // template itself keep their text as written).
  absl::Status At(size_t pos, absl::Status s) const {
    if (s.ok() || s.code() != absl::StatusCode::kInvalidArgument ||
        absl::StartsWith(s.message(), kRaisedPrefix) || absl::StrContains(s.message(), ", column ")) {
      return s;
    }
    absl::string_view msg = s.message();
    if (absl::StartsWith(msg, "chat template: ")) msg.remove_prefix(15);
    return absl::InvalidArgumentError(absl::StrCat("chat template: ", Position(src_, pos), ": ", msg));
  }

  absl::Status Emit(std::string* out, std::string_view text) const {
    if (out->size() + text.size() > limits_.max_output_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("chat template: output passes ", limits_.max_output_bytes, " bytes"));
    }
    out->append(text);
    return absl::OkStatus();
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = (*it)->find(name);
      if (f != (*it)->end()) return f->second;
    }
    return Value::Undefined(name);
  }

  // --- statements ---

  absl::StatusOr<Flow> Exec(const Body& body, std::string* out) {
    for (const auto& s : body) {
      EVAL_ASSIGN(flow, ExecStmt(*s, out));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  absl::StatusOr<Flow> ExecStmt(const Stmt& s, std::string* out) {
    DepthGuard g(&depth_);
    EVAL_CHECK(Tick());
    switch (s.kind) {
      case Stmt::Kind::kText: EVAL_CHECK(Emit(out, s.text)); return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        EVAL_ASSIGN(v, Eval(*s.expr));
        std::string text;
        EVAL_CHECK(At(s.expr->pos, AppendStr(v, &text, limits_.max_output_bytes)));
        EVAL_CHECK(Emit(out, text));
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < s.conds.size(); ++i) {
          EVAL_ASSIGN(c, Eval(*s.conds[i]));
          if (Truthy(c)) return Exec(s.bodies[i], out);
        }
        return Exec(s.else_body, out);
      case Stmt::Kind::kFor: return ExecFor(s, out);
      case Stmt::Kind::kSet: {
        EVAL_ASSIGN(v, Eval(*s.expr));
        return Assign(s, std::move(v));
      }
      case Stmt::Kind::kSetBlock: {
        std::string text;
        EVAL_ASSIGN(flow, Exec(s.body, &text));
        (void)flow;
        return Assign(s, Value(std::move(text)));
      }
      case Stmt::Kind::kMacro: DefineMacro(s); return Flow::kNormal;
      case Stmt::Kind::kFilterBlock: {
        std::string text;
        EVAL_ASSIGN(flow, Exec(s.body, &text));
        (void)flow;
        EVAL_ASSIGN(v, FilterChain(*s.expr, Value(std::move(text))));
        std::string rendered;
        EVAL_CHECK(At(s.pos, AppendStr(v, &rendered, limits_.max_output_bytes)));
        EVAL_CHECK(Emit(out, rendered));
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      case Stmt::Kind::kBlock: return Exec(s.body, out);
      case Stmt::Kind::kCallBlock: break;
    }
    return At(s.pos, absl::InvalidArgumentError("chat template: unsupported statement"));
  }

  // Binds TARGETS to V in the innermost scope (unpacking a list into
  // several names), or sets a namespace attribute.
  absl::Status Bind(const std::vector<std::string>& targets, const Value& v, size_t pos) {
    if (targets.size() == 1) {
      (*scopes_.back())[targets[0]] = v;
      return absl::OkStatus();
    }
    auto items = Iterate(v);  // lists, a string's characters, a dict's keys
    if (!items.ok() || v.is_undefined() || items->size() != targets.size()) {
      return At(pos, absl::InvalidArgumentError(absl::StrCat("chat template: cannot unpack ", KindName(v.kind()),
                                                             " into ", targets.size(), " names")));
    }
    for (size_t i = 0; i < targets.size(); ++i) (*scopes_.back())[targets[i]] = (*items)[i];
    return absl::OkStatus();
  }

  absl::StatusOr<Flow> Assign(const Stmt& s, Value v) {
    if (!s.attr.empty()) {
      Value ns = Lookup(s.targets[0]);
      if (ns.kind() != Kind::kNamespace) {
        return At(s.pos, absl::InvalidArgumentError(
                             absl::StrCat("chat template: cannot assign attribute on non-namespace object '",
                                          s.targets[0], "'")));
      }
      EVAL_CHECK(At(s.pos, ns.NamespaceSet(s.attr, std::move(v))));
      return Flow::kNormal;
    }
    EVAL_CHECK(Bind(s.targets, v, s.pos));
    return Flow::kNormal;
  }

  absl::StatusOr<Flow> ExecFor(const Stmt& s, std::string* out) {
    EVAL_ASSIGN(iterable, Eval(*s.expr));
    EVAL_CHECK(Charge(Cost(iterable)));
    auto all = Iterate(iterable);
    if (!all.ok()) return At(s.expr->pos, all.status());
    std::vector<Value> items;
    if (s.cond) {
      for (Value& x : *all) {
        scopes_.push_back(std::make_shared<Scope>());
        absl::Status st = Bind(s.targets, x, s.pos);
        absl::StatusOr<Value> keep = st.ok() ? Eval(*s.cond) : absl::StatusOr<Value>(st);
        scopes_.pop_back();
        if (!keep.ok()) return keep.status();
        if (Truthy(*keep)) items.push_back(std::move(x));
      }
    } else {
      items = std::move(*all);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      EVAL_CHECK(Tick());
      scopes_.push_back(std::make_shared<Scope>());
      absl::Status st = Bind(s.targets, items[i], s.pos);
      if (st.ok()) {
        auto loop = LoopValue(items, i);
        if (loop.ok()) {
          (*scopes_.back())["loop"] = std::move(*loop);
        } else {
          st = loop.status();
        }
      }
      absl::StatusOr<Flow> flow = st.ok() ? Exec(s.body, out) : absl::StatusOr<Flow>(st);
      scopes_.pop_back();
      if (!flow.ok()) return flow.status();
      if (*flow == Flow::kBreak) break;
    }
    if (n == 0) return Exec(s.else_body, out);
    return Flow::kNormal;
  }

  absl::StatusOr<Value> LoopValue(const std::vector<Value>& items, int64_t i) {
    const int64_t n = static_cast<int64_t>(items.size());
    std::vector<std::pair<std::string, Value>> e = {
        {"index0", Value(i)},
        {"index", Value(i + 1)},
        {"revindex0", Value(n - i - 1)},
        {"revindex", Value(n - i)},
        {"first", Value(i == 0)},
        {"last", Value(i == n - 1)},
        {"length", Value(n)},
        {"depth", Value(1)},
        {"depth0", Value(0)},
        {"previtem", i > 0 ? items[i - 1] : Value::Undefined("loop.previtem")},
        {"nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("loop.nextitem")},
        {"cycle", Value::Function("loop.cycle", [i](CallArgs& a) -> absl::StatusOr<Value> {
           if (a.pos.empty()) return absl::InvalidArgumentError("chat template: loop.cycle() needs arguments");
           return a.pos[static_cast<size_t>(i) % a.pos.size()];
         })},
    };
    return Value::Dict(std::move(e));
  }

  void DefineMacro(const Stmt& s) {
    const Stmt* macro = &s;
    (*scopes_.back())[s.text] = Value::Function(s.text, [this, macro](CallArgs& a) { return CallMacro(*macro, a); });
  }

  absl::StatusOr<Value> CallMacro(const Stmt& m, CallArgs& a) {
    if (call_depth_ >= limits_.max_call_depth) {
      return absl::ResourceExhaustedError(
          absl::StrCat("chat template: macro calls nest deeper than ", limits_.max_call_depth));
    }
    if (a.pos.size() > m.params.size()) {
      return absl::InvalidArgumentError(absl::StrCat("chat template: macro '", m.text, "' takes ", m.params.size(),
                                                     " arguments, got ", a.pos.size()));
    }
    auto scope = std::make_shared<Scope>();
    std::vector<std::shared_ptr<Scope>> saved = {scopes_.front(), scope};
    std::swap(saved, scopes_);  // the macro sees the template's globals and its own arguments
    absl::Status st;
    for (size_t i = 0; i < m.params.size() && st.ok(); ++i) {
      const auto& [name, dflt] = m.params[i];
      std::optional<Value> v;
      if (i < a.pos.size()) v = a.pos[i];
      for (const auto& [k, x] : a.kw) {
        if (k == name) v = x;
      }
      if (!v && dflt) {
        auto d = Eval(*dflt);
        if (!d.ok()) {
          st = d.status();
          break;
        }
        v = *d;
      }
      (*scope)[name] = v ? *v : Value::Undefined(name);
    }
    std::string text;
    ++call_depth_;
    if (st.ok()) {
      auto flow = Exec(m.body, &text);
      if (!flow.ok()) st = flow.status();
    }
    --call_depth_;
    std::swap(saved, scopes_);
    if (!st.ok()) return st;
    return Value(std::move(text));
  }

  // A {% filter %} block's chain applied to INPUT.
  absl::StatusOr<Value> FilterChain(const Expr& f, Value input) {
    Value in = std::move(input);
    if (f.args[0]) {
      EVAL_ASSIGN(inner, FilterChain(*f.args[0], std::move(in)));
      in = std::move(inner);
    }
    EVAL_ASSIGN(args, Args(f, 1));
    auto r = ApplyFilter(f.name, in, args, ctx_);
    if (!r.ok()) return At(f.pos, r.status());
    return r;
  }

  // --- expressions ---

  absl::StatusOr<CallArgs> Args(const Expr& e, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) {
      EVAL_ASSIGN(v, Eval(*e.args[i]));
      a.pos.push_back(std::move(v));
    }
    for (const auto& [k, x] : e.kwargs) {
      EVAL_ASSIGN(v, Eval(*x));
      a.kw.emplace_back(k, std::move(v));
    }
    return a;
  }

  absl::StatusOr<std::optional<int64_t>> SliceBound(const Expr* e) {
    if (!e) return std::optional<int64_t>();
    EVAL_ASSIGN(v, Eval(*e));
    if (v.is_none()) return std::optional<int64_t>();
    if (v.kind() != Kind::kInt && v.kind() != Kind::kBool) {
      return At(e->pos, absl::InvalidArgumentError("chat template: slice indices must be integers or none"));
    }
    return std::optional<int64_t>(v.int_value());
  }

  absl::StatusOr<Value> Eval(const Expr& e) {
    DepthGuard g(&depth_);
    EVAL_CHECK(Tick());
    absl::StatusOr<Value> v = EvalInner(e);
    if (!v.ok()) return At(e.pos, v.status());
    if (v->is_string() && v->str().size() > limits_.max_output_bytes) {
      return absl::ResourceExhaustedError("chat template: a string passes the output limit");
    }
    return v;
  }

  absl::StatusOr<Value> EvalInner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: return Lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        std::vector<Value> items;
        for (const auto& x : e.args) {
          EVAL_ASSIGN(v, Eval(*x));
          items.push_back(std::move(v));
        }
        return e.kind == Expr::Kind::kTuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
      }
      case Expr::Kind::kDict: {
        std::vector<std::pair<std::string, Value>> entries;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          EVAL_ASSIGN(k, Eval(*e.args[i]));
          if (!k.is_string()) {
            return absl::InvalidArgumentError(
                absl::StrCat("chat template: dict keys must be strings, not ", KindName(k.kind())));
          }
          EVAL_ASSIGN(v, Eval(*e.args[i + 1]));
          entries.emplace_back(k.str(), std::move(v));
        }
        return Value::Dict(std::move(entries));
      }
      case Expr::Kind::kGetAttr: {
        EVAL_ASSIGN(obj, Eval(*e.args[0]));
        EVAL_ASSIGN(attr, GetAttr(obj, e.name, ctx_));
        if (attr.kind() == Kind::kFunction) EVAL_CHECK(Charge(Cost(obj)));  // a method works on all of OBJ
        return attr;
      }
      case Expr::Kind::kGetItem: {
        EVAL_ASSIGN(obj, Eval(*e.args[0]));
        EVAL_ASSIGN(key, Eval(*e.args[1]));
        if (obj.is_string()) EVAL_CHECK(Charge(Cost(obj)));  // indexing counts code points
        return GetItem(obj, key, ctx_);
      }
      case Expr::Kind::kSlice: {
        EVAL_ASSIGN(obj, Eval(*e.args[0]));
        EVAL_ASSIGN(start, SliceBound(e.args[1].get()));
        EVAL_ASSIGN(stop, SliceBound(e.args[2].get()));
        EVAL_ASSIGN(step, SliceBound(e.args[3].get()));
        EVAL_CHECK(Charge(Cost(obj)));
        return Slice(obj, start, stop, step);
      }
      case Expr::Kind::kCall: {
        EVAL_ASSIGN(fn, Eval(*e.args[0]));
        if (fn.kind() != Kind::kFunction) {
          if (fn.is_undefined()) {
            return absl::InvalidArgumentError(absl::StrCat("chat template: '", fn.str(), "' is undefined"));
          }
          return absl::InvalidArgumentError(
              absl::StrCat("chat template: ", KindName(fn.kind()), " object is not callable"));
        }
        EVAL_ASSIGN(args, Args(e, 1));
        for (const Value& a : args.pos) EVAL_CHECK(Charge(Cost(a)));
        for (const auto& [k, a] : args.kw) EVAL_CHECK(Charge(Cost(a)));
        return fn.function().fn(args);
      }
      case Expr::Kind::kFilter: {
        EVAL_ASSIGN(in, Eval(*e.args[0]));
        EVAL_ASSIGN(args, Args(e, 1));
        EVAL_CHECK(Charge(Cost(in)));
        return ApplyFilter(e.name, in, args, ctx_);
      }
      case Expr::Kind::kTest: {
        EVAL_ASSIGN(in, Eval(*e.args[0]));
        EVAL_ASSIGN(args, Args(e, 1));
        EVAL_ASSIGN(r, ApplyTest(e.name, in, args));
        return Value(r != e.negated);
      }
      case Expr::Kind::kNot: {
        EVAL_ASSIGN(v, Eval(*e.args[0]));
        return Value(!Truthy(v));
      }
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos: {
        EVAL_ASSIGN(v, Eval(*e.args[0]));
        if (v.kind() == Kind::kFloat) return Value(e.kind == Expr::Kind::kNeg ? -v.float_value() : v.float_value());
        if (!v.is_number()) {
          return absl::InvalidArgumentError(
              absl::StrCat("chat template: bad operand type for unary operator: ", KindName(v.kind())));
        }
        if (e.kind == Expr::Kind::kPos) return Value(v.int_value());
        if (v.int_value() == INT64_MIN) return absl::InvalidArgumentError("chat template: integer overflow");
        return Value(-v.int_value());
      }
      case Expr::Kind::kBinary: {
        EVAL_ASSIGN(a, Eval(*e.args[0]));
        EVAL_ASSIGN(b, Eval(*e.args[1]));
        EVAL_CHECK(Charge(Cost(a) + Cost(b)));
        return BinaryOp(e.name, a, b, limits_.max_output_bytes);
      }
      case Expr::Kind::kCompare: return Compare(e);
      case Expr::Kind::kAnd:
      case Expr::Kind::kOr: {
        EVAL_ASSIGN(a, Eval(*e.args[0]));
        if (Truthy(a) == (e.kind == Expr::Kind::kOr)) return a;
        return Eval(*e.args[1]);
      }
      case Expr::Kind::kCond: {
        EVAL_ASSIGN(c, Eval(*e.args[0]));
        if (Truthy(c)) return Eval(*e.args[1]);
        if (e.args[2]) return Eval(*e.args[2]);
        return Value::Undefined("conditional expression");
      }
    }
    return absl::InvalidArgumentError("chat template: unknown expression");
  }

  absl::StatusOr<Value> Compare(const Expr& e) {
    EVAL_ASSIGN(left, Eval(*e.args[0]));
    for (size_t i = 0; i < e.ops.size(); ++i) {
      EVAL_ASSIGN(right, Eval(*e.args[i + 1]));
      EVAL_CHECK(Charge(Cost(left) + Cost(right)));
      const std::string& op = e.ops[i];
      bool r;
      if (op == "==" || op == "!=") {
        r = Equals(left, right) == (op == "==");
      } else if (op == "in" || op == "notin") {
        EVAL_ASSIGN(c, Contains(right, left));
        r = c == (op == "in");
      } else {
        if (left.is_undefined() || right.is_undefined()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "chat template: '", (left.is_undefined() ? left : right).str(), "' is undefined"));
        }
        const bool swap = op == ">" || op == "<=";
        EVAL_ASSIGN(lt, swap ? Less(right, left) : Less(left, right));
        r = (op == "<" || op == ">") ? lt : !lt;
      }
      if (!r) return Value(false);
      left = std::move(right);
    }
    return Value(true);
  }

  std::string_view src_;
  RenderLimits limits_;
  BuiltinContext ctx_;
  std::vector<std::shared_ptr<Scope>> scopes_;
  int64_t steps_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
};

}  // namespace

absl::StatusOr<std::string> Evaluate(const Body& body, std::string_view source, const Vars& vars,
                                     const RenderLimits& limits) {
  return Evaluator(source, limits).Run(body, vars);
}

}  // namespace specserve::jinja
