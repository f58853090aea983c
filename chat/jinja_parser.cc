#include "chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "chat/jinja_builtins.h"

namespace specserve::jinja {
namespace {

#define PARSE_ASSIGN(lhs, expr) \
  auto lhs##_or = (expr);       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(lhs##_or).value()
#define PARSE_CHECK(expr)               \
  do {                                  \
    absl::Status st_ = (expr);          \
    if (!st_.ok()) return st_;          \
  } while (0)

int Height(const Expr& e) {
  int h = 0;
  for (const auto& a : e.args) {
    if (a) h = std::max(h, a->height);
  }
  for (const auto& [k, a] : e.kwargs) h = std::max(h, a->height);
  return h + 1;
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, std::string_view src) : t_(tokens), src_(src) {}

  absl::StatusOr<Body> Template() {
    std::string end;
    PARSE_ASSIGN(body, ParseBody({}, &end));
    return body;
  }

 private:
  // --- token helpers ---
  const Token& Cur() const { return t_[i_]; }
  const Token& Peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void Next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool IsOp(const char* op) const { return Cur().type == TokenType::kOp && Cur().text == op; }
  bool IsName(const char* n) const { return Cur().type == TokenType::kName && Cur().text == n; }
  bool AcceptOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool AcceptName(const char* n) {
    if (!IsName(n)) return false;
    Next();
    return true;
  }
  absl::Status Error(size_t pos, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("chat template: ", Position(src_, pos), ": ", what));
  }
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case TokenType::kText: return "template text";
      case TokenType::kVarBegin: return "'{{'";
      case TokenType::kVarEnd: return "'}}'";
      case TokenType::kBlockBegin: return "'{%'";
      case TokenType::kBlockEnd: return "'%}'";
      case TokenType::kEnd: return "end of template";
      case TokenType::kString: return "string literal";
      case TokenType::kInt:
      case TokenType::kFloat: return absl::StrCat("number ", t.text);
      default: return absl::StrCat("'", t.text, "'");
    }
  }
  absl::Status Expected(absl::string_view what) const {
    return Error(Cur().pos, absl::StrCat("expected ", what, ", got ", Describe(Cur())));
  }
  absl::Status ExpectOp(const char* op) {
    if (!AcceptOp(op)) return Expected(absl::StrCat("'", op, "'"));
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    if (Cur().type != TokenType::kBlockEnd) return Expected("'%}'");
    Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Cur().type != TokenType::kName) return Expected("a name");
    std::string n = Cur().text;
    Next();
    return n;
  }

  // Guards recursion depth: one per nested parenthesis, unary operator or block.
  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };
  absl::Status CheckDepth() const {
    if (depth_ > kMaxParseDepth) return Error(Cur().pos, absl::StrCat("nesting deeper than ", kMaxParseDepth));
    return absl::OkStatus();
  }

  ExprPtr Node(Expr::Kind kind, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  absl::StatusOr<ExprPtr> Checked(ExprPtr e) {
    e->height = Height(*e);
    if (e->height > kMaxExprHeight) {
      return Error(e->pos, absl::StrCat("expression nests deeper than ", kMaxExprHeight));
    }
    return e;
  }

  // --- statements ---

  // Statements until a {% tag %} whose name is in ENDS (left unconsumed after
  // the name, which goes to *END) or the end of the template (ENDS empty).
  absl::StatusOr<Body> ParseBody(std::initializer_list<const char*> ends, std::string* end) {
    DepthGuard g(&depth_);
    PARSE_CHECK(CheckDepth());
    Body body;
    while (true) {
      const Token& tok = Cur();
      if (tok.type == TokenType::kEnd) {
        if (ends.size() == 0) return body;
        std::string names;
        for (const char* e : ends) absl::StrAppend(&names, names.empty() ? "" : " or ", "{% ", e, " %}");
        return Error(tok.pos, absl::StrCat("unexpected end of template: missing ", names));
      }
      if (tok.type == TokenType::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->pos = tok.pos;
        s->text = tok.text;
        body.push_back(std::move(s));
        Next();
        continue;
      }
      if (tok.type == TokenType::kVarBegin) {
        Next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->pos = tok.pos;
        PARSE_ASSIGN(e, Expression(true));
        s->expr = std::move(e);
        if (Cur().type != TokenType::kVarEnd) return Expected("'}}'");
        Next();
        body.push_back(std::move(s));
        continue;
      }
      if (tok.type != TokenType::kBlockBegin) return Expected("template text or a tag");
      const Token& name = Peek();
      if (name.type == TokenType::kName) {
        for (const char* e : ends) {
          if (name.text == e) {
            Next();
            Next();
            *end = e;
            return body;
          }
        }
      }
      PARSE_ASSIGN(stmt, Statement());
      body.push_back(std::move(stmt));
    }
  }

  absl::StatusOr<std::unique_ptr<Stmt>> Statement() {
    const size_t pos = Cur().pos;
    Next();  // {%
    if (Cur().type != TokenType::kName) return Expected("a statement name");
    const std::string kw = Cur().text;
    const size_t kw_pos = Cur().pos;
    Next();
    auto s = std::make_unique<Stmt>();
    s->pos = pos;
    std::string end;
    if (kw == "if") {
      s->kind = Stmt::Kind::kIf;
      while (true) {
        PARSE_ASSIGN(cond, Expression(true));
        PARSE_CHECK(ExpectBlockEnd());
        PARSE_ASSIGN(body, ParseBody({"elif", "else", "endif"}, &end));
        s->conds.push_back(std::move(cond));
        s->bodies.push_back(std::move(body));
        if (end != "elif") break;
      }
      if (end == "else") {
        PARSE_CHECK(ExpectBlockEnd());
        PARSE_ASSIGN(body, ParseBody({"endif"}, &end));
        s->else_body = std::move(body);
      }
      PARSE_CHECK(ExpectBlockEnd());
      return s;
    }
    if (kw == "for") {
      s->kind = Stmt::Kind::kFor;
      PARSE_ASSIGN(targets, Targets());
      s->targets = std::move(targets);
      if (!AcceptName("in")) return Expected("'in'");
      PARSE_ASSIGN(iter, Tuple(false));
      s->expr = std::move(iter);
      if (AcceptName("if")) {
        PARSE_ASSIGN(cond, Expression(true));
        s->cond = std::move(cond);
      }
      if (IsName("recursive")) return Error(Cur().pos, "recursive for loops are not supported");
      PARSE_CHECK(ExpectBlockEnd());
      ++loop_depth_;
      auto body = ParseBody({"else", "endfor"}, &end);
      --loop_depth_;
      if (!body.ok()) return body.status();
      s->body = std::move(*body);
      if (end == "else") {
        PARSE_CHECK(ExpectBlockEnd());
        PARSE_ASSIGN(else_body, ParseBody({"endfor"}, &end));
        s->else_body = std::move(else_body);
      }
      PARSE_CHECK(ExpectBlockEnd());
      return s;
    }
    if (kw == "set") {
      PARSE_ASSIGN(first, ExpectName());
      s->targets.push_back(first);
      if (AcceptOp(".")) {
        PARSE_ASSIGN(attr, ExpectName());
        s->attr = attr;
      } else {
        while (AcceptOp(",")) {
          PARSE_ASSIGN(n, ExpectName());
          s->targets.push_back(n);
        }
      }
      if (AcceptOp("=")) {
        s->kind = Stmt::Kind::kSet;
        PARSE_ASSIGN(e, Tuple(true));
        s->expr = std::move(e);
        PARSE_CHECK(ExpectBlockEnd());
        return s;
      }
      if (s->targets.size() != 1 || !s->attr.empty()) return Expected("'='");
      s->kind = Stmt::Kind::kSetBlock;
      PARSE_CHECK(ExpectBlockEnd());
      PARSE_ASSIGN(body, ParseBody({"endset"}, &end));
      s->body = std::move(body);
      PARSE_CHECK(ExpectBlockEnd());
      return s;
    }
    if (kw == "macro") {
      s->kind = Stmt::Kind::kMacro;
      PARSE_ASSIGN(name, ExpectName());
      s->text = name;
      PARSE_CHECK(ExpectOp("("));
      while (!IsOp(")")) {
        if (!s->params.empty()) PARSE_CHECK(ExpectOp(","));
        if (IsOp(")")) break;
        PARSE_ASSIGN(p, ExpectName());
        ExprPtr dflt;
        if (AcceptOp("=")) {
          PARSE_ASSIGN(d, Expression(true));
          dflt = std::move(d);
        }
        s->params.emplace_back(p, std::move(dflt));
      }
      Next();  // )
      PARSE_CHECK(ExpectBlockEnd());
      const int saved = loop_depth_;
      loop_depth_ = 0;
      auto body = ParseBody({"endmacro"}, &end);
      loop_depth_ = saved;
      if (!body.ok()) return body.status();
      s->body = std::move(*body);
      PARSE_CHECK(ExpectBlockEnd());
      return s;
    }
    if (kw == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      ExprPtr chain;  // a kFilter chain whose innermost input is null
      do {
        PARSE_ASSIGN(f, Filter(std::move(chain)));
        chain = std::move(f);
      } while (AcceptOp("|"));
      s->expr = std::move(chain);
      PARSE_CHECK(ExpectBlockEnd());
      PARSE_ASSIGN(body, ParseBody({"endfilter"}, &end));
      s->body = std::move(body);
      PARSE_CHECK(ExpectBlockEnd());
      return s;
    }
    if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) return Error(kw_pos, absl::StrCat("'", kw, "' outside a for loop"));
      s->kind = kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      PARSE_CHECK(ExpectBlockEnd());
      return s;
    }
    if (kw == "generation") {  // HF's AssistantTracker: marks assistant text, renders it unchanged
      s->kind = Stmt::Kind::kBlock;
      PARSE_CHECK(ExpectBlockEnd());
      PARSE_ASSIGN(body, ParseBody({"endgeneration"}, &end));
      s->body = std::move(body);
      PARSE_CHECK(ExpectBlockEnd());
      return s;
    }
    return Error(kw_pos, absl::StrCat("unknown or unsupported tag '", kw, "'"));
  }

  // for / set targets: a, b or (a, b).
  absl::StatusOr<std::vector<std::string>> Targets() {
    std::vector<std::string> names;
    const bool paren = AcceptOp("(");
    do {
      PARSE_ASSIGN(n, ExpectName());
      names.push_back(n);
    } while (AcceptOp(","));
    if (paren) PARSE_CHECK(ExpectOp(")"));
    return names;
  }

  // --- expressions ---

  // An expression, or several separated by commas (a tuple), as Jinja's
  // parse_tuple; WITH_CONDEXPR false leaves `if` to a for loop's filter.
  absl::StatusOr<ExprPtr> Tuple(bool with_condexpr) {
    const size_t pos = Cur().pos;
    PARSE_ASSIGN(first, Expression(with_condexpr));
    if (!IsOp(",")) return first;
    auto t = Node(Expr::Kind::kTuple, pos);
    t->args.push_back(std::move(first));
    while (AcceptOp(",")) {
      if (Cur().type == TokenType::kBlockEnd || Cur().type == TokenType::kVarEnd || IsOp(")")) break;
      PARSE_ASSIGN(e, Expression(with_condexpr));
      t->args.push_back(std::move(e));
    }
    return Checked(std::move(t));
  }

  absl::StatusOr<ExprPtr> Expression(bool with_condexpr) {
    DepthGuard g(&depth_);
    PARSE_CHECK(CheckDepth());
    if (!with_condexpr) return Or();
    PARSE_ASSIGN(expr, Or());
    while (IsName("if")) {
      const size_t pos = Cur().pos;
      Next();
      PARSE_ASSIGN(cond, Or());
      ExprPtr other;
      if (AcceptName("else")) {
        PARSE_ASSIGN(o, Expression(true));
        other = std::move(o);
      }
      auto c = Node(Expr::Kind::kCond, pos);
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(expr));
      c->args.push_back(std::move(other));
      PARSE_ASSIGN(checked, Checked(std::move(c)));
      expr = std::move(checked);
    }
    return expr;
  }

  absl::StatusOr<ExprPtr> Binary(ExprPtr left, Expr::Kind kind, std::string op, ExprPtr right, size_t pos) {
    auto b = Node(kind, pos);
    b->name = std::move(op);
    b->args.push_back(std::move(left));
    b->args.push_back(std::move(right));
    return Checked(std::move(b));
  }

  absl::StatusOr<ExprPtr> Or() {
    PARSE_ASSIGN(left, And());
    while (IsName("or")) {
      const size_t pos = Cur().pos;
      Next();
      PARSE_ASSIGN(right, And());
      PARSE_ASSIGN(b, Binary(std::move(left), Expr::Kind::kOr, "or", std::move(right), pos));
      left = std::move(b);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> And() {
    PARSE_ASSIGN(left, Not());
    while (IsName("and")) {
      const size_t pos = Cur().pos;
      Next();
      PARSE_ASSIGN(right, Not());
      PARSE_ASSIGN(b, Binary(std::move(left), Expr::Kind::kAnd, "and", std::move(right), pos));
      left = std::move(b);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> Not() {
    if (IsName("not")) {
      DepthGuard g(&depth_);
      PARSE_CHECK(CheckDepth());
      auto n = Node(Expr::Kind::kNot, Cur().pos);
      Next();
      PARSE_ASSIGN(inner, Not());
      n->args.push_back(std::move(inner));
      return Checked(std::move(n));
    }
    return Compare();
  }

  absl::StatusOr<ExprPtr> Compare() {
    const size_t pos = Cur().pos;
    PARSE_ASSIGN(first, Math1());
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Cur().type == TokenType::kOp &&
          (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp("<=") || IsOp(">") || IsOp(">="))) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == TokenType::kName && Peek().text == "in") {
        op = "notin";
        Next();
        Next();
      } else {
        break;
      }
      PARSE_ASSIGN(right, Math1());
      if (!cmp) {
        cmp = Node(Expr::Kind::kCompare, pos);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(std::move(right));
    }
    if (!cmp) return first;
    return Checked(std::move(cmp));
  }

  absl::StatusOr<ExprPtr> Math1() {
    PARSE_ASSIGN(left, Concat());
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Cur().text;
      const size_t pos = Cur().pos;
      Next();
      PARSE_ASSIGN(right, Concat());
      PARSE_ASSIGN(b, Binary(std::move(left), Expr::Kind::kBinary, op, std::move(right), pos));
      left = std::move(b);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> Concat() {
    PARSE_ASSIGN(left, Math2());
    while (IsOp("~")) {
      const size_t pos = Cur().pos;
      Next();
      PARSE_ASSIGN(right, Math2());
      PARSE_ASSIGN(b, Binary(std::move(left), Expr::Kind::kBinary, "~", std::move(right), pos));
      left = std::move(b);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> Math2() {
    PARSE_ASSIGN(left, Pow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = Cur().text;
      const size_t pos = Cur().pos;
      Next();
      PARSE_ASSIGN(right, Pow());
      PARSE_ASSIGN(b, Binary(std::move(left), Expr::Kind::kBinary, op, std::move(right), pos));
      left = std::move(b);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> Pow() {
    PARSE_ASSIGN(left, Unary(true));
    while (IsOp("**")) {
      const size_t pos = Cur().pos;
      Next();
      PARSE_ASSIGN(right, Unary(true));
      PARSE_ASSIGN(b, Binary(std::move(left), Expr::Kind::kBinary, "**", std::move(right), pos));
      left = std::move(b);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> Unary(bool with_filter) {
    DepthGuard g(&depth_);
    PARSE_CHECK(CheckDepth());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      auto u = Node(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur().pos);
      Next();
      PARSE_ASSIGN(inner, Unary(false));
      u->args.push_back(std::move(inner));
      node = std::move(u);
    } else {
      PARSE_ASSIGN(p, Primary());
      node = std::move(p);
    }
    PARSE_ASSIGN(post, Postfix(std::move(node)));
    if (!with_filter) return Checked(std::move(post));
    PARSE_ASSIGN(filtered, FilterExpr(std::move(post)));
    return Checked(std::move(filtered));
  }

  absl::StatusOr<ExprPtr> Primary() {
    const Token& tok = Cur();
    const size_t pos = tok.pos;
    if (tok.type == TokenType::kName) {
      const std::string& n = tok.text;
      auto e = Node(Expr::Kind::kLiteral, pos);
      if (n == "true" || n == "True") {
        e->value = Value(true);
      } else if (n == "false" || n == "False") {
        e->value = Value(false);
      } else if (n == "none" || n == "None") {
        e->value = Value::None();
      } else if (n == "and" || n == "or" || n == "not" || n == "in" || n == "is" || n == "if" || n == "else") {
        return Error(pos, absl::StrCat("unexpected '", n, "'"));
      } else {
        e->kind = Expr::Kind::kName;
        e->name = n;
      }
      Next();
      return e;
    }
    if (tok.type == TokenType::kString) {
      std::string s;
      while (Cur().type == TokenType::kString) {  // adjacent literals join
        s += Cur().text;
        Next();
      }
      auto e = Node(Expr::Kind::kLiteral, pos);
      e->value = Value(std::move(s));
      return e;
    }
    if (tok.type == TokenType::kInt || tok.type == TokenType::kFloat) {
      auto e = Node(Expr::Kind::kLiteral, pos);
      e->value = tok.type == TokenType::kInt ? Value(tok.int_value) : Value(tok.float_value);
      Next();
      return e;
    }
    if (IsOp("(")) {
      Next();
      if (AcceptOp(")")) return Node(Expr::Kind::kTuple, pos);
      PARSE_ASSIGN(inner, Tuple(true));
      PARSE_CHECK(ExpectOp(")"));
      return inner;
    }
    if (IsOp("[")) {
      Next();
      auto e = Node(Expr::Kind::kList, pos);
      while (!IsOp("]")) {
        if (!e->args.empty()) PARSE_CHECK(ExpectOp(","));
        if (IsOp("]")) break;
        PARSE_ASSIGN(item, Expression(true));
        e->args.push_back(std::move(item));
      }
      Next();
      return Checked(std::move(e));
    }
    if (IsOp("{")) {
      Next();
      auto e = Node(Expr::Kind::kDict, pos);
      while (!IsOp("}")) {
        if (!e->args.empty()) PARSE_CHECK(ExpectOp(","));
        if (IsOp("}")) break;
        PARSE_ASSIGN(key, Expression(true));
        PARSE_CHECK(ExpectOp(":"));
        PARSE_ASSIGN(val, Expression(true));
        e->args.push_back(std::move(key));
        e->args.push_back(std::move(val));
      }
      Next();
      return Checked(std::move(e));
    }
    return Expected("an expression");
  }

  absl::StatusOr<ExprPtr> Postfix(ExprPtr node) {
    while (true) {
      const size_t pos = Cur().pos;
      if (AcceptOp(".")) {
        if (Cur().type == TokenType::kInt) {  // foo.0 is foo[0]
          auto g = Node(Expr::Kind::kGetItem, pos);
          auto idx = Node(Expr::Kind::kLiteral, Cur().pos);
          idx->value = Value(Cur().int_value);
          Next();
          g->args.push_back(std::move(node));
          g->args.push_back(std::move(idx));
          node = std::move(g);
        } else {
          PARSE_ASSIGN(attr, ExpectName());
          auto g = Node(Expr::Kind::kGetAttr, pos);
          g->name = attr;
          g->args.push_back(std::move(node));
          node = std::move(g);
        }
      } else if (AcceptOp("[")) {
        PARSE_ASSIGN(sub, Subscript(std::move(node), pos));
        node = std::move(sub);
      } else if (IsOp("(")) {
        PARSE_ASSIGN(call, Call(std::move(node), Expr::Kind::kCall, pos));
        node = std::move(call);
      } else {
        break;
      }
      PARSE_ASSIGN(checked, Checked(std::move(node)));
      node = std::move(checked);
    }
    return node;
  }

  absl::StatusOr<ExprPtr> Subscript(ExprPtr obj, size_t pos) {
    ExprPtr parts[3];
    if (!IsOp(":")) {
      PARSE_ASSIGN(start, Expression(true));
      if (AcceptOp("]")) {
        auto g = Node(Expr::Kind::kGetItem, pos);
        g->args.push_back(std::move(obj));
        g->args.push_back(std::move(start));
        return g;
      }
      parts[0] = std::move(start);
    }
    PARSE_CHECK(ExpectOp(":"));
    if (!IsOp("]") && !IsOp(":")) {
      PARSE_ASSIGN(stop, Expression(true));
      parts[1] = std::move(stop);
    }
    if (AcceptOp(":") && !IsOp("]")) {
      PARSE_ASSIGN(step, Expression(true));
      parts[2] = std::move(step);
    }
    PARSE_CHECK(ExpectOp("]"));
    auto s = Node(Expr::Kind::kSlice, pos);
    s->args.push_back(std::move(obj));
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  // ( args, name=value ) after a callee, filter or test: appended to NODE.
  absl::Status CallArgs(Expr* node) {
    PARSE_CHECK(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) PARSE_CHECK(ExpectOp(","));
      first = false;
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**")) return Error(Cur().pos, "*args and **kwargs in calls are not supported");
      if (Cur().type == TokenType::kName && Peek().type == TokenType::kOp && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        PARSE_ASSIGN(v, Expression(true));
        node->kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        if (!node->kwargs.empty()) return Error(Cur().pos, "positional argument after a keyword argument");
        PARSE_ASSIGN(v, Expression(true));
        node->args.push_back(std::move(v));
      }
    }
    Next();  // )
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> Call(ExprPtr callee, Expr::Kind kind, size_t pos) {
    auto c = Node(kind, pos);
    c->args.push_back(std::move(callee));
    PARSE_CHECK(CallArgs(c.get()));
    return c;
  }

  // | name or | name(args); INPUT may be null (filter blocks).
  absl::StatusOr<ExprPtr> Filter(ExprPtr input) {
    const size_t pos = Cur().pos;
    PARSE_ASSIGN(name, ExpectName());
    if (!IsFilter(name)) return Error(pos, absl::StrCat("no filter named '", name, "'"));
    auto f = Node(Expr::Kind::kFilter, pos);
    f->name = name;
    f->args.push_back(std::move(input));
    if (IsOp("(")) PARSE_CHECK(CallArgs(f.get()));
    return f;
  }

  absl::StatusOr<ExprPtr> FilterExpr(ExprPtr node) {
    while (true) {
      if (AcceptOp("|")) {
        PARSE_ASSIGN(f, Filter(std::move(node)));
        node = std::move(f);
      } else if (IsName("is")) {
        const size_t pos = Cur().pos;
        Next();
        auto t = Node(Expr::Kind::kTest, pos);
        t->negated = AcceptName("not");
        const size_t name_pos = Cur().pos;
        PARSE_ASSIGN(name, ExpectName());
        if (!IsTest(name)) return Error(name_pos, absl::StrCat("no test named '", name, "'"));
        t->name = name;
        t->args.push_back(std::move(node));
        if (IsOp("(")) {
          PARSE_CHECK(CallArgs(t.get()));
        } else if ((Cur().type == TokenType::kName && !IsName("else") && !IsName("or") && !IsName("and") &&
                    !IsName("if") && !IsName("is") && !IsName("in") && !IsName("not")) ||
                   Cur().type == TokenType::kString || Cur().type == TokenType::kInt ||
                   Cur().type == TokenType::kFloat || IsOp("[") || IsOp("{")) {
          PARSE_ASSIGN(arg, Primary());  // `is divisibleby 3`, `is sameas false`
          PARSE_ASSIGN(arg_post, Postfix(std::move(arg)));
          t->args.push_back(std::move(arg_post));
        }
        node = std::move(t);
      } else if (IsOp("(")) {
        const size_t pos = Cur().pos;
        PARSE_ASSIGN(c, Call(std::move(node), Expr::Kind::kCall, pos));
        node = std::move(c);
      } else {
        return node;
      }
      PARSE_ASSIGN(checked, Checked(std::move(node)));
      node = std::move(checked);
    }
  }

  const std::vector<Token>& t_;
  std::string_view src_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens, std::string_view source) {
  return Parser(tokens, source).Template();
}

}  // namespace specserve::jinja
