#include "common/spm_tokenizer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "common/tokenizer_vocab.h"

namespace specserve {
namespace {

constexpr char kSpaceMark[] = "\xE2\x96\x81";  // U+2581 "▁"
// What SentencePiece prints for <unk> (its kDefaultUnknownSymbol, " ⁇ ").
constexpr char kUnknownSurface[] = " \xE2\x81\x87 ";

using namespace vocab;  // the GGUF keys and checks both vocabularies share
constexpr char kScoresKey[] = "tokenizer.ggml.scores";
constexpr char kUnkKey[] = "tokenizer.ggml.unknown_token_id";

// Bytes in the UTF-8 character that `lead` starts. A stray continuation or
// invalid byte counts as one character, so any byte string can be split and
// its unknown "characters" fall back to byte pieces unchanged.
// A lead byte whose continuation bytes (0x80..0xBF) are not all there is
// one character too, so it never swallows the bytes after it.
size_t Utf8Len(std::string_view s) {
  const uint8_t lead = static_cast<uint8_t>(s[0]);
  size_t n = 1;
  if ((lead & 0xE0) == 0xC0) n = 2;
  if ((lead & 0xF0) == 0xE0) n = 3;
  if ((lead & 0xF8) == 0xF0) n = 4;
  if (n > s.size()) return 1;
  for (size_t i = 1; i < n; ++i) {
    if ((static_cast<uint8_t>(s[i]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

// A GGUF getter's NOT_FOUND becomes INVALID_ARGUMENT: the model file, not the
// lookup, is what is wrong, and the caller should say which key it lacks.
template <typename T>
absl::StatusOr<T> Required(absl::StatusOr<T> r, const char* key) {
  if (r.ok() || !absl::IsNotFound(r.status())) return r;
  return absl::InvalidArgumentError(
      absl::StrCat("GGUF metadata lacks ", key, ", which the llama (SentencePiece) tokenizer needs"));
}

absl::StatusOr<TokenId> ReadId(const GgufFile& f, const char* key, int64_t dflt,
                               size_t n_vocab) {
  ASSIGN_OR_RETURN(int64_t v, f.GetIntOr(key, dflt));
  RETURN_IF_ERROR(vocab::CheckIdInVocab(key, v, n_vocab));
  return static_cast<TokenId>(v);
}

class SpmTokenizer final : public vocab::VocabTokenizer<SpmVocab> {
 public:
  // `v` must have passed MakeSpmTokenizer's checks.
  explicit SpmTokenizer(SpmVocab v) : VocabTokenizer(std::move(v)) {
    byte_id_.fill(v_.unk);
    for (size_t i = 0; i < v_.pieces.size(); ++i) {
      const TokenId id = static_cast<TokenId>(i);
      const std::string& p = v_.pieces[i];
      switch (v_.types[i]) {
        case TokenType::kNormal:
        case TokenType::kUserDefined:
          // Only these may come out of a merge: "</s>" in user text must stay
          // text. try_emplace keeps the first id if a piece repeats.
          mergeable_.try_emplace(p, id);
          bytes_[i] = absl::StrReplaceAll(p, {{kSpaceMark, " "}});
          break;
        case TokenType::kUnused:
          bytes_[i] = absl::StrReplaceAll(p, {{kSpaceMark, " "}});
          break;
        case TokenType::kByte: {
          const int b = ParseBytePiece(p);
          if (byte_id_[b] == v_.unk) byte_id_[b] = id;
          bytes_[i] = std::string(1, static_cast<char>(b));
          break;
        }
        case TokenType::kUnknown:
          bytes_[i] = kUnknownSurface;
          break;
        case TokenType::kControl:
          break;  // decodes to ""
      }
    }
  }

  std::vector<TokenId> Encode(std::string_view text, bool add_bos) const override;

  bool add_space_prefix() const override { return v_.add_space_prefix; }
  std::string_view model_name() const override { return "llama"; }

 private:
  // Symbols are byte ranges of the normalised text kept as a linked list;
  // merging grows the left symbol and empties the right one.
  struct Symbol {
    uint32_t begin, len;
    int32_t prev, next;
  };
  struct Bigram {
    float score;
    int32_t left, right;
    uint32_t len;  // left.len + right.len when queued: detects stale entries
    // Max-heap order: higher score first, then the leftmost pair.
    bool operator<(const Bigram& o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  using Queue = std::priority_queue<Bigram>;

  void TryAddBigram(std::string_view text, const std::vector<Symbol>& syms, int32_t left,
                    int32_t right, Queue& queue) const {
    if (left < 0 || right < 0) return;
    const uint32_t len = syms[left].len + syms[right].len;
    auto it = mergeable_.find(absl::string_view(text.data() + syms[left].begin, len));
    if (it == mergeable_.end()) return;
    queue.push({v_.scores[it->second], left, right, len});
  }

  absl::flat_hash_map<std::string, TokenId> mergeable_;
  std::array<TokenId, 256> byte_id_;  // the <0xXX> piece of each byte, else unk
};

std::vector<TokenId> SpmTokenizer::Encode(std::string_view text, bool add_bos) const {
  std::vector<TokenId> out;
  if (add_bos && v_.add_bos) out.push_back(v_.bos);
  // SentencePiece gives nothing for "", not a lone "▁".
  if (text.empty()) return out;

  // The prefix is added even before a leading space or newline: " " encodes
  // as "▁▁" and "\n" as "▁" <0x0A>, as the reference ids show.
  std::string norm;
  norm.reserve(text.size() + 16);
  if (v_.add_space_prefix) norm += kSpaceMark;
  for (char c : text) {
    if (c == ' ') {
      norm += kSpaceMark;
    } else {
      norm += c;
    }
  }
  if (norm.size() > std::numeric_limits<int32_t>::max()) return out;  // 2 GiB prompt

  std::vector<Symbol> syms;
  syms.reserve(norm.size());
  for (size_t i = 0; i < norm.size();) {
    const uint32_t len = static_cast<uint32_t>(Utf8Len(std::string_view(norm).substr(i)));
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({static_cast<uint32_t>(i), len, idx - 1, idx + 1});
    i += len;
  }
  syms.back().next = -1;

  std::vector<Bigram> storage;
  storage.reserve(syms.size() * 2);
  Queue queue(std::less<Bigram>(), std::move(storage));
  for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) {
    TryAddBigram(norm, syms, i - 1, i, queue);
  }
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = syms[b.left];
    Symbol& r = syms[b.right];
    // Lengths only grow or drop to 0, so an unchanged sum means both sides
    // are still exactly the pair that was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    TryAddBigram(norm, syms, l.prev, b.left, queue);
    TryAddBigram(norm, syms, b.left, l.next, queue);
  }

  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const absl::string_view s(norm.data() + syms[i].begin, syms[i].len);
    auto it = mergeable_.find(s);
    if (it != mergeable_.end()) {
      out.push_back(it->second);
    } else {
      for (char c : s) out.push_back(byte_id_[static_cast<uint8_t>(c)]);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<SpmVocab> ReadSpmVocab(const GgufFile& f) {
  SpmVocab v;
  ASSIGN_OR_RETURN(const GgufArray* tokens,
                   Required(f.GetArray(kTokensKey, GgufValueType::kString), kTokensKey));
  ASSIGN_OR_RETURN(const GgufArray* scores,
                   Required(f.GetArray(kScoresKey, GgufValueType::kFloat32), kScoresKey));
  ASSIGN_OR_RETURN(const GgufArray* types,
                   Required(f.GetArray(kTypesKey, GgufValueType::kInt32), kTypesKey));
  const size_t n = tokens->strings.size();
  // Checked here as well as in MakeSpmTokenizer so that the copies below
  // cannot read past a short array.
  if (scores->floats.size() != n || types->ints.size() != n) {
    const bool bad_scores = scores->floats.size() != n;
    return absl::InvalidArgumentError(absl::StrCat(
        bad_scores ? kScoresKey : kTypesKey, " has ",
        bad_scores ? scores->floats.size() : types->ints.size(), " entries but ", kTokensKey,
        " has ", n));
  }
  v.pieces = tokens->strings;
  v.scores.assign(scores->floats.begin(), scores->floats.end());
  ASSIGN_OR_RETURN(v.types, vocab::TokenTypesFromInts(types->ints));
  ASSIGN_OR_RETURN(v.bos, ReadId(f, kBosKey, 1, n));
  ASSIGN_OR_RETURN(v.eos, ReadId(f, kEosKey, 2, n));
  ASSIGN_OR_RETURN(v.unk, ReadId(f, kUnkKey, 0, n));
  ASSIGN_OR_RETURN(v.add_bos, f.GetBoolOr(kAddBosKey, true));
  ASSIGN_OR_RETURN(v.add_space_prefix, f.GetBoolOr("tokenizer.ggml.add_space_prefix", true));
  return v;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSpmTokenizer(SpmVocab v) {
  const size_t n = v.pieces.size();
  RETURN_IF_ERROR(vocab::CheckVocabSize(n));
  RETURN_IF_ERROR(vocab::CheckEntries(kScoresKey, v.scores.size(), n));
  RETURN_IF_ERROR(vocab::CheckEntries(kTypesKey, v.types.size(), n));
  for (size_t i = 0; i < n; ++i) {
    // A NaN score would break the merge queue's ordering.
    if (std::isnan(v.scores[i])) {
      return absl::InvalidArgumentError(absl::StrCat(kScoresKey, "[", i, "] is NaN"));
    }
    RETURN_IF_ERROR(vocab::CheckTokenType(v.pieces, v.types, i));
  }
  for (auto [key, id] : {std::pair{kBosKey, v.bos}, {kEosKey, v.eos}, {kUnkKey, v.unk}}) {
    RETURN_IF_ERROR(vocab::CheckIdInVocab(key, id, n));
  }
  return std::make_unique<SpmTokenizer>(std::move(v));
}

}  // namespace specserve
