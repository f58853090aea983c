// Tokens to a statement tree, with Jinja2's grammar and operator precedence
// (lowest first): `x if c else y`, or, and, not, comparisons and `in`
// (chained), + -, ~, * / // %, **, unary - +, then filters `|` and tests
// `is` (which bind tighter than any binary operator), postfix `.attr`,
// `[i]`, `[a:b:c]` and calls.
//
// Statements: if/elif/else, for (with `if` filter, else, tuple targets),
// set (names, tuples, namespace attributes, block set), macro, filter
// blocks, break/continue, generation (HF's tag: rendered in place).
// Unsupported tags (include, import, extends, block inheritance, call) are
// an error. Unknown filters and tests are errors here, as Jinja2 reports
// them when it compiles.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace specserve::jinja {

// Nesting bounds that keep a hostile template from exhausting the stack.
inline constexpr int kMaxParseDepth = 64;     // parentheses, unary operators, nested blocks
inline constexpr int kMaxExprHeight = 128;    // an expression tree's height (long a + b + ... chains)

// INVALID_ARGUMENT with "line L, column C" of SOURCE for a syntax error.
absl::StatusOr<Body> Parse(const std::vector<Token>& tokens, std::string_view source);

}  // namespace specserve::jinja
