#include "common/tokenizer.h"

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/bpe_tokenizer.h"
#include "common/spm_tokenizer.h"
#include "common/status_macros.h"

namespace specserve {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Classifies the UTF-8 sequence at the start of non-empty `s`, following
// Unicode's "maximal subpart" rule (what browsers and Python do):
//   n > 0: a complete, valid character of n bytes;
//   0:     a valid prefix cut short by the end of `s` (more bytes may finish it);
//   -k:    the first k bytes can never be valid and become one U+FFFD.
int ScanUtf8(std::string_view s) {
  const auto c = static_cast<uint8_t>(s[0]);
  if (c < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return -1;  // continuation byte, C0/C1 or F5..FF
  }
  for (int i = 1; i <= need; ++i) {
    if (static_cast<size_t>(i) >= s.size()) return 0;
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < lo || b > hi) return -i;
    lo = 0x80;
    hi = 0xBF;
  }
  return need + 1;
}

// Appends the complete characters at the front of `s` to `out` (invalid
// bytes as U+FFFD) and returns how many bytes it used. A cut-short character
// at the end stays unused unless `final`, when it too becomes U+FFFD.
size_t AppendCompleteUtf8(std::string_view s, bool final, std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    const int n = ScanUtf8(s.substr(i));
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else if (n < 0) {
      out.append(kReplacement);
      i += -n;
    } else if (final) {
      out.append(kReplacement);
      return s.size();
    } else {
      break;
    }
  }
  return i;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& f) {
  absl::StatusOr<std::string> model = f.GetString("tokenizer.ggml.model");
  if (absl::IsNotFound(model.status())) {
    return absl::InvalidArgumentError("GGUF metadata lacks tokenizer.ggml.model");
  }
  RETURN_IF_ERROR(model.status());
  if (*model == "llama") {
    ASSIGN_OR_RETURN(SpmVocab vocab, ReadSpmVocab(f));
    return MakeSpmTokenizer(std::move(vocab));
  }
  if (*model == "gpt2") {
    ASSIGN_OR_RETURN(BpeVocab vocab, ReadBpeVocab(f));
    return MakeBpeTokenizer(std::move(vocab));
  }
  return absl::UnimplementedError(absl::StrCat(
      "tokenizer.ggml.model = \"", absl::Utf8SafeCHexEscape(*model),
      "\" is not supported; supported: \"llama\" (SentencePiece BPE), \"gpt2\" (byte-level BPE)"));
}

std::string Tokenizer::Decode(const std::vector<TokenId>& ids) const {
  std::string out;
  bool first = true;
  for (TokenId id : ids) {
    std::string bytes = TokenBytes(id);
    if (first && !bytes.empty()) {
      first = false;
      if (add_space_prefix() && bytes[0] == ' ') bytes.erase(0, 1);
    }
    out += bytes;
  }
  return out;
}

absl::Status CheckSameVocabulary(const Tokenizer& draft, const Tokenizer& target) {
  if (draft.model_name() != target.model_name()) {
    return absl::InvalidArgumentError(absl::StrCat("draft tokenizer is ", std::string(draft.model_name()),
                                                   " but the target's is ",
                                                   std::string(target.model_name())));
  }
  if (draft.vocab_size() != target.vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat("draft vocabulary has ", draft.vocab_size(),
                                                   " tokens but the target's has ",
                                                   target.vocab_size()));
  }
  if (draft.bos() != target.bos() || draft.eos() != target.eos()) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft bos/eos ids are ", draft.bos(), "/", draft.eos(),
                     " but the target's are ", target.bos(), "/", target.eos()));
  }
  for (TokenId id = 0; id < target.vocab_size(); ++id) {
    if (draft.piece(id) != target.piece(id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", id, " differs: draft \"", absl::Utf8SafeCHexEscape(draft.piece(id)),
          "\" vs target \"", absl::Utf8SafeCHexEscape(target.piece(id)), "\""));
    }
    if (draft.type(id) != target.type(id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", id, " (\"", absl::Utf8SafeCHexEscape(target.piece(id)), "\") has type ",
          static_cast<int>(draft.type(id)), " in the draft but ",
          static_cast<int>(target.type(id)), " in the target"));
    }
  }
  return absl::OkStatus();
}

std::string Detokenizer::Push(TokenId id) {
  std::string bytes = tok_.TokenBytes(id);
  if (first_ && !bytes.empty()) {
    first_ = false;
    if (tok_.add_space_prefix() && bytes[0] == ' ') bytes.erase(0, 1);
  }
  pending_ += bytes;
  std::string out;
  pending_.erase(0, AppendCompleteUtf8(pending_, /*final=*/false, out));
  return out;
}

std::string Detokenizer::Flush() {
  std::string out;
  AppendCompleteUtf8(pending_, /*final=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace specserve
