#include "constrain/json_text.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace specserve::constrain {
namespace {

// A parsed pattern: alternatives of sequences of quantified atoms.
struct Node {
  enum Kind { kAlt, kSeq, kRepeat, kSet, kBytes } kind;
  std::vector<std::unique_ptr<Node>> kids;
  int64_t min = 0, max = 0;  // kRepeat; max < 0: unbounded
  CharSet set;               // kSet
  std::string bytes;         // kBytes: one non-ASCII character's UTF-8
};

CharSet Range(int lo, int hi) {
  CharSet s;
  for (int c = lo; c <= hi; ++c) s.ascii.set(c);
  return s;
}
CharSet Digits() { return Range('0', '9'); }
CharSet Word() {
  CharSet s = Digits();
  s.ascii |= Range('a', 'z').ascii | Range('A', 'Z').ascii;
  s.ascii.set('_');
  return s;
}
CharSet Space() {
  CharSet s;
  for (const char c : std::string(" \t\n\r\f\v")) s.ascii.set(c);
  return s;
}
// \D \W \S and friends: ASCII only, since Python's re (the reference
// validators) gives \w, \d and \s Unicode meanings.
CharSet NegateAscii(const CharSet& s) {
  CharSet out;
  out.ascii = ~s.ascii;
  return out;
}

class Parser {
 public:
  explicit Parser(const std::string& p) : p_(p) {}

  absl::StatusOr<std::unique_ptr<Node>> Parse(bool* anchored_start, bool* anchored_end) {
    if (Peek('^')) {
      ++i_;
      *anchored_start = true;
    }
    auto n = ParseAlt(0);
    if (!n.ok()) return n.status();
    if (i_ < p_.size()) return Error(absl::StrCat("unexpected '", std::string(1, p_[i_]), "'"));
    *anchored_end = anchored_end_;
    return n;
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrFormat("pattern \"%s\" at offset %d: %s", p_, i_, what));
  }
  bool Peek(char c) const { return i_ < p_.size() && p_[i_] == c; }

  absl::StatusOr<std::unique_ptr<Node>> ParseAlt(int depth) {
    if (depth > 32) return Error("groups nest too deep");
    auto alt = std::make_unique<Node>();
    alt->kind = Node::kAlt;
    while (true) {
      auto seq = ParseSeq(depth);
      if (!seq.ok()) return seq.status();
      alt->kids.push_back(std::move(*seq));
      if (!Peek('|')) break;
      if (depth == 0 && anchored_end_) return Error("'$' before the end of the pattern");
      ++i_;
      if (Peek('^')) return Error("'^' inside the pattern is not supported");
    }
    return alt;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseSeq(int depth) {
    auto seq = std::make_unique<Node>();
    seq->kind = Node::kSeq;
    while (i_ < p_.size() && !Peek('|') && !Peek(')')) {
      if (Peek('$')) {
        ++i_;
        if (depth != 0 || i_ != p_.size()) return Error("'$' before the end of the pattern is not supported");
        anchored_end_ = true;
        break;
      }
      if (Peek('^')) return Error("'^' inside the pattern is not supported");
      auto atom = ParseAtom(depth);
      if (!atom.ok()) return atom.status();
      auto q = ParseQuantifier(std::move(*atom));
      if (!q.ok()) return q.status();
      seq->kids.push_back(std::move(*q));
    }
    return seq;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseQuantifier(std::unique_ptr<Node> atom) {
    int64_t min, max;
    if (Peek('*')) {
      min = 0, max = -1, ++i_;
    } else if (Peek('+')) {
      min = 1, max = -1, ++i_;
    } else if (Peek('?')) {
      min = 0, max = 1, ++i_;
    } else if (Peek('{') && i_ + 1 < p_.size() && isdigit(static_cast<unsigned char>(p_[i_ + 1]))) {
      ++i_;
      min = ReadInt();
      max = min;
      if (Peek(',')) {
        ++i_;
        max = Peek('}') ? -1 : ReadInt();
      }
      if (!Peek('}')) return Error("bad {m,n} quantifier");
      ++i_;
      if (min > 100000 || max > 100000) return absl::ResourceExhaustedError(
          absl::StrFormat("pattern \"%s\": a repeat count above 100000", p_));
      if (max >= 0 && max < min) return Error("{m,n} with n < m");
    } else {
      return atom;
    }
    if (Peek('?')) ++i_;  // lazy: the same language
    if (Peek('*') || Peek('+') || Peek('?') || Peek('{')) return Error("a quantifier after a quantifier");
    auto r = std::make_unique<Node>();
    r->kind = Node::kRepeat;
    r->min = min;
    r->max = max;
    r->kids.push_back(std::move(atom));
    return r;
  }

  int64_t ReadInt() {
    int64_t v = 0;
    while (i_ < p_.size() && isdigit(static_cast<unsigned char>(p_[i_]))) {
      v = std::min<int64_t>(v * 10 + (p_[i_] - '0'), 1000000000);
      ++i_;
    }
    return v;
  }

  static std::unique_ptr<Node> SetNode(const CharSet& s) {
    auto n = std::make_unique<Node>();
    n->kind = Node::kSet;
    n->set = s;
    return n;
  }

  // One escape after '\' (i_ at the escaped character): a class or a char.
  absl::StatusOr<CharSet> ParseEscape(bool in_class) {
    if (i_ >= p_.size()) return Error("a trailing '\\'");
    const char c = p_[i_++];
    CharSet s;
    switch (c) {
      case 'd': return Digits();
      case 'D': return NegateAscii(Digits());
      case 'w': return Word();
      case 'W': return NegateAscii(Word());
      case 's': return Space();
      case 'S': return NegateAscii(Space());
      case 'n': s.ascii.set('\n'); return s;
      case 't': s.ascii.set('\t'); return s;
      case 'r': s.ascii.set('\r'); return s;
      case 'f': s.ascii.set('\f'); return s;
      case 'v': s.ascii.set('\v'); return s;
      case 'b':
        if (in_class) { s.ascii.set('\b'); return s; }
        return Error("word boundaries (\\b) are not supported");
      case 'B': return Error("word boundaries (\\B) are not supported");
      case 'k': return Error("backreferences (\\k) are not supported");
      case 'x': case 'u': {
        const size_t n = c == 'x' ? 2 : 4;
        if (i_ + n > p_.size()) return Error("a short \\x or \\u escape");
        int v = 0;
        for (size_t k = 0; k < n; ++k) {
          const char h = p_[i_ + k];
          if (!isxdigit(static_cast<unsigned char>(h))) return Error("a bad hex escape");
          v = v * 16 + (isdigit(static_cast<unsigned char>(h)) ? h - '0' : (tolower(h) - 'a' + 10));
        }
        i_ += n;
        if (v >= 128) return Error("non-ASCII \\x / \\u escapes are not supported (write the character)");
        s.ascii.set(v);
        return s;
      }
      default:
        if (c >= '1' && c <= '9') return Error("backreferences are not supported");
        if (isalnum(static_cast<unsigned char>(c))) return Error(absl::StrCat("unknown escape \\", std::string(1, c)));
        if (static_cast<unsigned char>(c) >= 128) return Error("an escaped non-ASCII character");
        s.ascii.set(c);
        return s;
    }
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseClass() {
    bool negate = false;
    if (Peek('^')) negate = true, ++i_;
    CharSet s;
    bool unicode_class = false;  // \w \d \s inside: Python gives them Unicode meaning
    bool first = true;
    while (i_ < p_.size() && (first || !Peek(']'))) {
      first = false;
      int lo;
      if (Peek('\\')) {
        ++i_;
        const char e = i_ < p_.size() ? p_[i_] : 0;
        auto es = ParseEscape(true);
        if (!es.ok()) return es.status();
        if (es->ascii.count() != 1) {
          unicode_class |= e == 'w' || e == 'd' || e == 's' || e == 'W' || e == 'D' || e == 'S';
          s.ascii |= es->ascii;
          continue;
        }
        lo = static_cast<int>(es->ascii._Find_first());
      } else {
        if (static_cast<unsigned char>(p_[i_]) >= 128) return Error("non-ASCII characters in a class are not supported");
        lo = p_[i_++];
      }
      if (Peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        int hi;
        if (Peek('\\')) {
          ++i_;
          auto es = ParseEscape(true);
          if (!es.ok()) return es.status();
          if (es->ascii.count() != 1) return Error("a class escape as a range end");
          hi = static_cast<int>(es->ascii._Find_first());
        } else {
          if (static_cast<unsigned char>(p_[i_]) >= 128) return Error("non-ASCII characters in a class are not supported");
          hi = p_[i_++];
        }
        if (hi < lo) return Error("a range out of order");
        s.ascii |= Range(lo, hi).ascii;
      } else {
        s.ascii.set(lo);
      }
    }
    if (!Peek(']')) return Error("an unterminated character class");
    ++i_;
    if (negate) {
      s.ascii = ~s.ascii;
      s.non_ascii = !unicode_class;
    }
    return SetNode(s);
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseAtom(int depth) {
    const unsigned char c = static_cast<unsigned char>(p_[i_]);
    if (c == '(') {
      ++i_;
      if (Peek('?')) {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
          i_ += 2;
        } else if (i_ + 2 < p_.size() && p_[i_ + 1] == '<' && p_[i_ + 2] != '=' && p_[i_ + 2] != '!') {
          while (i_ < p_.size() && p_[i_] != '>') ++i_;  // a named group
          if (i_ >= p_.size()) return Error("an unterminated group name");
          ++i_;
        } else {
          return Error("lookaround and other (? groups are not supported");
        }
      }
      auto inner = ParseAlt(depth + 1);
      if (!inner.ok()) return inner.status();
      if (!Peek(')')) return Error("an unclosed group");
      ++i_;
      return inner;
    }
    if (c == ')' || c == '*' || c == '+' || c == '?') return Error(absl::StrCat("unexpected '", std::string(1, c), "'"));
    if (c == '[') {
      ++i_;
      return ParseClass();
    }
    if (c == '.') {
      ++i_;
      CharSet s;
      s.ascii.set();
      s.ascii.reset('\n');
      s.ascii.reset('\r');
      s.non_ascii = true;
      return SetNode(s);
    }
    if (c == '\\') {
      ++i_;
      auto es = ParseEscape(false);
      if (!es.ok()) return es.status();
      return SetNode(*es);
    }
    if (c < 128) {
      ++i_;
      CharSet s;
      s.ascii.set(c);
      return SetNode(s);
    }
    // A non-ASCII character: its UTF-8 bytes as they are.
    size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (n == 1 || i_ + n > p_.size()) return Error("ill-formed UTF-8");
    auto node = std::make_unique<Node>();
    node->kind = Node::kBytes;
    node->bytes = p_.substr(i_, n);
    i_ += n;
    return node;
  }

  const std::string& p_;
  size_t i_ = 0;
  bool anchored_end_ = false;
};

Frag Emit(GrammarBuilder* b, const Node& n) {
  switch (n.kind) {
    case Node::kAlt: {
      if (n.kids.size() == 1) return Emit(b, *n.kids[0]);
      std::vector<Frag> alts;
      for (const auto& k : n.kids) alts.push_back(Emit(b, *k));
      return b->Alt(alts);
    }
    case Node::kSeq: {
      std::vector<Frag> parts;
      for (const auto& k : n.kids) parts.push_back(Emit(b, *k));
      return b->Seq(parts);
    }
    case Node::kRepeat:
      return b->Repeat([&] { return Emit(b, *n.kids[0]); }, n.min, n.max);
    case Node::kSet:
      return CharSetFrag(b, n.set);
    case Node::kBytes:
      return b->Literal(n.bytes);
  }
  return b->Empty();
}

}  // namespace

namespace {

// Reads one non-ASCII UTF-8 character from `in` to `out` (Unicode table 3-7,
// no surrogates), every first byte an edge of `in`.
void AddNonAscii(GrammarBuilder* b, int32_t in, int32_t out) {
  auto tail = [&](int n) {  // n continuation bytes 80-BF to `out`
    int32_t to = out;
    for (int k = 0; k < n; ++k) {
      const int32_t s = b->NewState();
      b->Byte(s, 0x80, 0xBF, to);
      to = s;
    }
    return to;
  };
  auto lead = [&](uint8_t lo, uint8_t hi, uint8_t lo2, uint8_t hi2, int rest) {
    const int32_t second = b->NewState();
    b->Byte(in, lo, hi, second);
    b->Byte(second, lo2, hi2, tail(rest));
  };
  b->Byte(in, 0xC2, 0xDF, tail(1));
  lead(0xE0, 0xE0, 0xA0, 0xBF, 1);
  lead(0xE1, 0xEC, 0x80, 0xBF, 1);
  lead(0xED, 0xED, 0x80, 0x9F, 1);
  lead(0xEE, 0xEF, 0x80, 0xBF, 1);
  lead(0xF0, 0xF0, 0x90, 0xBF, 2);
  lead(0xF1, 0xF3, 0x80, 0xBF, 2);
  lead(0xF4, 0xF4, 0x80, 0x8F, 2);
}

}  // namespace

Frag NonAsciiFrag(GrammarBuilder* b) {
  const int32_t in = b->NewState();
  const int32_t out = b->NewState();
  AddNonAscii(b, in, out);
  return {in, out};
}

Frag CharSetFrag(GrammarBuilder* b, const CharSet& set, bool any_escape) {
  // One state reads the first byte of every form, so a set costs the matcher
  // one parse stack however many forms it has.
  const int32_t in = b->NewState();
  const int32_t out = b->NewState();
  int c = 0x20;
  while (c < 128) {
    if (!set.ascii.test(c) || c == '"' || c == '\\') {
      ++c;
      continue;
    }
    int end = c;
    while (end + 1 < 128 && set.ascii.test(end + 1) && end + 1 != '"' && end + 1 != '\\') ++end;
    b->Byte(in, static_cast<uint8_t>(c), static_cast<uint8_t>(end), out);
    c = end + 1;
  }
  const int32_t esc = b->NewState();  // after the backslash
  bool any = false;
  auto single = [&](char e) {
    b->Byte(esc, static_cast<uint8_t>(e), static_cast<uint8_t>(e), out);
    any = true;
  };
  if (set.ascii.test('"')) single('"');
  if (set.ascii.test('\\')) single('\\');
  if (any_escape) single('/');
  const int32_t u = b->NewState();  // after \u
  bool any_u = false;
  for (int k = 0; k < 0x20; ++k) {
    if (!set.ascii.test(k) && !any_escape) continue;
    switch (k) {
      case '\n': single('n'); break;
      case '\t': single('t'); break;
      case '\r': single('r'); break;
      case '\b': single('b'); break;
      case '\f': single('f'); break;
      default:
        if (!any_escape) {  // \u00XX
          const std::string hex = absl::StrFormat("%04x", k);
          int32_t cur = u;
          for (size_t d = 0; d < 4; ++d) {
            const int32_t next = d == 3 ? out : b->NewState();
            b->Byte(cur, static_cast<uint8_t>(hex[d]), static_cast<uint8_t>(hex[d]), next);
            cur = next;
          }
          any_u = true;
        }
    }
  }
  if (any_escape) {
    // \uXXXX without surrogates (D800-DFFF).
    auto hex_to = [&](int32_t from, int32_t to) {
      b->Byte(from, '0', '9', to);
      b->Byte(from, 'a', 'f', to);
      b->Byte(from, 'A', 'F', to);
    };
    const int32_t h2 = b->NewState(), h3 = b->NewState(), h4 = b->NewState(), d = b->NewState();
    b->Byte(u, '0', '9', h2);
    b->Byte(u, 'a', 'c', h2);
    b->Byte(u, 'A', 'C', h2);
    b->Byte(u, 'e', 'f', h2);
    b->Byte(u, 'E', 'F', h2);
    b->Byte(u, 'd', 'd', d);
    b->Byte(u, 'D', 'D', d);
    b->Byte(d, '0', '7', h3);
    hex_to(h2, h3);
    hex_to(h3, h4);
    hex_to(h4, out);
    any_u = true;
  }
  if (any_u) b->Byte(esc, 'u', 'u', u);
  if (any || any_u) b->Byte(in, '\\', '\\', esc);
  if (set.non_ascii) AddNonAscii(b, in, out);
  return {in, out};
}

absl::StatusOr<Frag> PatternFrag(GrammarBuilder* b, const std::string& pattern) {
  Parser parser(pattern);
  bool anchored_start = false, anchored_end = false;
  auto tree = parser.Parse(&anchored_start, &anchored_end);
  if (!tree.ok()) return tree.status();
  CharSet any;
  any.ascii.set();
  any.non_ascii = true;
  std::vector<Frag> parts;
  if (!anchored_start) parts.push_back(b->Star(CharSetFrag(b, any)));
  parts.push_back(Emit(b, **tree));
  if (!anchored_end) parts.push_back(b->Star(CharSetFrag(b, any)));
  return b->Seq(parts);
}

}  // namespace specserve::constrain
