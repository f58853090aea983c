// The checks fuzz_spm_tokenizer and fuzz_bpe_tokenizer run on every input:
// Encode the bytes as text, with and without BOS, and hold the tokenizer to
// what common/tokenizer.h promises and tests/{tokenizer,bpe_tokenizer}_test.cc
// rely on.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/tokenizer.h"
#include "fuzz/fuzz_common.h"

namespace specserve::fuzz {

// `expected`: what Decode(Encode(text)) must give back. Byte-level BPE
// round-trips any bytes; SentencePiece any bytes too, except that a literal
// U+2581 ("▁", the space mark) in the text comes back as a space.
inline void CheckEncodeDecode(const Tokenizer& tok, std::string_view text, const std::string& expected) {
  const int32_t vocab = tok.vocab_size();
  for (const bool add_bos : {false, true}) {
    const std::vector<TokenId> ids = tok.Encode(text, add_bos);
    size_t first = 0;
    if (add_bos && tok.add_bos()) {
      FUZZ_CHECK(!ids.empty() && ids[0] == tok.bos(), "Encode(add_bos) must start with BOS %d", tok.bos());
      first = 1;
    }
    FUZZ_CHECK(text.empty() == (ids.size() == first), "%zu ids for %zu bytes", ids.size(), text.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      FUZZ_CHECK(ids[i] >= 0 && ids[i] < vocab, "id %d at %zu outside [0, %d)", ids[i], i, vocab);
      // Text that spells a control token stays plain text.
      if (i >= first) {
        FUZZ_CHECK(tok.type(ids[i]) != TokenType::kControl, "control token %d at %zu came from text", ids[i], i);
      }
    }
    const std::string decoded = tok.Decode(ids);
    FUZZ_CHECK(decoded == expected, "round trip: %zu bytes in, %zu bytes expected, %zu decoded",
               text.size(), expected.size(), decoded.size());
    // Streaming decode: the same text, ill-formed UTF-8 as U+FFFD.
    Detokenizer d(tok);
    std::string streamed;
    for (TokenId id : ids) streamed += d.Push(id);
    streamed += d.Flush();
    FUZZ_CHECK(streamed == ReplaceInvalidUtf8(decoded), "Detokenizer gave %zu bytes, Decode %zu",
               streamed.size(), decoded.size());
  }
}

}  // namespace specserve::fuzz
