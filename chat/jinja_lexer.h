// Template text to tokens, as Jinja2's lexer does it: text between tags,
// `{{ }}` / `{% %}` delimiters with the expression tokens inside them, and
// comments dropped. Whitespace control happens here:
//   `{%-` / `-%}` (any tag kind) strip all whitespace before / after the tag;
//   trim_blocks drops the first newline after a block or comment tag;
//   lstrip_blocks drops spaces and tabs from the start of a line up to a
//   block or comment tag; `{%+` / `+%}` turn either off for that tag;
//   without keep_trailing_newline one final newline of the template goes.
// Newlines (\r\n, \r) are normalised to \n first, as Jinja does.
// `{% raw %}...{% endraw %}` becomes one text token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace specserve::jinja {

// Jinja2's Environment settings that change lexing. Jinja's defaults are all
// false; HF transformers renders chat templates with trim_blocks and
// lstrip_blocks on (kHfChatSyntax).
struct Syntax {
  bool trim_blocks = false;
  bool lstrip_blocks = false;
  bool keep_trailing_newline = false;
};
inline constexpr Syntax kHfChatSyntax{true, true, false};

enum class TokenType {
  kText,        // literal template text (`text`)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier or keyword (`text`)
  kString,      // string literal, escapes decoded (`text`)
  kInt,         // `int_value`
  kFloat,       // `float_value`
  kOp,          // operator or punctuation (`text`): + - * / // % ** ~ == != < <= > >= = . , : | ( ) [ ] { }
  kEnd,         // end of the template
};

struct Token {
  TokenType type;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  size_t pos = 0;  // byte offset in the normalised source
};

// "line L, column C" of byte offset POS of SOURCE (1-based).
std::string Position(std::string_view source, size_t pos);

// The tokens of SOURCE (after newline normalisation, which *NORMALISED
// receives, for positions in messages), ending with kEnd.
// INVALID_ARGUMENT naming the position for an unclosed tag, comment or
// string, or a character no token starts with.
absl::StatusOr<std::vector<Token>> Lex(std::string_view source, const Syntax& syntax, std::string* normalised);

}  // namespace specserve::jinja
