// The parsed template: expressions and statements. One node type each, with
// a kind; the comment on each kind says which fields it uses.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace specserve::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kList,     // args: the items
    kTuple,    // args: the items (evaluates to a list)
    kDict,     // args: key, value, key, value, ...
    kGetAttr,  // args[0].name
    kGetItem,  // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]], absent parts null
    kCall,     // args[0](args[1:], kwargs)
    kFilter,   // args[0] | name(args[1:], kwargs)
    kTest,     // args[0] is [not: negated] name(args[1:])
    kNot,      // not args[0]
    kNeg,      // -args[0]
    kPos,      // +args[0]
    kBinary,   // args[0] name args[1], name one of + - * / // % ** ~
    kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ... (chained, as Python)
    kAnd,      // args[0] and args[1]
    kOr,       // args[0] or args[1]
    kCond,     // args[1] if args[0] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  size_t pos = 0;  // byte offset in the source
  int height = 1;  // of the tree below (bounded by the parser)
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare: == != < <= > >= in notin
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,       // text
    kOutput,     // {{ expr }}
    kIf,         // conds[i] -> bodies[i]; else_body
    kFor,        // for targets in expr [if cond] -> body; else_body when nothing iterated
    kSet,        // set targets = expr, or set targets[0].attr = expr (namespace)
    kSetBlock,   // set targets[0] %}body{% endset
    kMacro,      // macro name(params) -> body
    kCallBlock,  // call expr (caller() renders body)
    kFilterBlock,// filter: body rendered, then expr (a kFilter on a null input) applied
    kBreak,
    kContinue,
    kBlock,      // body rendered in place ({% generation %}, {% block %})
  };
  Kind kind;
  size_t pos = 0;
  std::string text;
  std::string attr;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro: name, default (may be null)
};

}  // namespace specserve::jinja
