#include "chat/jinja_lexer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "chat/jinja_text.h"

namespace specserve::jinja {

std::string Position(std::string_view source, size_t pos) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return absl::StrCat("line ", line, ", column ", col);
}

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

std::string_view RStripAll(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

class Lexer {
 public:
  Lexer(std::string_view src, const Syntax& syntax) : s_(src), syntax_(syntax) {}

  absl::StatusOr<std::vector<Token>> Run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < s_.size()) {
      size_t open = FindOpener(pos);
      std::string_view text = s_.substr(pos, open - pos);
      if (open == s_.size()) {
        EmitText(text, pos);
        break;
      }
      const char kind = s_[open + 1];  // '{', '%' or '#'
      const char mod = open + 2 < s_.size() ? s_[open + 2] : '\0';
      if (mod == '-') {
        text = RStripAll(text);
      } else if (mod != '+' && syntax_.lstrip_blocks && kind != '{') {
        // Only spaces between the line start and the tag: drop them.
        const size_t nl = text.rfind('\n');
        const size_t line_start = nl == std::string_view::npos ? 0 : nl + 1;
        if (line_start > 0 || line_starting) {
          std::string_view tail = text.substr(line_start);
          bool blank = !tail.empty();
          for (char c : tail) blank = blank && IsSpace(c);
          if (blank) text = text.substr(0, line_start);
        }
      }
      EmitText(text, pos);
      size_t after = open + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      absl::StatusOr<size_t> end;
      if (kind == '#') {
        end = Comment(open, after);
      } else if (kind == '%' && IsRaw(after)) {
        end = Raw(open, after);
      } else {
        end = Tag(open, after, kind == '%');
      }
      if (!end.ok()) return end.status();
      pos = *end;
      line_starting = pos > 0 && s_[pos - 1] == '\n';
    }
    out_.push_back(Token{TokenType::kEnd, "", 0, 0, s_.size()});
    return std::move(out_);
  }

 private:
  size_t FindOpener(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i) {
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return s_.size();
  }

  void EmitText(std::string_view text, size_t pos) {
    if (!text.empty()) out_.push_back(Token{TokenType::kText, std::string(text), 0, 0, pos});
  }

  absl::Status Error(size_t pos, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("chat template: ", Position(s_, pos), ": ", what));
  }

  // After a tag's closing delimiter at END (one past it): the whitespace
  // control its modifier asks for. Returns where the next text starts.
  size_t AfterClose(size_t end, char mod, bool block_like) const {
    if (mod == '-') {
      while (end < s_.size() && IsSpace(s_[end])) ++end;
    } else if (mod != '+' && block_like && syntax_.trim_blocks && end < s_.size() && s_[end] == '\n') {
      ++end;
    }
    return end;
  }

  absl::StatusOr<size_t> Comment(size_t open, size_t after) {
    size_t close = s_.find("#}", after);
    if (close == std::string_view::npos) return Error(open, "unclosed comment ({# without #})");
    char mod = close > after && (s_[close - 1] == '-' || s_[close - 1] == '+') ? s_[close - 1] : '\0';
    return AfterClose(close + 2, mod, true);
  }

  // {% raw %} (optionally {%- raw -%}).
  bool IsRaw(size_t after) const {
    size_t i = after;
    while (i < s_.size() && IsSpace(s_[i])) ++i;
    if (s_.substr(i, 3) != "raw") return false;
    i += 3;
    while (i < s_.size() && IsSpace(s_[i])) ++i;
    return s_.substr(i, 2) == "%}" || s_.substr(i, 3) == "-%}";
  }

  absl::StatusOr<size_t> Raw(size_t open, size_t after) {
    size_t i = s_.find("%}", after);
    size_t body = i + 2;
    if (s_[i - 1] == '-') {
      while (body < s_.size() && IsSpace(s_[body])) ++body;
    }
    // Find {%[-+]? endraw [-+]?%}.
    for (size_t at = s_.find("{%", body); at != std::string_view::npos; at = s_.find("{%", at + 2)) {
      size_t j = at + 2;
      char mod_open = j < s_.size() && (s_[j] == '-' || s_[j] == '+') ? s_[j++] : '\0';
      while (j < s_.size() && IsSpace(s_[j])) ++j;
      if (s_.substr(j, 6) != "endraw") continue;
      j += 6;
      while (j < s_.size() && IsSpace(s_[j])) ++j;
      char mod_close = j < s_.size() && (s_[j] == '-' || s_[j] == '+') ? s_[j++] : '\0';
      if (s_.substr(j, 2) != "%}") continue;
      std::string_view text = s_.substr(body, at - body);
      if (mod_open == '-') text = RStripAll(text);
      EmitText(text, body);
      return AfterClose(j + 2, mod_close, true);
    }
    return Error(open, "unclosed {% raw %} (no {% endraw %})");
  }

  // The expression tokens of a {{ }} or {% %} tag, and its delimiters.
  absl::StatusOr<size_t> Tag(size_t open, size_t pos, bool block) {
    out_.push_back(Token{block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", 0, 0, open});
    std::vector<char> balance;
    const char closer = block ? '%' : '}';
    while (true) {
      while (pos < s_.size() && IsSpace(s_[pos])) ++pos;
      if (pos >= s_.size()) {
        return Error(open, block ? "unclosed block tag ({% without %})" : "unclosed variable tag ({{ without }})");
      }
      if (balance.empty()) {
        char mod = '\0';
        size_t at = pos;
        if ((s_[at] == '-' || (block && s_[at] == '+')) && at + 1 < s_.size()) mod = s_[at++];
        if (s_.substr(at, 2) == std::string_view(block ? "%}" : "}}")) {
          out_.push_back(Token{block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", 0, 0, pos});
          return AfterClose(at + 2, mod, block);
        }
      }
      (void)closer;
      const char c = s_[pos];
      if (IsNameStart(c)) {
        size_t start = pos;
        while (pos < s_.size() && IsNameChar(s_[pos])) ++pos;
        out_.push_back(Token{TokenType::kName, std::string(s_.substr(start, pos - start)), 0, 0, start});
      } else if (IsDigit(c)) {
        auto st = Number(&pos);
        if (!st.ok()) return st;
      } else if (c == '\'' || c == '"') {
        auto st = String(&pos);
        if (!st.ok()) return st;
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[",
                                           "]",  "(",  ")",  "{",  "}",  "<",  ">", "=", ".", ":", "|", ",", ";"};
        std::string op;
        for (const char* o : kOps) {
          if (s_.substr(pos, std::strlen(o)) == o) {
            op = o;
            break;
          }
        }
        if (op.empty()) return Error(pos, absl::StrCat("unexpected character '", std::string(1, c), "'"));
        if (op == "(" || op == "[" || op == "{") {
          balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (balance.empty() || balance.back() != op[0]) return Error(pos, absl::StrCat("unexpected '", op, "'"));
          balance.pop_back();
        }
        out_.push_back(Token{TokenType::kOp, op, 0, 0, pos});
        pos += op.size();
      }
    }
  }

  absl::Status Number(size_t* pos) {
    const size_t start = *pos;
    std::string digits;
    auto run = [&] {
      while (*pos < s_.size() && (IsDigit(s_[*pos]) || (s_[*pos] == '_' && *pos + 1 < s_.size() &&
                                                          IsDigit(s_[*pos + 1])))) {
        if (s_[*pos] != '_') digits.push_back(s_[*pos]);
        ++*pos;
      }
    };
    run();
    bool is_float = false;
    if (*pos + 1 < s_.size() && s_[*pos] == '.' && IsDigit(s_[*pos + 1])) {
      is_float = true;
      digits.push_back('.');
      ++*pos;
      run();
    }
    if (*pos < s_.size() && (s_[*pos] == 'e' || s_[*pos] == 'E')) {
      size_t j = *pos + 1;
      if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
      if (j < s_.size() && IsDigit(s_[j])) {
        is_float = true;
        digits.append(s_.substr(*pos, j - *pos));
        *pos = j;
        run();
      }
    }
    Token t{is_float ? TokenType::kFloat : TokenType::kInt, digits, 0, 0, start};
    if (is_float) {
      t.float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(digits.c_str(), &end, 10);
      if (errno == ERANGE) return Error(start, "integer literal out of range");
      t.int_value = v;
    }
    out_.push_back(std::move(t));
    return absl::OkStatus();
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // A quoted literal with Python's escapes (\n \t \\ \' \" \xhh \uhhhh ...).
  absl::Status String(size_t* pos) {
    const size_t start = *pos;
    const char q = s_[*pos];
    std::string v;
    size_t i = *pos + 1;
    while (true) {
      if (i >= s_.size()) return Error(start, "unterminated string literal");
      char c = s_[i];
      if (c == q) break;
      if (c != '\\') {
        v.push_back(c);
        ++i;
        continue;
      }
      if (i + 1 >= s_.size()) return Error(start, "unterminated string literal");
      char e = s_[i + 1];
      i += 2;
      switch (e) {
        case 'n': v.push_back('\n'); break;
        case 't': v.push_back('\t'); break;
        case 'r': v.push_back('\r'); break;
        case '\\': v.push_back('\\'); break;
        case '\'': v.push_back('\''); break;
        case '"': v.push_back('"'); break;
        case 'a': v.push_back('\a'); break;
        case 'b': v.push_back('\b'); break;
        case 'f': v.push_back('\f'); break;
        case 'v': v.push_back('\v'); break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            int h = i + k < s_.size() ? Hex(s_[i + k]) : -1;
            if (h < 0) return Error(i - 2, absl::StrCat("truncated \\", std::string(1, e), " escape"));
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF) return Error(i - 2, "escape outside Unicode");
          i += n;
          AppendUtf8(cp, &v);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {  // octal, up to three digits
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i < s_.size() && s_[i] >= '0' && s_[i] <= '7'; ++k) cp = cp * 8 + (s_[i++] - '0');
            AppendUtf8(cp, &v);
          } else {
            v.push_back('\\');  // unknown escapes stay as written
            v.push_back(e);
          }
      }
    }
    out_.push_back(Token{TokenType::kString, std::move(v), 0, 0, start});
    *pos = i + 1;
    return absl::OkStatus();
  }

  std::string_view s_;
  Syntax syntax_;
  std::vector<Token> out_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(std::string_view source, const Syntax& syntax, std::string* normalised) {
  std::string& s = *normalised;
  s.clear();
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s.push_back(source[i]);
    }
  }
  if (!syntax.keep_trailing_newline && !s.empty() && s.back() == '\n') s.pop_back();
  return Lexer(s, syntax).Run();
}

}  // namespace specserve::jinja
