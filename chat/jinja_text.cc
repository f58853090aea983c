#include "chat/jinja_text.h"

#include <cstdio>

namespace specserve::jinja {

uint32_t DecodeAt(std::string_view s, size_t i, size_t* len) {
  const auto b = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) { return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80; };
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
  if (b < 0x80) {
    *len = 1;
    return b;
  }
  if ((b & 0xE0) == 0xC0 && b >= 0xC2 && cont(1)) {
    *len = 2;
    return ((b & 0x1Fu) << 6) | at(1);
  }
  if ((b & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    uint32_t cp = ((b & 0x0Fu) << 12) | (at(1) << 6) | at(2);
    if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) {
      *len = 3;
      return cp;
    }
  }
  if ((b & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    uint32_t cp = ((b & 0x07u) << 18) | (at(1) << 12) | (at(2) << 6) | at(3);
    if (cp >= 0x10000 && cp <= 0x10FFFF) {
      *len = 4;
      return cp;
    }
  }
  *len = 1;  // invalid: one byte, one "character"
  return b;
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> off;
  off.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    off.push_back(i);
    size_t len;
    DecodeAt(s, i, &len);
    i += len;
  }
  off.push_back(s.size());
  return off;
}

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    size_t len;
    DecodeAt(s, i, &len);
    i += len;
  }
  return n;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool PyIsSpace(uint32_t cp) {
  if (cp <= 0x7F) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {
// Whether the code point at S[I] (length *LEN) is stripped.
bool Strippable(std::string_view s, size_t i, size_t* len, const std::optional<std::string>& chars,
                const std::vector<uint32_t>& set) {
  uint32_t cp = DecodeAt(s, i, len);
  if (!chars) return PyIsSpace(cp);
  for (uint32_t c : set) {
    if (c == cp) return true;
  }
  return false;
}
std::vector<uint32_t> CodePoints(std::string_view s) {
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    cps.push_back(DecodeAt(s, i, &len));
    i += len;
  }
  return cps;
}
}  // namespace

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::vector<uint32_t> set = chars ? CodePoints(*chars) : std::vector<uint32_t>{};
  size_t begin = 0;
  if (left) {
    while (begin < s.size()) {
      size_t len;
      if (!Strippable(s, begin, &len, chars, set)) break;
      begin += len;
    }
  }
  size_t end = s.size();
  if (right) {
    std::vector<size_t> off = CodePointOffsets(s.substr(begin));
    size_t k = off.size() - 1;  // code points after BEGIN
    while (k > 0) {
      size_t len;
      if (!Strippable(s, begin + off[k - 1], &len, chars, set)) break;
      --k;
    }
    end = begin + off[k];
  }
  return std::string(s.substr(begin, end - begin));
}

std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  size_t i = 0;
  auto skip_space = [&] {
    while (i < s.size()) {
      size_t len;
      if (!PyIsSpace(DecodeAt(s, i, &len))) break;
      i += len;
    }
  };
  skip_space();
  while (i < s.size()) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.emplace_back(s.substr(i));  // the rest, trailing whitespace and all
      return out;
    }
    size_t start = i;
    while (i < s.size()) {
      size_t len;
      if (PyIsSpace(DecodeAt(s, i, &len))) break;
      i += len;
    }
    out.emplace_back(s.substr(start, i - start));
    skip_space();
  }
  return out;
}

std::string PyReplace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (from.empty()) {
    std::vector<size_t> off = CodePointOffsets(s);
    for (size_t k = 0; k + 1 < off.size(); ++k) {
      if (count < 0 || done < count) {
        out.append(to);
        ++done;
      }
      out.append(s.substr(off[k], off[k + 1] - off[k]));
    }
    if (count < 0 || done < count) out.append(to);
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(from, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(to);
    start = at + from.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out = AsciiLower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    const bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
    if (lower && !prev_cased) c = static_cast<char>(c - 'a' + 'A');
    if (upper && prev_cased) c = static_cast<char>(c - 'A' + 'a');
    prev_cased = lower || upper;
  }
  return out;
}

std::string JinjaTitle(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    const uint32_t cp = DecodeAt(s, i, &len);
    const bool sep = PyIsSpace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    std::string_view ch = s.substr(i, len);
    if (sep) {
      out.append(ch);
      word_start = true;
    } else {
      out += word_start ? AsciiUpper(ch) : AsciiLower(ch);
      word_start = false;
    }
    i += len;
  }
  return out;
}

namespace {
// Python's str.isprintable() is false for these (control, format, separator
// characters other than ' '); repr() escapes them.
bool PyUnprintable(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x2064) ||
         cp == 0x3000 || cp == 0xFEFF;
}
}  // namespace

void AppendPyStringRepr(std::string_view s, std::string* out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  out->push_back(q);
  for (size_t i = 0; i < s.size();) {
    size_t len;
    uint32_t cp = DecodeAt(s, i, &len);
    if (cp == static_cast<uint32_t>(q) || cp == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out->append("\\n");
    } else if (cp == '\r') {
      out->append("\\r");
    } else if (cp == '\t') {
      out->append("\\t");
    } else if (PyUnprintable(cp)) {
      char buf[16];
      if (cp <= 0xFF) {
        std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out->append(buf);
    } else {
      out->append(s.substr(i, len));
    }
    i += len;
  }
  out->push_back(q);
}

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    size_t len;
    uint32_t cp = DecodeAt(s, i, &len);
    char buf[16];
    switch (cp) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default:
        if (cp < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", cp);
          out->append(buf);
        } else if (ensure_ascii && cp > 0x7F) {
          if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", cp);
          }
          out->append(buf);
        } else {
          out->append(s.substr(i, len));
        }
    }
    i += len;
  }
  out->push_back('"');
}

}  // namespace specserve::jinja
