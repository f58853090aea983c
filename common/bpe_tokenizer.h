// Byte-level BPE tokenizer (GGUF `tokenizer.ggml.model = gpt2`): GPT-2,
// Llama 3, Qwen2 and most recent models. Text is cut into words by the
// pre-tokenizer `tokenizer.ggml.pre` names (common/bpe_pretokenize.h); each
// word's UTF-8 bytes become the printable characters of GPT-2's
// byte-to-unicode table (space -> "Ġ", newline -> "Ċ"), and the adjacent pair
// with the lowest merge rank is merged until no listed merge applies
// (Sennrich et al. 2016, "Neural Machine Translation of Rare Words with
// Subword Units"; GPT-2's encoder.py). Special-token text in the input stays
// plain text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/bpe_pretokenize.h"
#include "common/gguf.h"
#include "common/tokenizer.h"

namespace specserve {

// Everything the tokenizer needs, indexed by token id. Built from GGUF
// metadata by ReadBpeVocab, or by hand in tests.
struct BpeVocab {
  std::vector<std::string> pieces;  // byte-level strings: "Ġthe", "Ċ", "<|begin_of_text|>"
  std::vector<TokenType> types;
  std::vector<std::string> merges;  // "left right"; rank = index (0 merges first)
  PreTokenizer pre = PreTokenizer::kGpt2;
  TokenId bos = 0;
  TokenId eos = 0;
  bool add_bos = false;
  // A word that is itself a vocabulary entry is emitted whole, without merges
  // (Hugging Face `ignore_merges`; set for Llama 3 as llama.cpp does).
  bool ignore_merges = false;
};

// Reads tokenizer.ggml.{tokens,token_type,merges,pre,bos_token_id,
// eos_token_id,add_bos_token}. INVALID_ARGUMENT naming the key when one is
// missing, mistyped or inconsistent; UNIMPLEMENTED for an unknown `pre`.
absl::StatusOr<BpeVocab> ReadBpeVocab(const GgufFile& f);

// Validates `vocab` (equal lengths, ids in range, well-formed merges) and
// builds the tokenizer; INVALID_ARGUMENT naming the offending field otherwise.
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeBpeTokenizer(BpeVocab vocab);

}  // namespace specserve
