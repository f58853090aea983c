// Text <-> token ids, built from a GGUF file's `tokenizer.ggml.*` metadata.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf.h"

namespace specserve {

using TokenId = int32_t;

// Token types as GGUF stores them (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Picks the implementation from `tokenizer.ggml.model` ("llama" = SentencePiece
  // BPE; others are UNIMPLEMENTED with a message naming the supported ones).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& f);

  // Plain text to ids. Prepends BOS when `add_bos` and the model says so.
  // Text that spells a control token (e.g. "</s>") stays plain text.
  virtual std::vector<TokenId> Encode(std::string_view text, bool add_bos) const = 0;

  // The bytes of one token (byte pieces give their byte; control tokens give
  // ""). Pieces concatenated may split a UTF-8 character: use a Detokenizer.
  virtual std::string TokenBytes(TokenId id) const = 0;
  // Whole-sequence decode (drops the leading space the encoder added).
  virtual std::string Decode(const std::vector<TokenId>& ids) const;

  virtual int32_t vocab_size() const = 0;
  virtual TokenId bos() const = 0;
  virtual TokenId eos() const = 0;
  virtual bool add_bos() const = 0;
  // True when Encode prepends a space ("▁") that Decode and Detokenizer drop.
  virtual bool add_space_prefix() const { return false; }
  virtual TokenType type(TokenId id) const = 0;
  // The raw vocabulary entry (for comparing a draft's vocabulary with a target's).
  virtual const std::string& piece(TokenId id) const = 0;
  virtual std::string_view model_name() const = 0;  // "llama", "gpt2"
};

// OK when a draft model's tokens mean the same as the target's (same model,
// size, special ids and pieces); INVALID_ARGUMENT naming the first difference.
absl::Status CheckSameVocabulary(const Tokenizer& draft, const Tokenizer& target);

// Streaming decode: feed ids as they are committed, get back only complete
// UTF-8 characters (a multi-byte character split across byte tokens is held
// until its last byte arrives). Drops the encoder's leading space once.
class Detokenizer {
 public:
  explicit Detokenizer(const Tokenizer& tok) : tok_(tok) {}
  std::string Push(TokenId id);
  std::string Flush();  // whatever is held, invalid bytes as U+FFFD
 private:
  const Tokenizer& tok_;
  std::string pending_;
  bool first_ = true;
};

}  // namespace specserve
