// What the SentencePiece (spm_tokenizer) and byte-level BPE (bpe_tokenizer)
// vocabularies share: their GGUF keys, <0xXX> byte pieces, and the checks on
// vocabulary size, token types and special-token ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tokenizer.h"

namespace specserve::vocab {

inline constexpr char kTokensKey[] = "tokenizer.ggml.tokens";
inline constexpr char kTypesKey[] = "tokenizer.ggml.token_type";
inline constexpr char kBosKey[] = "tokenizer.ggml.bos_token_id";
inline constexpr char kEosKey[] = "tokenizer.ggml.eos_token_id";
inline constexpr char kAddBosKey[] = "tokenizer.ggml.add_bos_token";

// "<0x0A>" -> 10; -1 for anything else.
int ParseBytePiece(std::string_view p);

// kTypesKey's values as token types; INVALID_ARGUMENT naming the first one
// outside 1..6.
absl::StatusOr<std::vector<TokenType>> TokenTypesFromInts(const std::vector<int64_t>& ints);

// INVALID_ARGUMENT unless KEY = ID is a token id of a vocabulary of N.
absl::Status CheckIdInVocab(const char* key, int64_t id, size_t n);

// INVALID_ARGUMENT when a vocabulary of N tokens is empty or too large for
// TokenId.
absl::Status CheckVocabSize(size_t n);

// INVALID_ARGUMENT when KEY has N_KEY entries for N tokens.
absl::Status CheckEntries(const char* key, size_t n_key, size_t n);

// INVALID_ARGUMENT unless TYPES[I] is a token type and, for a byte token,
// PIECES[I] is <0xXX>.
absl::Status CheckTokenType(const std::vector<std::string>& pieces, const std::vector<TokenType>& types,
                            size_t i);

// The accessors both tokenizers answer the same way from their vocabulary
// (pieces, types, bos, eos, add_bos) and the decoded bytes of each id, which
// the derived tokenizer fills in `bytes_` ([vocab]) when it is built.
template <class Vocab>
class VocabTokenizer : public Tokenizer {
 public:
  std::string TokenBytes(TokenId id) const override { return InRange(id) ? bytes_[id] : std::string(); }
  int32_t vocab_size() const override { return static_cast<int32_t>(v_.pieces.size()); }
  TokenId bos() const override { return v_.bos; }
  TokenId eos() const override { return v_.eos; }
  bool add_bos() const override { return v_.add_bos; }
  TokenType type(TokenId id) const override { return InRange(id) ? v_.types[id] : TokenType::kUnknown; }
  const std::string& piece(TokenId id) const override {
    static const std::string* const kNone = new std::string();
    return InRange(id) ? v_.pieces[id] : *kNone;
  }

 protected:
  explicit VocabTokenizer(Vocab v) : v_(std::move(v)), bytes_(v_.pieces.size()) {}
  bool InRange(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < v_.pieces.size(); }

  Vocab v_;
  std::vector<std::string> bytes_;  // what each id decodes to
};

}  // namespace specserve::vocab
