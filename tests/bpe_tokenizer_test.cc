// Byte-level BPE (tokenizer.ggml.model = gpt2) against golden_bpe.json, whose
// ids come from the Hugging Face tokenizers library (and agree with
// llama.cpp), plus the pre-tokenizer patterns on their own and the greedy
// continuations of code-bpe-4m.gguf.
#include <algorithm>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/backend.h"
#include "common/bpe_pretokenize.h"
#include "common/bpe_tokenizer.h"
#include "common/tokenizer.h"
#include "common/weights.h"
#include "tests/gguf_writer.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

json LoadGolden() { return testing::LoadJson(testing::GoldenPath("golden_bpe.json")); }

std::string BpeModelPath() { return testing::ModelPath("code-bpe-4m"); }

std::unique_ptr<Tokenizer> LoadBpe() {
  const std::string path = BpeModelPath();
  if (path.empty()) return nullptr;
  auto f = GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**f);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

std::vector<std::string> Split(PreTokenizer p, std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view w : PreTokenize(p, text)) out.emplace_back(w);
  return out;
}

// --- Pre-tokenizer patterns ---------------------------------------------

TEST(PreTokenizeTest, Llama3Pattern) {
  const auto p = PreTokenizer::kLlama3;
  EXPECT_THAT(Split(p, "hello world"), ElementsAre("hello", " world"));
  // Contractions are case-insensitive and split before the letters.
  EXPECT_THAT(Split(p, "I'M they'll DON'T"), ElementsAre("I", "'M", " they", "'ll", " DON", "'T"));
  // Digits in groups of at most three.
  EXPECT_THAT(Split(p, "1234567"), ElementsAre("123", "456", "7"));
  // One non-letter (space, tab, punctuation) may lead a word; newlines may not.
  EXPECT_THAT(Split(p, "\tdef (x"), ElementsAre("\tdef", " (", "x"));
  EXPECT_THAT(Split(p, "a\nb"), ElementsAre("a", "\n", "b"));
  // Punctuation runs take trailing newlines; whitespace runs end at their
  // last newline; a run before a word leaves its last space to the word.
  EXPECT_THAT(Split(p, "x);\n\n  y"), ElementsAre("x", ");\n\n", " ", " y"));
  EXPECT_THAT(Split(p, "a \n\t\n  b"), ElementsAre("a", " \n\t\n", " ", " b"));
  // \s+(?!\S): trailing whitespace stays whole.
  EXPECT_THAT(Split(p, "a   "), ElementsAre("a", "   "));
  EXPECT_THAT(Split(p, "a   b"), ElementsAre("a", "  ", " b"));
  // Non-ASCII classes come from ICU: NBSP and EM SPACE are \s, CJK are \p{L}.
  EXPECT_THAT(Split(p, "a\xC2\xA0" "b\xE2\x80\x83" "c"), ElementsAre("a", "\xC2\xA0" "b", "\xE2\x80\x83" "c"));
  EXPECT_THAT(Split(p, "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C"), ElementsAre("\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C"));
  // U+017F LONG S folds to 's'.
  EXPECT_THAT(Split(p, "it'\xC5\xBF"), ElementsAre("it", "'\xC5\xBF"));
  EXPECT_TRUE(Split(p, "").empty());
}

TEST(PreTokenizeTest, Qwen2TakesSingleDigits) {
  EXPECT_THAT(Split(PreTokenizer::kQwen2, "x=1234"), ElementsAre("x", "=", "1", "2", "3", "4"));
  EXPECT_THAT(Split(PreTokenizer::kQwen2, "I'm ok\r\n"), ElementsAre("I", "'m", " ok", "\r\n"));
}

TEST(PreTokenizeTest, Gpt2Pattern) {
  const auto p = PreTokenizer::kGpt2;
  // Case-sensitive contractions; only a space (not a tab) leads a word.
  EXPECT_THAT(Split(p, "I'm DON'T"), ElementsAre("I", "'m", " DON", "'", "T"));
  EXPECT_THAT(Split(p, "\tdef  x"), ElementsAre("\t", "def", " ", " x"));
  EXPECT_THAT(Split(p, "1234567 (a)\n\n"), ElementsAre("1234567", " (", "a", ")", "\n\n"));
  EXPECT_THAT(Split(p, "a \n b"), ElementsAre("a", " \n", " b"));
}

TEST(PreTokenizeTest, InvalidUtf8IsKeptByteForByte) {
  const std::string s = "ab\xFF\xC3 c\xE2\x82";
  std::string joined;
  for (const auto& w : Split(PreTokenizer::kLlama3, s)) joined += w;
  EXPECT_EQ(joined, s);
}

// Random strings over a pool of the characters the patterns care about
// (letters, digits of several scripts, apostrophes, NBSP and other Unicode
// spaces, combining marks, emoji) plus stray bytes. The patterns were also
// checked against Python's `regex` module on 60k such strings (no difference).
std::string RandomText(std::mt19937& rng, bool allow_invalid) {
  static const std::vector<std::string> kPool = {
      "a", "Z", "s", "S", "t", "'", " ", " ", "\t", "\r", "\n", ".", "(", "_", "0", "7",
      "\xC5\xBF", "\xC2\xA0", "\xE2\x80\x83", "\xE3\x80\x80", "\xE4\xBD\xA0", "\xCC\x81",
      "\xD9\xA3", "\xE2\x85\xAB", "\xC2\xB2", "\xF0\x9F\x98\x80", "\xEF\xBC\x8C", "\x0b"};
  std::uniform_int_distribution<int> len(0, 24), pick(0, static_cast<int>(kPool.size()) - 1);
  std::uniform_int_distribution<int> byte(0x80, 0xFF), coin(0, 19);
  std::string s;
  for (int i = len(rng); i > 0; --i) {
    if (allow_invalid && coin(rng) == 0) {
      s += static_cast<char>(byte(rng));
    } else {
      s += kPool[pick(rng)];
    }
  }
  return s;
}

TEST(PreTokenizeTest, WordsCoverRandomTextExactly) {
  std::mt19937 rng(42);
  for (int i = 0; i < 3000; ++i) {
    const std::string s = RandomText(rng, /*allow_invalid=*/true);
    for (PreTokenizer p : {PreTokenizer::kGpt2, PreTokenizer::kLlama3, PreTokenizer::kQwen2}) {
      std::string joined;
      for (std::string_view w : PreTokenize(p, s)) {
        ASSERT_FALSE(w.empty());
        joined += w;
      }
      ASSERT_EQ(joined, s);
    }
  }
}

TEST(PreTokenizeTest, UnknownNameListsTheSupportedOnes) {
  auto p = PreTokenizerFromName("falcon");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(p.status().message(), HasSubstr("falcon"));
  EXPECT_THAT(p.status().message(), HasSubstr("llama-bpe"));
  EXPECT_THAT(p.status().message(), HasSubstr("qwen2"));
  EXPECT_THAT(p.status().message(), HasSubstr("gpt2"));
  EXPECT_EQ(*PreTokenizerFromName("llama-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(*PreTokenizerFromName("qwen2"), PreTokenizer::kQwen2);
  EXPECT_EQ(*PreTokenizerFromName("default"), PreTokenizer::kGpt2);
}

// --- A hand-made vocabulary ----------------------------------------------

// The 256 byte characters, then merged pieces and two control tokens.
BpeVocab TinyVocab() {
  BpeVocab v;
  v.pieces = {"<|bos|>", "<|eos|>"};
  v.types = {TokenType::kControl, TokenType::kControl};
  // GPT-2's byte table in byte order.
  for (uint32_t b = 0, next = 256; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const uint32_t c = printable ? b : next++;
    std::string s;
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
    v.pieces.push_back(s);
    v.types.push_back(TokenType::kNormal);
  }
  for (const char* p : {"Ġh", "Ġhe", "ll", "llo", "Ġhello", "aa"}) {
    v.pieces.push_back(p);
    v.types.push_back(TokenType::kNormal);
  }
  v.merges = {"Ġ h", "l l", "Ġh e", "ll o", "Ġhe llo", "a a"};
  v.bos = 0;
  v.eos = 1;
  v.add_bos = true;
  return v;
}

TokenId IdOf(const BpeVocab& v, std::string_view piece) {
  return static_cast<TokenId>(std::find(v.pieces.begin(), v.pieces.end(), piece) - v.pieces.begin());
}

TEST(BpeTokenizerTest, MergesByRankAndLeftmostFirst) {
  const BpeVocab v = TinyVocab();
  auto tok = MakeBpeTokenizer(v);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->model_name(), "gpt2");
  EXPECT_THAT((*tok)->Encode(" hello", true), ElementsAre(0, IdOf(v, "Ġhello")));
  EXPECT_THAT((*tok)->Encode(" hell", false), ElementsAre(IdOf(v, "Ġhe"), IdOf(v, "ll")));
  // "aaa": the leftmost pair merges first.
  EXPECT_THAT((*tok)->Encode("aaa", false), ElementsAre(IdOf(v, "aa"), IdOf(v, "a")));
  // Control-token text is plain text.
  const auto ids = (*tok)->Encode("<|eos|>", false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 0);
  EXPECT_EQ((*tok)->Decode(ids), "<|eos|>");
  // Every byte decodes to itself.
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ((*tok)->Decode((*tok)->Encode(all, true)), all);
}

TEST(BpeTokenizerTest, BadVocabularyIsRefused) {
  BpeVocab v = TinyVocab();
  v.merges.push_back("nospace");
  auto t = MakeBpeTokenizer(v);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("tokenizer.ggml.merges[6]"));
  v = TinyVocab();
  v.eos = 9999;
  EXPECT_THAT(MakeBpeTokenizer(v).status().message(), HasSubstr("eos_token_id"));
  v = TinyVocab();
  v.types.pop_back();
  EXPECT_THAT(MakeBpeTokenizer(v).status().message(), HasSubstr("token_type"));
}

std::string WriteTinyGguf(const std::string& name, const char* pre) {
  const BpeVocab v = TinyVocab();
  testing::GgufWriter w;
  w.String("general.architecture", "llama");
  w.String("tokenizer.ggml.model", "gpt2");
  if (pre != nullptr) w.String("tokenizer.ggml.pre", pre);
  w.StringArray("tokenizer.ggml.tokens", v.pieces);
  std::vector<int32_t> types;
  for (TokenType t : v.types) types.push_back(static_cast<int32_t>(t));
  w.I32Array("tokenizer.ggml.token_type", types);
  w.StringArray("tokenizer.ggml.merges", v.merges);
  w.U32("tokenizer.ggml.bos_token_id", 0);
  w.U32("tokenizer.ggml.eos_token_id", 1);
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(testing::WriteFile(path, w.Build()));
  return path;
}

TEST(BpeTokenizerTest, FromGgufReadsPreAndRefusesUnknownOnes) {
  auto f = GgufFile::Open(WriteTinyGguf("bpe_qwen2.gguf", "qwen2"));
  ASSERT_TRUE(f.ok()) << f.status();
  auto tok = Tokenizer::FromGguf(**f);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_FALSE((*tok)->add_bos());  // qwen2 default when the key is absent
  EXPECT_EQ((*tok)->Encode("12", false).size(), 2u);

  f = GgufFile::Open(WriteTinyGguf("bpe_unknown.gguf", "made-up-pre"));
  ASSERT_TRUE(f.ok()) << f.status();
  tok = Tokenizer::FromGguf(**f);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(tok.status().message(), HasSubstr("made-up-pre"));
  EXPECT_THAT(tok.status().message(), HasSubstr("llama-bpe"));

  f = GgufFile::Open(WriteTinyGguf("bpe_nopre.gguf", nullptr));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(Tokenizer::FromGguf(**f).ok());  // absent: "default"
}

// --- code-bpe-4m and golden_bpe.json --------------------------------------

TEST(BpeGoldenTest, StringsEncodeExactlyAndRoundTrip) {
  const json golden = LoadGolden();
  if (golden.is_null()) SPECSERVE_MISSING_INPUT("../shared/golden/golden_bpe.json");
  auto tok = LoadBpe();
  if (tok == nullptr) SPECSERVE_MISSING_INPUT("code-bpe-4m.gguf");
  EXPECT_EQ(tok->bos(), golden["bos"].get<TokenId>());
  EXPECT_EQ(tok->eos(), golden["eos"].get<TokenId>());
  EXPECT_TRUE(tok->add_bos());
  int n = 0;
  for (const json& t : golden["tokenizer"]) {
    const std::string text = t["text"].get<std::string>();
    const auto want = t["ids"].get<std::vector<TokenId>>();
    EXPECT_EQ(tok->Encode(text, /*add_bos=*/false), want) << "text \"" << text << "\"";
    EXPECT_EQ(tok->Decode(want), text);
    std::vector<TokenId> with_bos = tok->Encode(text, true);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos[0], tok->bos());
    EXPECT_EQ(tok->Decode(with_bos), text);
    // Streaming decode gives the same text.
    Detokenizer d(*tok);
    std::string streamed;
    for (TokenId id : want) streamed += d.Push(id);
    streamed += d.Flush();
    EXPECT_EQ(streamed, text);
    ++n;
  }
  EXPECT_EQ(n, 28);
  for (const json& p : golden["prompts"]) {
    const std::string text = p["prompt"].get<std::string>();
    EXPECT_EQ(tok->Encode(text, true), p["ids"].get<std::vector<TokenId>>()) << "prompt " << p["id"];
    EXPECT_EQ(tok->Decode(p["ids"].get<std::vector<TokenId>>()), text);
  }
}

TEST(BpeGoldenTest, RandomTextRoundTrips) {
  auto tok = LoadBpe();
  if (tok == nullptr) SPECSERVE_MISSING_INPUT("code-bpe-4m.gguf");
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const std::string s = RandomText(rng, /*allow_invalid=*/i % 2 == 1);
    const std::vector<TokenId> ids = tok->Encode(s, true);
    for (TokenId id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size());
    ASSERT_EQ(tok->Decode(ids), s);
  }
}

TEST(BpeGoldenTest, VocabularyCheckComparesBpeVocabularies) {
  auto bpe = LoadBpe();
  if (bpe == nullptr) SPECSERVE_MISSING_INPUT("code-bpe-4m.gguf");
  auto bpe2 = LoadBpe();
  EXPECT_TRUE(CheckSameVocabulary(*bpe, *bpe2).ok());
  const std::string spm_path = testing::BundledModel("code-draft-1m.gguf");
  auto f = GgufFile::Open(spm_path);
  ASSERT_TRUE(f.ok()) << f.status();
  auto spm = Tokenizer::FromGguf(**f);
  ASSERT_TRUE(spm.ok()) << spm.status();
  absl::Status s = CheckSameVocabulary(**spm, *bpe);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("llama"));
  EXPECT_THAT(s.message(), HasSubstr("gpt2"));
  // Same size and specials but one piece changed: named by id.
  const BpeVocab v = TinyVocab();
  BpeVocab w = TinyVocab();
  w.pieces[IdOf(w, "llo")] = "lo";
  auto a = MakeBpeTokenizer(v);
  auto b = MakeBpeTokenizer(w);
  ASSERT_TRUE(a.ok() && b.ok());
  s = CheckSameVocabulary(**a, **b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("token ", IdOf(v, "llo"))));
}

TEST(BpeGoldenTest, GreedyContinuationsMatch) {
  const json golden = LoadGolden();
  if (golden.is_null()) SPECSERVE_MISSING_INPUT("../shared/golden/golden_bpe.json");
  const std::string path = BpeModelPath();
  if (path.empty()) SPECSERVE_MISSING_INPUT("code-bpe-4m.gguf");
  BackendOptions opts;
  opts.threads = 2;
  testing::LoadedModel l = testing::LoadModel(path, opts);
  ASSERT_TRUE(l.backend != nullptr);
  for (const json& p : golden["prompts"]) {
    const auto ids = p["ids"].get<std::vector<TokenId>>();
    ASSERT_NO_FATAL_FAILURE(testing::ExpectGoldenPrompt(*l.backend, ids, p, 1e-3, /*check_argmax=*/false,
                                                        "prompt " + p["id"].dump()));
  }
}

}  // namespace
}  // namespace specserve
