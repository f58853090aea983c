// SentencePiece BPE tokenizer (GGUF `tokenizer.ggml.model = llama`), as
// llama.cpp's llm_tokenizer_spm and SentencePiece's bpe_model.cc do it:
// spaces become U+2581 "▁", one "▁" is prepended, the text is split into
// UTF-8 characters, and the adjacent pair whose concatenation is the
// highest-scoring vocabulary piece is merged until no pair is in the
// vocabulary. Characters left outside the vocabulary become <0xXX> byte pieces.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf.h"
#include "common/tokenizer.h"

namespace specserve {

// Everything the tokenizer needs, indexed by token id. Built from GGUF
// metadata by ReadSpmVocab, or by hand in tests.
struct SpmVocab {
  std::vector<std::string> pieces;  // "▁the", "<0x0A>", "<s>", ...
  std::vector<float> scores;        // merge priority: higher merges first
  std::vector<TokenType> types;
  TokenId bos = 1;
  TokenId eos = 2;
  TokenId unk = 0;
  bool add_bos = true;
  bool add_space_prefix = true;
};

// Reads tokenizer.ggml.{tokens,scores,token_type,bos_token_id,eos_token_id,
// unknown_token_id,add_bos_token,add_space_prefix}. INVALID_ARGUMENT naming
// the key when one is missing, mistyped or inconsistent.
absl::StatusOr<SpmVocab> ReadSpmVocab(const GgufFile& f);

// Validates `vocab` (equal lengths, ids in range, known types) and builds the
// tokenizer; INVALID_ARGUMENT naming the offending field otherwise.
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSpmTokenizer(SpmVocab vocab);

}  // namespace specserve
