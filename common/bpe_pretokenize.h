// Pre-tokenizers of byte-level BPE vocabularies: the regular expressions that
// cut text into words before BPE merges run inside each word
// (`tokenizer.ggml.pre`). RE2 cannot express the `\s+(?!\S)` lookahead, so each
// pattern is a hand-written matcher over code points that tries the
// alternatives in order at each position, as a backtracking regex engine
// (Oniguruma in Hugging Face tokenizers) does. Unicode classes come from ICU:
//   \p{L} general category L*, \p{N} category N*, \s the White_Space property.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace specserve {

enum class PreTokenizer {
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // Qwen2: as Llama 3 with single digits (\p{N} instead of \p{N}{1,3}).
  kQwen2,
};

// The pre-tokenizer a `tokenizer.ggml.pre` value names ("llama-bpe", "qwen2",
// "gpt2", "default" and a few aliases llama.cpp also accepts). An absent key
// means "default". UNIMPLEMENTED, naming the supported values, otherwise.
absl::StatusOr<PreTokenizer> PreTokenizerFromName(std::string_view name);
std::string_view PreTokenizerName(PreTokenizer p);

// Splits `text` into consecutive, non-empty words that cover it exactly (the
// views point into `text`). Bytes that are not valid UTF-8 count as one
// code point each, of no category (they match [^\s\p{L}\p{N}]).
std::vector<std::string_view> PreTokenize(PreTokenizer p, std::string_view text);

}  // namespace specserve
