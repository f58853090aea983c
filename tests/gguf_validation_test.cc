// Load-time validation of a model file against its config: corrupted copies
// of a real bundled model (byte-patched header fields) and tiny synthetic
// models must be refused with INVALID_ARGUMENT naming the tensor and what was
// expected vs found; the unmodified model must still load.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/gguf.h"
#include "common/weights.h"
#include "tests/gguf_writer.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using ::testing::HasSubstr;

// --- Byte patches of the GGUF header ----------------------------------------

// The position just after the first occurrence of the GGUF string `s` (u64
// length, then the bytes): a metadata key or a tensor name. The header comes
// before the tensor data, so the first match is the header's.
size_t After(const std::string& bytes, std::string_view s) {
  const std::string needle = testing::GgufWriter::EncStr(s);
  const size_t p = bytes.find(needle);
  EXPECT_NE(p, std::string::npos) << s << " not found in the header";
  return p == std::string::npos ? 0 : p + needle.size();
}

template <typename T>
T Get(const std::string& bytes, size_t pos) {
  T v;
  std::memcpy(&v, bytes.data() + pos, sizeof(T));
  return v;
}
template <typename T>
void Put(std::string& bytes, size_t pos, T v) {
  std::memcpy(bytes.data() + pos, &v, sizeof(T));
}

// Field positions of a tensor info: u32 n_dims, i64 ne[n_dims], u32 type,
// u64 offset.
struct InfoPos {
  size_t ne;      // ne[0]; ne[d] is at ne + 8 * d
  size_t type;
  size_t offset;
};
InfoPos TensorInfo(const std::string& bytes, std::string_view name) {
  const size_t p = After(bytes, name);
  const uint32_t n_dims = Get<uint32_t>(bytes, p);
  const size_t ne = p + 4;
  return {ne, ne + 8 * n_dims, ne + 8 * n_dims + 4};
}

// The value of a uint32 metadata key.
size_t U32Value(const std::string& bytes, std::string_view key) {
  const size_t p = After(bytes, key);
  EXPECT_EQ(Get<uint32_t>(bytes, p), testing::gguf_type::kUint32) << key;
  return p + 4;
}

class CorruptedModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::ifstream in(testing::BundledModel("code-target-7m.gguf"), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    original_ = new std::string(ss.str());
  }
  static void TearDownTestSuite() {
    delete original_;
    original_ = nullptr;
  }
  void SetUp() override { ASSERT_GT(original_->size(), 1u << 20) << "models/code-target-7m.gguf"; }
  // Each case writes one copy (13 MB) and removes it.
  void TearDown() override { ::unlink(Path().c_str()); }

  static std::string Path() {
    return ::testing::TempDir() + "/gguf_validation_" + std::to_string(::getpid()) + ".gguf";
  }
  std::string Bytes() const { return *original_; }
  absl::Status Load(const std::string& bytes) {
    EXPECT_TRUE(testing::WriteFile(Path(), bytes));
    return Model::Load(Path()).status();
  }
  void ExpectRefused(const std::string& bytes, const std::vector<std::string>& subs) {
    const absl::Status s = Load(bytes);
    ASSERT_FALSE(s.ok()) << "a corrupted model loaded";
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    for (const std::string& sub : subs) EXPECT_THAT(std::string(s.message()), HasSubstr(sub));
  }
  // Tensor `name`'s type changed from `from` to `to`, its shape kept: refused, naming it.
  void ExpectTypeChangeRefused(const std::string& name, uint32_t from, uint32_t to, std::vector<std::string> subs) {
    std::string b = Bytes();
    const InfoPos t = TensorInfo(b, name);
    ASSERT_EQ(Get<uint32_t>(b, t.type), from);
    Put<uint32_t>(b, t.type, to);
    subs.insert(subs.begin(), name);
    ExpectRefused(b, subs);
  }

  static std::string* original_;
};
std::string* CorruptedModelTest::original_ = nullptr;

constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8;

TEST_F(CorruptedModelTest, UnmodifiedCopyLoads) {
  auto m = Model::Load(testing::BundledModel("code-target-7m.gguf"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->config.vocab, 4096);
  EXPECT_EQ((*m)->config.n_layer, 6);
  EXPECT_TRUE(Load(Bytes()).ok()) << Load(Bytes());  // the copy as the patches write it
}

TEST_F(CorruptedModelTest, TokenEmbeddingOneRowShortOfTheVocabulary) {
  std::string b = Bytes();
  const InfoPos emb = TensorInfo(b, "token_embd.weight");
  ASSERT_EQ(Get<int64_t>(b, emb.ne + 8), 4096);
  Put<int64_t>(b, emb.ne + 8, 4095);
  ExpectRefused(b, {"token_embd.weight", "4095", "4096", "tokenizer.ggml.tokens"});
}

TEST_F(CorruptedModelTest, BlockCountOneMore) {
  std::string b = Bytes();
  const size_t v = U32Value(b, "llama.block_count");
  ASSERT_EQ(Get<uint32_t>(b, v), 6u);
  Put<uint32_t>(b, v, 7);
  ExpectRefused(b, {"llama.block_count", "7", "6 layers"});
}

TEST_F(CorruptedModelTest, BlockCountOneFewer) {
  std::string b = Bytes();
  Put<uint32_t>(b, U32Value(b, "llama.block_count"), 5);
  ExpectRefused(b, {"llama.block_count", "5", "blk.5.", "6 layers"});
}

// F16 -> F32 doubles the tensor's bytes: it runs into the next tensor.
TEST_F(CorruptedModelTest, TypeChangedToALargerOne) {
  ExpectTypeChangeRefused("blk.0.attn_q.weight", kF16, kF32, {"F32", "overlaps", "blk.0.attn_k.weight"});
}

// F16 -> Q8_0 shrinks it: the bytes after it belong to no tensor.
TEST_F(CorruptedModelTest, TypeChangedToASmallerOne) {
  ExpectTypeChangeRefused("blk.2.ffn_up.weight", kF16, kQ8_0, {"Q8_0", "unused", "blk.2.ffn_down.weight"});
}

// The last tensor in the file: what it no longer covers trails the data.
TEST_F(CorruptedModelTest, TypeOfTheLastTensorChanged) {
  ExpectTypeChangeRefused("output_norm.weight", kF32, kF16, {"F16", "unused", "end of the file"});
}

TEST_F(CorruptedModelTest, OffsetMovedOntoAnotherTensor) {
  std::string b = Bytes();
  const InfoPos k = TensorInfo(b, "blk.3.attn_k.weight");
  const InfoPos v = TensorInfo(b, "blk.3.attn_v.weight");
  Put<uint64_t>(b, v.offset, Get<uint64_t>(b, k.offset));
  ExpectRefused(b, {"blk.3.attn_v.weight", "blk.3.attn_k.weight", "overlaps"});
}

// One alignment step forward: into the next tensor, leaving a gap behind.
TEST_F(CorruptedModelTest, OffsetMovedForwardByTheAlignment) {
  std::string b = Bytes();
  const InfoPos v = TensorInfo(b, "blk.3.attn_v.weight");
  Put<uint64_t>(b, v.offset, Get<uint64_t>(b, v.offset) + 32);
  ExpectRefused(b, {"blk.3.attn_v.weight"});
}

TEST_F(CorruptedModelTest, OffsetPastTheEndOfTheFile) {
  std::string b = Bytes();
  const InfoPos d = TensorInfo(b, "blk.1.ffn_down.weight");
  Put<uint64_t>(b, d.offset, (b.size() + 31) / 32 * 32);
  ExpectRefused(b, {"blk.1.ffn_down.weight", "outside the file"});
}

TEST_F(CorruptedModelTest, MisalignedOffset) {
  std::string b = Bytes();
  const InfoPos d = TensorInfo(b, "blk.1.ffn_down.weight");
  Put<uint64_t>(b, d.offset, Get<uint64_t>(b, d.offset) + 2);
  ExpectRefused(b, {"blk.1.ffn_down.weight", "misaligned"});
}

// Same bytes, rows and columns swapped.
TEST_F(CorruptedModelTest, ShapeTransposed) {
  std::string b = Bytes();
  const InfoPos k = TensorInfo(b, "blk.4.attn_k.weight");
  const int64_t cols = Get<int64_t>(b, k.ne), rows = Get<int64_t>(b, k.ne + 8);
  Put<int64_t>(b, k.ne, rows);
  Put<int64_t>(b, k.ne + 8, cols);
  ExpectRefused(b, {"blk.4.attn_k.weight", "[288, 96]", "[96, 288]"});
}

// --- Tiny synthetic models ----------------------------------------------------

// A model as a list of tensors with the shapes its config implies, which each
// case then edits. Data is all ones (F32).
struct Tiny {
  std::string arch = "llama";
  int64_t vocab = 16, embd = 8, ff = 16, layers = 2, heads = 2, kv_heads = 1;
  std::optional<int64_t> tokens = 16;  // tokenizer.ggml.tokens count
  std::optional<int64_t> vocab_size_key;
  std::optional<int64_t> key_length, value_length;
  bool output = false;                 // untied output.weight
  std::vector<std::string> drop;       // tensors left out
  std::map<std::string, std::vector<int64_t>> reshape;  // ggml order (ne)
  std::vector<std::pair<std::string, std::vector<int64_t>>> extra;

  std::string Write(const std::string& file) const {
    testing::GgufWriter w;
    w.String("general.architecture", arch);
    const std::string p = arch + ".";
    w.U32(p + "embedding_length", embd).U32(p + "block_count", layers);
    w.U32(p + "attention.head_count", heads).U32(p + "attention.head_count_kv", kv_heads);
    w.U32(p + "feed_forward_length", ff).U32(p + "context_length", 64);
    if (key_length) w.U32(p + "attention.key_length", *key_length);
    if (value_length) w.U32(p + "attention.value_length", *value_length);
    if (vocab_size_key) w.U32(p + "vocab_size", *vocab_size_key);
    if (tokens) {
      std::vector<std::string> t;
      for (int64_t i = 0; i < *tokens; ++i) t.push_back("t" + std::to_string(i));
      w.StringArray("tokenizer.ggml.tokens", t);
    }
    const int64_t hd = key_length ? *key_length : embd / heads;
    const int64_t q = heads * hd, kv = kv_heads * hd;
    std::vector<std::pair<std::string, std::vector<int64_t>>> ts = {
        {"token_embd.weight", {embd, vocab}}, {"output_norm.weight", {embd}}};
    if (output) ts.push_back({"output.weight", {embd, vocab}});
    for (int64_t i = 0; i < layers; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      ts.push_back({b + "attn_norm.weight", {embd}});
      ts.push_back({b + "attn_q.weight", {embd, q}});
      ts.push_back({b + "attn_k.weight", {embd, kv}});
      ts.push_back({b + "attn_v.weight", {embd, kv}});
      if (arch == "qwen2") {
        ts.push_back({b + "attn_q.bias", {q}});
        ts.push_back({b + "attn_k.bias", {kv}});
        ts.push_back({b + "attn_v.bias", {kv}});
      }
      ts.push_back({b + "attn_output.weight", {q, embd}});
      ts.push_back({b + "ffn_norm.weight", {embd}});
      ts.push_back({b + "ffn_gate.weight", {embd, ff}});
      ts.push_back({b + "ffn_up.weight", {embd, ff}});
      ts.push_back({b + "ffn_down.weight", {ff, embd}});
    }
    for (const auto& e : extra) ts.push_back(e);
    for (auto& [name, ne] : ts) {
      if (std::find(drop.begin(), drop.end(), name) != drop.end()) continue;
      if (auto it = reshape.find(name); it != reshape.end()) ne = it->second;
      int64_t n = 1;
      for (int64_t d : ne) n *= d;
      w.F32Tensor(name, ne, std::vector<float>(n, 1.0f));
    }
    const std::string path = ::testing::TempDir() + "/" + file;
    EXPECT_TRUE(testing::WriteFile(path, w.Build()));
    return path;
  }
};

absl::Status LoadTiny(const Tiny& t, const std::string& file) {
  const std::string path = t.Write(file);
  absl::Status s = Model::Load(path).status();
  ::unlink(path.c_str());
  return s;
}

void ExpectTinyRefused(const Tiny& t, const std::string& file, const std::vector<std::string>& subs,
                       absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  const absl::Status s = LoadTiny(t, file);
  ASSERT_FALSE(s.ok()) << file << " loaded";
  EXPECT_EQ(s.code(), code) << s;
  for (const std::string& sub : subs) EXPECT_THAT(std::string(s.message()), HasSubstr(sub)) << file;
}

TEST(TinyModelValidationTest, WellFormedModelsLoad) {
  Tiny llama;
  EXPECT_TRUE(LoadTiny(llama, "tiny_llama.gguf").ok()) << LoadTiny(llama, "tiny_llama.gguf");
  Tiny qwen;
  qwen.arch = "qwen2";
  EXPECT_TRUE(LoadTiny(qwen, "tiny_qwen2.gguf").ok()) << LoadTiny(qwen, "tiny_qwen2.gguf");
  Tiny untied;
  untied.output = true;
  untied.vocab_size_key = 16;
  EXPECT_TRUE(LoadTiny(untied, "tiny_untied.gguf").ok()) << LoadTiny(untied, "tiny_untied.gguf");
  Tiny no_tokenizer;  // the vocabulary then comes from token_embd
  no_tokenizer.tokens.reset();
  EXPECT_TRUE(LoadTiny(no_tokenizer, "tiny_notok.gguf").ok());
  Tiny wide_heads;  // key_length sets the head size: q is [heads * 8, embd]
  wide_heads.key_length = 8;
  wide_heads.value_length = 8;
  EXPECT_TRUE(LoadTiny(wide_heads, "tiny_keylen.gguf").ok()) << LoadTiny(wide_heads, "tiny_keylen.gguf");
  Tiny freqs;
  freqs.extra.push_back({"rope_freqs.weight", {2}});
  EXPECT_TRUE(LoadTiny(freqs, "tiny_freqs.gguf").ok()) << LoadTiny(freqs, "tiny_freqs.gguf");
}

TEST(TinyModelValidationTest, EmbeddingRowsMustMatchTheTokenizer) {
  Tiny t;
  t.tokens = 17;
  ExpectTinyRefused(t, "tiny_tokens.gguf", {"token_embd.weight", "[16, 8]", "[17, 8]"});
  t = Tiny();
  t.vocab_size_key = 15;
  ExpectTinyRefused(t, "tiny_vocab_key.gguf", {"llama.vocab_size", "15", "16"});
}

TEST(TinyModelValidationTest, UntiedOutputMustMatchTheVocabulary) {
  Tiny t;
  t.output = true;
  t.reshape["output.weight"] = {8, 15};
  ExpectTinyRefused(t, "tiny_output.gguf", {"output.weight", "[15, 8]", "[16, 8]"});
}

TEST(TinyModelValidationTest, Qwen2BiasesAreRequiredWithTheirShapes) {
  Tiny t;
  t.arch = "qwen2";
  t.drop = {"blk.1.attn_k.bias"};
  ExpectTinyRefused(t, "tiny_nobias.gguf", {"blk.1.attn_k.bias", "missing"});
  t = Tiny();
  t.arch = "qwen2";
  t.reshape["blk.0.attn_v.bias"] = {8};
  ExpectTinyRefused(t, "tiny_bias_len.gguf", {"blk.0.attn_v.bias", "[8]", "[4]"});
}

TEST(TinyModelValidationTest, TensorsTheArchitectureLacksAreRefused) {
  Tiny t;
  t.extra.push_back({"blk.0.attn_q.bias", {8}});  // qwen2's, not llama's
  ExpectTinyRefused(t, "tiny_llama_bias.gguf", {"blk.0.attn_q.bias", "llama"});
  t = Tiny();
  t.extra.push_back({"blk.1.ffn_extra.weight", {8}});
  ExpectTinyRefused(t, "tiny_unknown.gguf", {"blk.1.ffn_extra.weight"});
  t = Tiny();
  t.extra.push_back({"blk.x.attn_norm.weight", {8}});
  ExpectTinyRefused(t, "tiny_badlayer.gguf", {"blk.x.attn_norm.weight", "layer"});
  t = Tiny();
  t.extra.push_back({"blk.9223372036854775807.attn_norm.weight", {8}});
  ExpectTinyRefused(t, "tiny_hugelayer.gguf",
                    {"layer 9223372036854775807", "llama.block_count = 2", "9223372036854775808 layers"});
}

TEST(TinyModelValidationTest, HeadShapesFollowTheConfig) {
  Tiny t;  // kv heads 1 of 4 dims: attn_k is [4, 8]
  t.reshape["blk.1.attn_k.weight"] = {8, 8};
  ExpectTinyRefused(t, "tiny_kv.gguf", {"blk.1.attn_k.weight", "[8, 8]", "[4, 8]"});
  t = Tiny();
  t.reshape["blk.0.ffn_down.weight"] = {8, 16};
  ExpectTinyRefused(t, "tiny_down.gguf", {"blk.0.ffn_down.weight", "[16, 8]", "[8, 16]"});
  t = Tiny();
  t.key_length = 8;
  t.value_length = 4;  // v heads narrower than k heads: not something this engine runs
  ExpectTinyRefused(t, "tiny_vlen.gguf", {"value_length", "4", "key_length", "8"},
                    absl::StatusCode::kUnimplemented);
}

TEST(TinyModelValidationTest, LayerCountFollowsBlockCount) {
  Tiny t;
  t.drop = {"blk.1.attn_norm.weight"};
  ExpectTinyRefused(t, "tiny_missing.gguf", {"blk.1.attn_norm.weight", "missing"});
}

}  // namespace
}  // namespace specserve
