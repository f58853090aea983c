// Shared by the libFuzzer targets in fuzz/ (fuzz/README.md): a check that
// aborts with a message (libFuzzer then saves the input as a crash), the
// bundled models' paths, and the UTF-8 rules the tokenizers' contracts use.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "common/gguf.h"
#include "common/tokenizer.h"

// A broken invariant of the code under test: print it (and the printf-style
// details, if any) and abort, so that libFuzzer reports a crash and writes
// the input to crash-<sha1>.
#define FUZZ_CHECK(cond, ...)                                                 \
  do {                                                                        \
    if (!(cond)) ::specserve::fuzz::Fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
  } while (0)

namespace specserve::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* cond, const char* fmt, ...) {
  std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", file, line, cond);
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::abort();
}

// A bundled model: $SPECSERVE_FUZZ_MODELS/<file> when that is set, else
// <source dir>/models/<file> (the path is baked in at compile time).
inline std::string ModelPath(const char* file) {
  const char* dir = std::getenv("SPECSERVE_FUZZ_MODELS");
  const std::string root = dir != nullptr && *dir != '\0' ? dir : SPECSERVE_SOURCE_DIR "/models";
  return root + "/" + file;
}

// Setup, not a finding: a missing or unreadable model exits with status 2 and
// says which file (libFuzzer has not started fuzzing yet).
inline std::unique_ptr<GgufFile> OpenModel(const char* file) {
  const std::string path = ModelPath(file);
  auto f = GgufFile::Open(path);
  if (!f.ok()) {
    std::fprintf(stderr, "fuzz setup: cannot open %s: %s (set SPECSERVE_FUZZ_MODELS to the models folder)\n",
                 path.c_str(), std::string(f.status().message()).c_str());
    std::exit(2);
  }
  return std::move(*f);
}

inline std::unique_ptr<Tokenizer> LoadTokenizer(const char* file, std::string_view want_model) {
  const std::unique_ptr<GgufFile> f = OpenModel(file);
  auto tok = Tokenizer::FromGguf(*f);
  if (!tok.ok() || (*tok)->model_name() != want_model) {
    std::fprintf(stderr, "fuzz setup: %s has no %.*s tokenizer: %s\n", file,
                 static_cast<int>(want_model.size()), want_model.data(),
                 tok.ok() ? "wrong kind" : std::string(tok.status().message()).c_str());
    std::exit(2);
  }
  return std::move(*tok);
}

// `s` with every ill-formed UTF-8 subsequence replaced by U+FFFD, one per
// maximal subpart (Unicode 15, section 3.9, "U+FFFD Substitution of Maximal
// Subparts"; table 3-7 gives the well-formed byte ranges). Written here from
// the standard, independently of common/tokenizer.cc's scanner.
inline std::string ReplaceInvalidUtf8(std::string_view s) {
  static constexpr char kFffd[] = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    int len;                     // bytes of a well-formed sequence with this lead
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 <= 0x7F) {
      out += s[i++];
      continue;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      out += kFffd;  // 80..C1, F5..FF never start a character
      ++i;
      continue;
    }
    int good = 1;  // bytes of the longest well-formed prefix starting at i
    while (good < len && i + good < s.size()) {
      const auto b = static_cast<uint8_t>(s[i + good]);
      if (b < (good == 1 ? lo : 0x80) || b > (good == 1 ? hi : 0xBF)) break;
      ++good;
    }
    if (good == len) {
      out.append(s.substr(i, len));
    } else {
      out += kFffd;
    }
    i += good;
  }
  return out;
}

inline bool IsWellFormedUtf8(std::string_view s) { return ReplaceInvalidUtf8(s) == s; }

}  // namespace specserve::fuzz
