#include "common/bpe_pretokenize.h"

#include <unicode/uchar.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace specserve {
namespace {

// Character classes of the patterns. A code point with none of them matches
// [^\s\p{L}\p{N}].
enum : uint8_t { kLetter = 1, kNumber = 2, kSpace = 4 };

constexpr uint32_t kInvalid = 0xFFFFFFFF;  // a byte that is not valid UTF-8

uint8_t ClassifyIcu(uint32_t c) {
  const UChar32 u = static_cast<UChar32>(c);
  const uint32_t gc = U_GET_GC_MASK(u);
  uint8_t f = 0;
  if (gc & U_GC_L_MASK) f |= kLetter;
  if (gc & U_GC_N_MASK) f |= kNumber;
  if (u_isUWhiteSpace(u)) f |= kSpace;  // the White_Space property, as \s in Oniguruma
  return f;
}

uint8_t Classify(uint32_t c) {
  // Latin-1 is most of what code and prose contain: look it up once.
  static const std::array<uint8_t, 256> kLatin1 = [] {
    std::array<uint8_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) t[i] = ClassifyIcu(i);
    return t;
  }();
  if (c == kInvalid) return 0;
  return c < 256 ? kLatin1[c] : ClassifyIcu(c);
}

struct CodePoint {
  uint32_t c;       // the code point, or kInvalid
  size_t offset;    // byte offset in the text
  uint8_t cls;
};

// Decodes strictly (no overlongs, surrogates or values above U+10FFFF); each
// byte of an invalid sequence becomes one kInvalid code point.
std::vector<CodePoint> Decode(std::string_view s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    uint32_t c = kInvalid;
    size_t len = 1;
    if (b0 < 0x80) {
      c = b0;
    } else {
      int need = 0;
      uint8_t lo = 0x80, hi = 0xBF;
      if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
        c = b0 & 0x1F;
      } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        c = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
      } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        c = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
      }
      bool ok = need > 0;
      for (int k = 1; ok && k <= need; ++k) {
        if (i + k >= s.size()) {
          ok = false;
          break;
        }
        const auto b = static_cast<uint8_t>(s[i + k]);
        if (b < lo || b > hi) ok = false;
        lo = 0x80;
        hi = 0xBF;
        c = (c << 6) | (b & 0x3F);
      }
      if (ok) {
        len = need + 1;
      } else {
        c = kInvalid;
      }
    }
    out.push_back({c, i, Classify(c)});
    i += len;
  }
  return out;
}

// One pattern applied to decoded text: Match(pos) returns the end of the
// match that starts at pos (always > pos: every code point is covered by
// one of the alternatives).
class Matcher {
 public:
  explicit Matcher(const std::vector<CodePoint>& cps) : cps_(cps), n_(cps.size()) {}

  size_t Gpt2(size_t pos) const {
    const uint32_t c = cps_[pos].c;
    // 's|'t|'re|'ve|'m|'ll|'d  (case-sensitive)
    if (c == '\'') {
      if (size_t e = Contraction(pos, /*fold=*/false)) return e;
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': the space is taken only
    // when what follows matches, and ' ' itself is in none of the classes.
    const size_t q = (c == ' ' && pos + 1 < n_) ? pos + 1 : pos;
    if (Is(q, kLetter)) return Run(q, kLetter);
    if (Is(q, kNumber)) return Run(q, kNumber);
    if (IsOther(q)) return RunOther(q);
    return Whitespace(pos, /*newlines_first=*/false);
  }

  // Llama 3 (max_digits 3) and Qwen2 (max_digits 1).
  size_t Llama3(size_t pos, size_t max_digits) const {
    const uint32_t c = cps_[pos].c;
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (c == '\'') {
      if (size_t e = Contraction(pos, /*fold=*/true)) return e;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+  (the optional character may be whitespace)
    if (Is(pos, kLetter)) return Run(pos, kLetter);
    if (c != '\r' && c != '\n' && !Is(pos, kNumber) && Is(pos + 1, kLetter)) {
      return Run(pos + 1, kLetter);
    }
    // \p{N}{1,3} or \p{N}
    if (Is(pos, kNumber)) {
      size_t e = pos;
      while (e < n_ && e - pos < max_digits && Is(e, kNumber)) ++e;
      return e;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    const size_t q = (c == ' ' && IsOther(pos + 1)) ? pos + 1 : pos;
    if (IsOther(q)) {
      size_t e = RunOther(q);
      while (e < n_ && (cps_[e].c == '\r' || cps_[e].c == '\n')) ++e;
      return e;
    }
    return Whitespace(pos, /*newlines_first=*/true);
  }

 private:
  bool Is(size_t i, uint8_t cls) const { return i < n_ && (cps_[i].cls & cls) != 0; }
  bool IsOther(size_t i) const { return i < n_ && cps_[i].cls == 0; }
  size_t Run(size_t i, uint8_t cls) const {
    while (Is(i, cls)) ++i;
    return i;
  }
  size_t RunOther(size_t i) const {
    while (IsOther(i)) ++i;
    return i;
  }

  // After the apostrophe at pos: s t m d, or re ve ll. 0 when none matches.
  size_t Contraction(size_t pos, bool fold) const {
    auto at = [&](size_t i) -> uint32_t {
      if (i >= n_ || cps_[i].c == kInvalid) return 0;
      // Simple case folding, as (?i) does: 'S' and U+017F LONG S match 's'.
      return fold ? static_cast<uint32_t>(u_foldCase(static_cast<UChar32>(cps_[i].c),
                                                     U_FOLD_CASE_DEFAULT))
                  : cps_[i].c;
    };
    const uint32_t a = at(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    const uint32_t b = at(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
    return 0;
  }

  // The whitespace alternatives at pos, which starts a run of k >= 1 spaces:
  //   \s*[\r\n]+  (Llama 3 / Qwen2 only): up to and including the run's last
  //               \r or \n, when it has one;
  //   \s+(?!\S)   the whole run at the end of the text, else all but its last
  //               space (which then leads the next word), when k >= 2;
  //   \s+         the single space otherwise.
  size_t Whitespace(size_t pos, bool newlines_first) const {
    size_t e = pos;
    size_t after_newline = 0;
    while (Is(e, kSpace)) {
      if (cps_[e].c == '\r' || cps_[e].c == '\n') after_newline = e + 1;
      ++e;
    }
    if (e == pos) return pos + 1;  // unreachable: every class is covered above
    if (newlines_first && after_newline > 0) return after_newline;
    if (e == n_) return e;
    return e - pos >= 2 ? e - 1 : e;
  }

  const std::vector<CodePoint>& cps_;
  const size_t n_;
};

struct Named {
  std::string_view name;
  PreTokenizer p;
};
// Names as llama.cpp's converter writes them (llama-vocab.cpp accepts the same).
constexpr Named kNames[] = {
    {"default", PreTokenizer::kGpt2},     {"gpt2", PreTokenizer::kGpt2},
    {"gpt-2", PreTokenizer::kGpt2},       {"llama-bpe", PreTokenizer::kLlama3},
    {"llama3", PreTokenizer::kLlama3},    {"llama-v3", PreTokenizer::kLlama3},
    {"smaug-bpe", PreTokenizer::kLlama3}, {"qwen2", PreTokenizer::kQwen2},
    {"deepseek-r1-qwen", PreTokenizer::kQwen2},
};

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizerFromName(std::string_view name) {
  for (const Named& n : kNames) {
    if (n.name == name) return n.p;
  }
  std::string supported;
  for (const Named& n : kNames) absl::StrAppend(&supported, supported.empty() ? "" : ", ", "\"", std::string(n.name), "\"");
  return absl::UnimplementedError(absl::StrCat(
      "tokenizer.ggml.pre = \"", absl::Utf8SafeCHexEscape(std::string(name)),
      "\" is not a supported pre-tokenizer; supported: ", supported));
}

std::string_view PreTokenizerName(PreTokenizer p) {
  switch (p) {
    case PreTokenizer::kGpt2: return "gpt2";
    case PreTokenizer::kLlama3: return "llama-bpe";
    case PreTokenizer::kQwen2: return "qwen2";
  }
  return "?";
}

std::vector<std::string_view> PreTokenize(PreTokenizer p, std::string_view text) {
  std::vector<std::string_view> words;
  const std::vector<CodePoint> cps = Decode(text);
  const Matcher m(cps);
  const size_t n = cps.size();
  size_t pos = 0;
  while (pos < n) {
    size_t end = 0;
    switch (p) {
      case PreTokenizer::kGpt2: end = m.Gpt2(pos); break;
      case PreTokenizer::kLlama3: end = m.Llama3(pos, 3); break;
      case PreTokenizer::kQwen2: end = m.Llama3(pos, 1); break;
    }
    const size_t b = cps[pos].offset;
    const size_t e = end < n ? cps[end].offset : text.size();
    words.push_back(text.substr(b, e - b));
    pos = end;
  }
  return words;
}

}  // namespace specserve
