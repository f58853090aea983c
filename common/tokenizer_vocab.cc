#include "common/tokenizer_vocab.h"

#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace specserve::vocab {
namespace {

bool IsTokenType(int64_t t) {
  return t >= static_cast<int64_t>(TokenType::kNormal) && t <= static_cast<int64_t>(TokenType::kByte);
}

absl::Status NotATokenType(size_t i, int64_t t) {
  return absl::InvalidArgumentError(absl::StrCat(kTypesKey, "[", i, "] = ", t, " is not a token type (1..6)"));
}

}  // namespace

int ParseBytePiece(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  int v = 0;
  for (char c : p.substr(3, 2)) {
    const int d = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                           : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

absl::StatusOr<std::vector<TokenType>> TokenTypesFromInts(const std::vector<int64_t>& ints) {
  std::vector<TokenType> types;
  types.reserve(ints.size());
  for (size_t i = 0; i < ints.size(); ++i) {
    if (!IsTokenType(ints[i])) return NotATokenType(i, ints[i]);
    types.push_back(static_cast<TokenType>(ints[i]));
  }
  return types;
}

absl::Status CheckIdInVocab(const char* key, int64_t id, size_t n) {
  if (id < 0 || static_cast<uint64_t>(id) >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " = ", id, " is outside the vocabulary of ", n, " tokens"));
  }
  return absl::OkStatus();
}

absl::Status CheckVocabSize(size_t n) {
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(kTokensKey, " is empty"));
  if (n > static_cast<size_t>(std::numeric_limits<TokenId>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(kTokensKey, " has ", n, " entries"));
  }
  return absl::OkStatus();
}

absl::Status CheckEntries(const char* key, size_t n_key, size_t n) {
  if (n_key != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " has ", n_key, " entries but ", kTokensKey, " has ", n));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenType(const std::vector<std::string>& pieces, const std::vector<TokenType>& types,
                            size_t i) {
  const auto t = static_cast<int32_t>(types[i]);
  if (!IsTokenType(t)) return NotATokenType(i, t);
  if (types[i] == TokenType::kByte && ParseBytePiece(pieces[i]) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(kTypesKey, "[", i, "] says byte but ", kTokensKey, "[", i,
                                                   "] = \"", absl::Utf8SafeCHexEscape(pieces[i]),
                                                   "\" is not <0xXX>"));
  }
  return absl::OkStatus();
}

}  // namespace specserve::vocab
