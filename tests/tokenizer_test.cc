// SentencePiece BPE tokenizer: a hand-built vocabulary for the rules, then the
// bundled models against the reference ids in ../shared (golden + eval).
#include "common/tokenizer.h"

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "common/gguf.h"
#include "common/spm_tokenizer.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Ids = std::vector<TokenId>;

// <unk> <s> </s> <0x00>..<0xFF>, then `normal` with descending scores, so
// the first normal piece has id 259 and merges first.
SpmVocab SmallVocab(const std::vector<std::string>& normal) {
  SpmVocab v;
  v.pieces = {"<unk>", "<s>", "</s>"};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    v.pieces.push_back(absl::StrFormat("<0x%02X>", b));
    v.types.push_back(TokenType::kByte);
  }
  v.scores.assign(v.pieces.size(), 0.0f);
  for (size_t i = 0; i < normal.size(); ++i) {
    v.pieces.push_back(normal[i]);
    v.types.push_back(TokenType::kNormal);
    v.scores.push_back(-static_cast<float>(i));
  }
  return v;
}

std::unique_ptr<Tokenizer> MustMake(SpmVocab v) {
  auto t = MakeSpmTokenizer(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

bool IsValidUtf8(const std::string& s) {
  // Reuses the Detokenizer's own scanner would prove nothing: decode by hand.
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (int k = 1; k < n; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Feeds ids one by one; checks every piece of output is whole UTF-8.
std::string Stream(const Tokenizer& tok, const Ids& ids) {
  Detokenizer d(tok);
  std::string out;
  for (TokenId id : ids) {
    std::string piece = d.Push(id);
    EXPECT_TRUE(IsValidUtf8(piece)) << "after id " << id;
    out += piece;
  }
  return out + d.Flush();
}

TEST(SpmRules, MergesHighestScoreFirstThenLeftmost) {
  // "ab" outranks "bc", so "abc" is "ab" + "c" even though "bc" is a piece.
  auto tok = MustMake(SmallVocab({"ab", "bc", "a", "b", "c", "\xE2\x96\x81"}));
  EXPECT_THAT(tok->Encode("abc", false), ElementsAre(264, 259, 263));
  // Equal scores: the leftmost pair wins ("aa" "a", not "a" "aa").
  SpmVocab v = SmallVocab({"aa", "a", "\xE2\x96\x81"});
  v.add_space_prefix = false;
  auto tok2 = MustMake(std::move(v));
  EXPECT_THAT(tok2->Encode("aaa", false), ElementsAre(259, 260));
}

TEST(SpmRules, SpacePrefixBosAndEmptyText) {
  auto tok = MustMake(SmallVocab({"\xE2\x96\x81x", "x", "\xE2\x96\x81"}));
  EXPECT_THAT(tok->Encode("x x", true), ElementsAre(1, 259, 259));
  EXPECT_THAT(tok->Encode("", false), ElementsAre());
  EXPECT_THAT(tok->Encode("", true), ElementsAre(1));
  EXPECT_EQ(tok->Decode({1, 259, 259}), "x x");
}

TEST(SpmRules, UnknownCharactersFallBackToBytes) {
  auto tok = MustMake(SmallVocab({"\xE2\x96\x81"}));
  // "é" is C3 A9: byte piece ids are 3 + byte.
  EXPECT_THAT(tok->Encode("\xC3\xA9", false), ElementsAre(259, 3 + 0xC3, 3 + 0xA9));
  // Invalid UTF-8 survives a round trip byte for byte.
  const std::string junk = "\xFF\x80z\xE6";
  EXPECT_EQ(tok->Decode(tok->Encode(junk, false)), junk);
  // A lead byte whose continuation bytes are missing is one character: it
  // must not swallow the space after it (found by fuzz_spm_tokenizer).
  for (const std::string s : {"\xEF ", "\xF0 a", "a\xE2 b", "\xC3 \xE2\x96\x81"}) {
    EXPECT_EQ(tok->Decode(tok->Encode(s, false)), s == "\xC3 \xE2\x96\x81" ? "\xC3  " : s) << s;
  }
}

TEST(SpmRules, ControlPiecesNeverComeFromText) {
  // "<s" + ">" spells the control piece "<s>" (id 1): it must not merge.
  auto tok = MustMake(SmallVocab({"<s", "<", "s", ">", "\xE2\x96\x81"}));
  EXPECT_THAT(tok->Encode("<s>", false), ElementsAre(263, 259, 262));
  EXPECT_EQ(tok->TokenBytes(1), "");
  EXPECT_EQ(tok->Decode({1, 263, 259, 262, 2}), "<s>");
}

TEST(SpmRules, DetokenizerHoldsSplitCharacters) {
  auto tok = MustMake(SmallVocab({"\xE2\x96\x81"}));
  for (const std::string s : {"caf\xC3\xA9", "a \xE2\x86\x92 b", "\xE6\x97\xA5\xE6\x9C\xAC",
                              "\xF0\x9F\x98\x80!", " lead", "\n"}) {
    const Ids ids = tok->Encode(s, true);
    EXPECT_EQ(Stream(*tok, ids), s);
    EXPECT_EQ(tok->Decode(ids), s);
  }
  // A 4-byte emoji arrives in four pushes: nothing until the last.
  Detokenizer d(*tok);
  EXPECT_EQ(d.Push(3 + 0xF0), "");
  EXPECT_EQ(d.Push(3 + 0x9F), "");
  EXPECT_EQ(d.Push(3 + 0x98), "");
  EXPECT_EQ(d.Push(3 + 0x80), "\xF0\x9F\x98\x80");
}

TEST(SpmRules, DetokenizerReplacesInvalidBytes) {
  auto tok = MustMake(SmallVocab({"a"}));
  Detokenizer d(*tok);
  EXPECT_EQ(d.Push(3 + 0xFF), "\xEF\xBF\xBD");        // never valid
  EXPECT_EQ(d.Push(3 + 0xE6), "");                    // could still be valid
  EXPECT_EQ(d.Push(259), "\xEF\xBF\xBD" "a");         // "a" proves it was not
  EXPECT_EQ(d.Push(3 + 0xE6), "");
  EXPECT_EQ(d.Flush(), "\xEF\xBF\xBD");               // cut short at the end
  EXPECT_EQ(d.Flush(), "");
}

TEST(SpmRules, BadVocabularyIsInvalidArgumentNamingTheKey) {
  SpmVocab v = SmallVocab({"a"});
  v.scores.pop_back();
  auto r = MakeSpmTokenizer(v);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("tokenizer.ggml.scores"));

  v = SmallVocab({"a"});
  v.types.push_back(TokenType::kNormal);
  EXPECT_THAT(MakeSpmTokenizer(v).status().message(), HasSubstr("tokenizer.ggml.token_type"));

  v = SmallVocab({"a"});
  v.bos = 260;
  EXPECT_THAT(MakeSpmTokenizer(v).status().message(), HasSubstr("tokenizer.ggml.bos_token_id"));

  v = SmallVocab({"a"});
  v.types[259] = TokenType::kByte;  // "a" is no <0xXX>
  EXPECT_EQ(MakeSpmTokenizer(v).status().code(), absl::StatusCode::kInvalidArgument);

  v = SmallVocab({"a"});
  v.types[259] = static_cast<TokenType>(9);
  EXPECT_EQ(MakeSpmTokenizer(v).status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(MakeSpmTokenizer(SpmVocab{}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SpmRules, CheckSameVocabulary) {
  auto a = MustMake(SmallVocab({"ab", "a", "b"}));
  auto same = MustMake(SmallVocab({"ab", "a", "b"}));
  auto renamed = MustMake(SmallVocab({"ab", "a", "c"}));
  auto shorter = MustMake(SmallVocab({"ab", "a"}));
  EXPECT_TRUE(CheckSameVocabulary(*a, *same).ok());

  absl::Status s = CheckSameVocabulary(*renamed, *a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("token 261"));
  EXPECT_THAT(s.message(), HasSubstr("\"c\""));
  EXPECT_THAT(s.message(), HasSubstr("\"b\""));

  s = CheckSameVocabulary(*shorter, *a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("261"));
  EXPECT_THAT(s.message(), HasSubstr("262"));
}

// ---- the bundled models against ../shared reference ids ----

class ModelTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto f = GgufFile::Open(testing::BundledModel("code-target-7m.gguf"));
    ASSERT_TRUE(f.ok()) << f.status();
    auto t = Tokenizer::FromGguf(**f);
    ASSERT_TRUE(t.ok()) << t.status();
    tok_ = t->release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(tok_, nullptr); }

  static nlohmann::json Golden() { return testing::LoadJson(testing::GoldenPath("golden.json")); }
  // Prompts of the eval set ({prompt, ids}); read at test time, never copied.
  static std::vector<nlohmann::json> EvalPrompts() {
    std::vector<nlohmann::json> out;
    const std::string path = testing::SharedPath("eval/code_prompts.jsonl");
    if (path.empty()) return out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }

  static Tokenizer* tok_;
};
Tokenizer* ModelTokenizer::tok_ = nullptr;

TEST_F(ModelTokenizer, Metadata) {
  EXPECT_EQ(tok_->model_name(), "llama");
  EXPECT_EQ(tok_->vocab_size(), 4096);
  EXPECT_EQ(tok_->bos(), 1);
  EXPECT_EQ(tok_->eos(), 2);
  EXPECT_TRUE(tok_->add_bos());
  EXPECT_TRUE(tok_->add_space_prefix());
  EXPECT_EQ(tok_->type(1), TokenType::kControl);
  EXPECT_EQ(tok_->TokenBytes(13), "\n");
}

TEST_F(ModelTokenizer, GoldenStrings) {
  const nlohmann::json g = Golden();
  if (g.is_null()) SPECSERVE_MISSING_INPUT("../shared/golden/golden.json");
  int n = 0;
  for (const auto& c : g.at("tokenizer")) {
    const std::string text = c.at("text");
    const Ids want = c.at("ids");
    EXPECT_EQ(tok_->Encode(text, /*add_bos=*/false), want) << text;
    const Ids with_bos = tok_->Encode(text, true);
    EXPECT_EQ(with_bos.front(), 1);
    EXPECT_EQ(tok_->Decode(want), text);
    EXPECT_EQ(tok_->Decode(with_bos), text);
    EXPECT_EQ(Stream(*tok_, with_bos), text);
    ++n;
  }
  EXPECT_EQ(n, 16);
}

// A reference prompt {"prompt", "ids", "id"}: encodes to its ids, which
// decode (at once and streamed) back to its text.
void ExpectReferenceIds(const Tokenizer& tok, const nlohmann::json& p) {
  const std::string text = p.at("prompt");
  const std::vector<TokenId> want = p.at("ids");
  EXPECT_EQ(tok.Encode(text, true), want) << "prompt " << p.at("id");
  EXPECT_EQ(tok.Decode(want), text);
  EXPECT_EQ(Stream(tok, want), text);
}

TEST_F(ModelTokenizer, GoldenPrompts) {
  const nlohmann::json g = Golden();
  if (g.is_null()) SPECSERVE_MISSING_INPUT("../shared/golden/golden.json");
  for (const auto& p : g.at("prompts")) ExpectReferenceIds(*tok_, p);
}

TEST_F(ModelTokenizer, EvalPrompts) {
  const std::vector<nlohmann::json> prompts = EvalPrompts();
  if (prompts.empty()) SPECSERVE_MISSING_INPUT("../shared/eval/code_prompts.jsonl");
  EXPECT_EQ(prompts.size(), 128u);
  for (const auto& p : prompts) ExpectReferenceIds(*tok_, p);
}

TEST_F(ModelTokenizer, StreamsMultiByteCharacters) {
  const std::string s = "x = \"caf\xC3\xA9 \xE2\x86\x92 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80\"\n";
  const Ids ids = tok_->Encode(s, true);
  int bytes = 0;
  for (TokenId id : ids) bytes += tok_->type(id) == TokenType::kByte;
  EXPECT_GE(bytes, 8) << "expected byte-fallback tokens";
  EXPECT_EQ(Stream(*tok_, ids), s);
  EXPECT_EQ(tok_->Decode(ids), s);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // ASan alone makes encoding ~20x slower
#else
constexpr bool kSanitized = false;
#endif

TEST_F(ModelTokenizer, EncodesAThirtyLinePromptWellUnderAMillisecond) {
  if (kSanitized) GTEST_SKIP() << "timing is meaningless under a sanitizer";
  std::string text;
  for (int i = 0; text.size() < 1500; ++i) {
    text += absl::StrFormat("    result_%d = compute(values[%d], scale=%d.5)  # step\n", i, i, i);
  }
  size_t total = tok_->Encode(text, true).size();  // warm up
  constexpr int kReps = 200;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kReps; ++i) total += tok_->Encode(text, true).size();
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      kReps;
  EXPECT_GT(total, 0u);
  EXPECT_LT(us, 1000.0);
  RecordProperty("encode_us", absl::StrFormat("%.1f", us));
}

TEST_F(ModelTokenizer, DraftSharesTheTargetVocabulary) {
  auto f = GgufFile::Open(testing::BundledModel("code-draft-1m.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  auto draft = Tokenizer::FromGguf(**f);
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_TRUE(CheckSameVocabulary(**draft, *tok_).ok());
  EXPECT_TRUE(CheckSameVocabulary(*tok_, *tok_).ok());
  auto small = MustMake(SmallVocab({"a"}));
  EXPECT_EQ(CheckSameVocabulary(*small, *tok_).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specserve
