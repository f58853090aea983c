// libFuzzer target: untrusted JSON Schema text through CompileJsonSchemaText
// under small limits, then the bytes after the first NUL through the byte
// matcher, and token masks over a small fixed vocabulary checked against the
// brute force. Errors must be INVALID_ARGUMENT or RESOURCE_EXHAUSTED; a
// refused byte must leave the matcher's state unchanged.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "constrain/token_mask.h"
#include "fuzz/fuzz_common.h"

namespace {

using specserve::constrain::GrammarMatcher;
using specserve::constrain::TokenVocabulary;

const TokenVocabulary& Vocab() {
  static const auto v = TokenVocabulary::FromBytes(
      {"", "{", "}", "[", "]", "\"", ",", ":", " ", "\n  ", "{\"", "\":", "\",", "a", "ab", "1", "0", "-", ".",
       "e", "true", "false", "null", "\\", "\\n", "\\u00", "é", "\xE6\x9D\xB1", "12", "x\"", "\"}", "]}"});
  return *v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string schema = input.substr(0, nul);
  const std::string doc = nul == std::string::npos ? "" : input.substr(nul + 1, 256);
  specserve::constrain::GrammarLimits limits;
  limits.max_states = 20000;
  limits.max_rules = 2000;
  limits.max_schema_depth = 16;
  limits.max_stack_depth = 32;
  auto g = schema == "json_object" ? specserve::constrain::CompileAnyJsonObject(limits)
                                   : specserve::constrain::CompileJsonSchemaText(schema, limits);
  if (!g.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(g.status()) || absl::IsResourceExhausted(g.status()), "%s",
               g.status().ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(static_cast<int64_t>((*g)->states.size()) <= limits.max_states);
  GrammarMatcher m(*g);
  for (size_t i = 0; i < doc.size() && i < 64; ++i) {
    if (i % 16 == 0) {
      const auto mask = specserve::constrain::ComputeMask(m, Vocab());
      for (int32_t t = 0; t < Vocab().vocab_size(); ++t) {
        GrammarMatcher c = m;
        const bool brute = !Vocab().bytes(t).empty() && c.AcceptBytes(Vocab().bytes(t));
        FUZZ_CHECK(brute == (((mask[t / 64] >> (t % 64)) & 1) != 0), "token %d", t);
      }
    }
    const std::vector<int32_t> before = m.StateKey();
    if (!m.AcceptByte(static_cast<uint8_t>(doc[i]))) {
      FUZZ_CHECK(m.StateKey() == before);
    }
  }
  return 0;
}
