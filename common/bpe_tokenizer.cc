#include "common/bpe_tokenizer.h"

#include <array>
#include <cstdint>
#include <limits>
#include <queue>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tokenizer_vocab.h"

namespace specserve {
namespace {

using namespace vocab;  // the GGUF keys and checks both vocabularies share
constexpr char kMergesKey[] = "tokenizer.ggml.merges";
constexpr char kPreKey[] = "tokenizer.ggml.pre";

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the other 68 (controls, space, DEL, NBSP, soft hyphen) take code points
// 256, 257, ... in byte order, so every byte has a visible character.
std::array<uint32_t, 256> ByteToCodePoint() {
  std::array<uint32_t, 256> t{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    t[b] = printable ? b : next++;
  }
  return t;
}

void AppendUtf8(uint32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// The byte-level text of raw bytes: "a b" -> "aĠb".
std::string ByteLevel(std::string_view raw, const std::array<uint32_t, 256>& map) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char ch : raw) AppendUtf8(map[static_cast<uint8_t>(ch)], out);
  return out;
}

// The raw bytes a byte-level piece stands for. Characters outside the table
// (a hand-made or user-defined piece) are kept as their own UTF-8.
std::string FromByteLevel(std::string_view piece,
                          const absl::flat_hash_map<uint32_t, uint8_t>& inverse) {
  std::string out;
  size_t i = 0;
  while (i < piece.size()) {
    const auto b0 = static_cast<uint8_t>(piece[i]);
    size_t len = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 1;
    if (i + len > piece.size()) len = 1;
    uint32_t c = len == 1 ? b0 : (b0 & (0x7F >> len));
    for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<uint8_t>(piece[i + k]) & 0x3F);
    auto it = inverse.find(c);
    if (it != inverse.end() && (len > 1 || b0 < 0x80)) {
      out += static_cast<char>(it->second);
    } else {
      out.append(piece.substr(i, len));
    }
    i += len;
  }
  return out;
}

uint64_t PairKey(TokenId l, TokenId r) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
}

class BpeTokenizer final : public vocab::VocabTokenizer<BpeVocab> {
 public:
  // `v` must have passed MakeBpeTokenizer's checks.
  explicit BpeTokenizer(BpeVocab v) : VocabTokenizer(std::move(v)), byte_cp_(ByteToCodePoint()) {
    absl::flat_hash_map<uint32_t, uint8_t> inverse;
    for (int b = 0; b < 256; ++b) inverse[byte_cp_[b]] = static_cast<uint8_t>(b);
    for (size_t i = 0; i < v_.pieces.size(); ++i) {
      const TokenId id = static_cast<TokenId>(i);
      const std::string& p = v_.pieces[i];
      switch (v_.types[i]) {
        case TokenType::kNormal:
          // Only normal pieces come out of merges: "<|begin_of_text|>" in user
          // text stays text. try_emplace keeps the first id of a repeat.
          mergeable_.try_emplace(p, id);
          bytes_[i] = FromByteLevel(p, inverse);
          break;
        case TokenType::kUnused:
          bytes_[i] = FromByteLevel(p, inverse);
          break;
        case TokenType::kUserDefined:
          bytes_[i] = p;  // added tokens are stored as plain text
          break;
        case TokenType::kByte:
          bytes_[i] = std::string(1, static_cast<char>(ParseBytePiece(p)));
          break;
        case TokenType::kUnknown:
        case TokenType::kControl:
          break;  // decode to ""
      }
    }
    for (int b = 0; b < 256; ++b) {
      std::string s;
      AppendUtf8(byte_cp_[b], s);
      auto it = mergeable_.find(s);
      byte_token_[b] = it == mergeable_.end() ? -1 : it->second;
    }
    merges_.reserve(v_.merges.size());
    for (size_t rank = 0; rank < v_.merges.size(); ++rank) {
      const std::string& m = v_.merges[rank];
      const size_t sp = m.find(' ', 1);
      auto l = mergeable_.find(absl::string_view(m.data(), sp));
      auto r = mergeable_.find(absl::string_view(m.data() + sp + 1, m.size() - sp - 1));
      std::string joined = m.substr(0, sp) + m.substr(sp + 1);
      auto j = mergeable_.find(joined);
      // A merge whose sides or result are not normal tokens can never fire
      // in a well-formed vocabulary: skip it.
      if (l == mergeable_.end() || r == mergeable_.end() || j == mergeable_.end()) continue;
      merges_.try_emplace(PairKey(l->second, r->second),
                          Merge{static_cast<int32_t>(rank), j->second});
    }
  }

  std::vector<TokenId> Encode(std::string_view text, bool add_bos) const override {
    std::vector<TokenId> out;
    if (add_bos && v_.add_bos) out.push_back(v_.bos);
    for (std::string_view word : PreTokenize(v_.pre, text)) EncodeWord(word, out);
    return out;
  }

  std::string_view model_name() const override { return "gpt2"; }

 private:
  struct Merge {
    int32_t rank;
    TokenId result;
  };
  // One symbol per byte of the word at first; merging grows the left symbol
  // and unlinks the right one.
  struct Symbol {
    TokenId id;
    int32_t prev, next;
  };
  struct Candidate {
    int32_t rank;
    int32_t left, right;
    TokenId left_id, right_id;  // detect entries made stale by other merges
    TokenId result;
    // Min-heap order: lowest rank first, then the leftmost pair.
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  using Queue = std::priority_queue<Candidate>;

  void TryAdd(const std::vector<Symbol>& syms, int32_t left, int32_t right, Queue& q) const {
    if (left < 0 || right < 0) return;
    auto it = merges_.find(PairKey(syms[left].id, syms[right].id));
    if (it == merges_.end()) return;
    q.push({it->second.rank, left, right, syms[left].id, syms[right].id, it->second.result});
  }

  void EncodeWord(std::string_view word, std::vector<TokenId>& out) const {
    if (v_.ignore_merges) {
      auto it = mergeable_.find(ByteLevel(word, byte_cp_));
      if (it != mergeable_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    if (word.empty()) return;
    std::vector<Symbol> syms(word.size());
    for (size_t i = 0; i < word.size(); ++i) {
      const int32_t idx = static_cast<int32_t>(i);
      syms[i] = {byte_token_[static_cast<uint8_t>(word[i])], idx - 1, idx + 1};
    }
    syms.back().next = -1;
    Queue q;
    for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) TryAdd(syms, i - 1, i, q);
    while (!q.empty()) {
      const Candidate c = q.top();
      q.pop();
      Symbol& l = syms[c.left];
      Symbol& r = syms[c.right];
      if (l.next != c.right || l.id != c.left_id || r.id != c.right_id) continue;
      l.id = c.result;
      l.next = r.next;
      if (r.next >= 0) syms[r.next].prev = c.left;
      r.id = -1;
      r.next = r.prev = -1;
      TryAdd(syms, l.prev, c.left, q);
      TryAdd(syms, c.left, l.next, q);
    }
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
      // -1: a byte with no token of its own (not in a well-formed vocabulary).
      if (syms[i].id >= 0) out.push_back(syms[i].id);
    }
  }

  std::array<uint32_t, 256> byte_cp_;
  std::array<TokenId, 256> byte_token_;  // the single-byte token of each byte, or -1
  absl::flat_hash_map<std::string, TokenId> mergeable_;
  absl::flat_hash_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank, result
};

absl::Status Missing(const char* key) {
  return absl::InvalidArgumentError(
      absl::StrCat("GGUF metadata lacks ", key, ", which the gpt2 (byte-level BPE) tokenizer needs"));
}

}  // namespace

absl::StatusOr<BpeVocab> ReadBpeVocab(const GgufFile& f) {
  BpeVocab v;
  auto tokens = f.GetArray(kTokensKey, GgufValueType::kString);
  if (absl::IsNotFound(tokens.status())) return Missing(kTokensKey);
  RETURN_IF_ERROR(tokens.status());
  auto merges = f.GetArray(kMergesKey, GgufValueType::kString);
  if (absl::IsNotFound(merges.status())) return Missing(kMergesKey);
  RETURN_IF_ERROR(merges.status());
  const size_t n = (*tokens)->strings.size();
  v.pieces = (*tokens)->strings;
  v.merges = (*merges)->strings;
  if (f.Has(kTypesKey)) {
    ASSIGN_OR_RETURN(const GgufArray* types, f.GetArray(kTypesKey, GgufValueType::kInt32));
    RETURN_IF_ERROR(vocab::CheckEntries(kTypesKey, types->ints.size(), n));
    ASSIGN_OR_RETURN(v.types, vocab::TokenTypesFromInts(types->ints));
  } else {
    v.types.assign(n, TokenType::kNormal);
  }
  std::string pre = "default";  // what llama.cpp assumes for older files
  if (f.Has(kPreKey)) {
    ASSIGN_OR_RETURN(pre, f.GetString(kPreKey));
  }
  ASSIGN_OR_RETURN(v.pre, PreTokenizerFromName(pre));
  // Llama 3 files set both; GPT-2 style files often have one <|endoftext|>
  // for both roles and may store only one of them.
  const bool has_bos = f.Has(kBosKey), has_eos = f.Has(kEosKey);
  if (!has_bos && !has_eos) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF metadata has neither ", kBosKey, " nor ", kEosKey));
  }
  int64_t bos = 0, eos = 0;
  if (has_bos) {
    ASSIGN_OR_RETURN(bos, f.GetInt(kBosKey));
  }
  if (has_eos) {
    ASSIGN_OR_RETURN(eos, f.GetInt(kEosKey));
  }
  if (!has_bos) bos = eos;
  if (!has_eos) eos = bos;
  for (auto [key, id] : {std::pair{kBosKey, bos}, {kEosKey, eos}}) {
    RETURN_IF_ERROR(vocab::CheckIdInVocab(key, id, n));
  }
  v.bos = static_cast<TokenId>(bos);
  v.eos = static_cast<TokenId>(eos);
  // llama.cpp's defaults per pre-tokenizer when the file does not say.
  const bool llama3 = v.pre == PreTokenizer::kLlama3;
  ASSIGN_OR_RETURN(v.add_bos, f.GetBoolOr(kAddBosKey, llama3));
  v.ignore_merges = llama3;
  return v;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeBpeTokenizer(BpeVocab v) {
  const size_t n = v.pieces.size();
  RETURN_IF_ERROR(vocab::CheckVocabSize(n));
  RETURN_IF_ERROR(vocab::CheckEntries(kTypesKey, v.types.size(), n));
  if (v.merges.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(kMergesKey, " has ", v.merges.size(), " entries"));
  }
  for (size_t i = 0; i < n; ++i) RETURN_IF_ERROR(vocab::CheckTokenType(v.pieces, v.types, i));
  for (size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& m = v.merges[i];
    const size_t sp = m.size() < 2 ? std::string::npos : m.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= m.size()) {
      return absl::InvalidArgumentError(absl::StrCat(kMergesKey, "[", i, "] = \"",
                                                     absl::Utf8SafeCHexEscape(m),
                                                     "\" is not \"left right\""));
    }
  }
  for (auto [key, id] : {std::pair{kBosKey, v.bos}, {kEosKey, v.eos}}) {
    RETURN_IF_ERROR(vocab::CheckIdInVocab(key, id, n));
  }
  return std::make_unique<BpeTokenizer>(std::move(v));
}

}  // namespace specserve
