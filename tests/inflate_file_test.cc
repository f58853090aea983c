// `specserve inflate`: the GGUF file it writes loads here and in an
// independent reader (tests/gguf_read.py), computes the small model's
// function, and holds exactly the in-memory inflation (tools/inflate.h)
// in the chosen encoding (tools/inflate_gguf.h).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/gguf.h"
#include "common/quantize.h"
#include "common/weights.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"
#include "tools/inflate.h"
#include "tools/inflate_gguf.h"
#include "tools/inflate_shape.h"

namespace specserve {
namespace {

// Wider, deeper, more heads (group 3 as the small model's), more kv heads and
// feed-forward units than code-target-7m (288, 6 layers, 6 / 2 heads, 768);
// the query width 576 is not n_embd (attention.key_length is written) and not
// a multiple of 256 (Q4_K_M's attn_output falls back to Q5_0).
constexpr char kShape[] = "512,8,12,4,1024";
constexpr uint64_t kSeed = 5;
constexpr size_t kGreedyTokens = 24;

struct ShellRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

ShellRun Shell(const std::string& cmd) {
  ShellRun r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string Specserve() { return testing::BinDir() + "/specserve"; }

class InflateFileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    small_path_ = testing::ModelPath("code-target-7m");
    if (small_path_.empty()) return;
    // One folder per process: ctest runs each test in its own process, two at
    // a time, and a suite's teardown removes its folder.
    dir_ = ::testing::TempDir() + "/inflate_file_test_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    for (const char* type : {"f16", "q8_0", "q4_k_m"}) {
      const std::string out = Out(type);
      runs_.push_back(Shell(Specserve() + " inflate --model " + small_path_ + " --shape " + kShape + " --type " +
                            type + " --seed " + std::to_string(kSeed) + " --out " + out));
    }
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void SetUp() override {
    if (small_path_.empty()) SPECSERVE_MISSING_INPUT("code-target-7m.gguf");
    for (const ShellRun& r : runs_) ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static std::string Out(const std::string& type) { return dir_ + "/big-" + type + ".gguf"; }

  // The reference prompt: golden.json's first prompt.
  static std::vector<TokenId> Prompt() {
    const nlohmann::json golden = testing::LoadJson(testing::GoldenPath("golden.json"));
    if (golden.is_null()) return {};
    return golden["prompts"][0]["ids"].get<std::vector<TokenId>>();
  }

  // The last row of logits after PROMPT and the greedy continuation.
  static void Greedy(const std::string& path, const std::vector<TokenId>& prompt, std::vector<float>* logits,
                     std::vector<TokenId>* tokens) {
    testing::LoadedModel l = testing::LoadModel(path);
    ASSERT_NE(l.backend, nullptr) << path;
    KvSeq seq;
    ASSERT_TRUE(l.backend->Forward({ForwardSeq{&seq, prompt, 1}}, logits).ok());
    std::vector<float> work = *logits;
    auto out = testing::GreedyContinuation(*l.backend, seq, work, kGreedyTokens);
    ASSERT_TRUE(out.ok()) << out.status();
    *tokens = *out;
    l.backend->kv_pool().Release(seq);
  }

  static inline std::string small_path_, dir_;
  static inline std::vector<ShellRun> runs_;
};

TEST_F(InflateFileTest, F16FileGivesTheSmallModelsGreedyOutput) {
  const std::vector<TokenId> prompt = Prompt();
  if (prompt.empty()) SPECSERVE_MISSING_INPUT("golden.json");
  std::vector<float> want_logits, got_logits;
  std::vector<TokenId> want, got;
  ASSERT_NO_FATAL_FAILURE(Greedy(small_path_, prompt, &want_logits, &want));
  ASSERT_NO_FATAL_FAILURE(Greedy(Out("f16"), prompt, &got_logits, &got));
  EXPECT_EQ(got, want);
  ASSERT_EQ(got_logits.size(), want_logits.size());
  float worst = 0;
  for (size_t i = 0; i < want_logits.size(); ++i) worst = std::max(worst, std::abs(got_logits[i] - want_logits[i]));
  EXPECT_LT(worst, 0.05f);  // the f16 rounding of the rotated weights
}

TEST_F(InflateFileTest, QuantizedFilesStayCloseToTheF16One) {
  // Quantization changes the function a little: the last prompt position's
  // logits stay near the F16 file's and pick the same token.
  const std::vector<TokenId> prompt = Prompt();
  if (prompt.empty()) SPECSERVE_MISSING_INPUT("golden.json");
  std::vector<float> f16_logits;
  std::vector<TokenId> f16_tokens;
  ASSERT_NO_FATAL_FAILURE(Greedy(Out("f16"), prompt, &f16_logits, &f16_tokens));
  for (const auto& [type, tol] : std::vector<std::pair<std::string, float>>{{"q8_0", 0.3f}, {"q4_k_m", 2.0f}}) {
    std::vector<float> logits;
    std::vector<TokenId> tokens;
    ASSERT_NO_FATAL_FAILURE(Greedy(Out(type), prompt, &logits, &tokens));
    float worst = 0;
    for (size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::abs(logits[i] - f16_logits[i]));
    std::printf("%s: max |logit - f16's| %.4f, greedy agrees on %zu leading tokens\n", type.c_str(), worst,
                static_cast<size_t>(std::mismatch(tokens.begin(), tokens.end(), f16_tokens.begin()).first -
                                    tokens.begin()));
    EXPECT_LT(worst, tol) << type;
    EXPECT_GT(worst, 0.0f) << type << " is not quantized";
    EXPECT_EQ(tokens[0], f16_tokens[0]) << type;
  }
}

// The file's bytes against the in-memory inflation with the same seed,
// encoded here: F16 bit for bit, quantized types row by row through
// QuantizeRow; and the metadata the loader reads.
void ExpectFileHoldsInflation(const std::string& path, const inflate::Inflated& big, inflate::FileType ft) {
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  ASSERT_TRUE(f.CheckDataLayout().ok()) << f.CheckDataLayout();
  const std::vector<inflate::FileTensor> want = inflate::FileTensors(big, ft);
  ASSERT_EQ(f.tensors().size(), want.size());
  for (const inflate::FileTensor& t : want) {
    const GgufTensor* g = f.FindTensor(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    ASSERT_EQ(g->type, t.type) << t.name;
    if (t.vec != nullptr) {
      ASSERT_EQ(g->nelements(), t.n) << t.name;
      EXPECT_EQ(std::memcmp(g->data, t.vec, t.n * 4), 0) << t.name;
      continue;
    }
    const MatrixView& m = t.matrix;
    ASSERT_EQ(g->ne[0], m.cols) << t.name;
    ASSERT_EQ(g->ne[1], m.rows) << t.name;
    std::vector<float> row(m.cols);
    std::vector<uint8_t> q(RowBytes(t.type, m.cols));
    int64_t bad_rows = 0;
    for (int64_t r = 0; r < m.rows; ++r) {
      const uint8_t* expect = m.row(r);
      if (t.type != GgmlType::kF16) {
        DequantizeRow(m.type, m.row(r), row.data(), m.cols);
        QuantizeRow(t.type, row.data(), q.data(), m.cols);
        expect = q.data();
      }
      bad_rows += std::memcmp(g->row(r), expect, q.size()) != 0;
    }
    EXPECT_EQ(bad_rows, 0) << t.name << " (" << GgmlTypeName(t.type) << ")";
  }
  auto config = ModelConfig::FromGguf(f);
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelConfig& c = big.model.config;
  EXPECT_EQ(config->n_embd, c.n_embd);
  EXPECT_EQ(config->n_layer, c.n_layer);
  EXPECT_EQ(config->n_head, c.n_head);
  EXPECT_EQ(config->n_head_kv, c.n_head_kv);
  EXPECT_EQ(config->head_dim, c.head_dim);
  EXPECT_EQ(config->n_ff, c.n_ff);
  EXPECT_EQ(config->rms_eps, c.rms_eps);
  EXPECT_FALSE(config->tied_output);
  EXPECT_EQ(*f.GetInt("general.file_type"), inflate::Info(ft).ftype);
  EXPECT_TRUE(f.Has("llama.attention.key_length"));  // 12 heads x 48 != 512
  EXPECT_TRUE(f.Has("tokenizer.ggml.tokens"));
}

TEST_F(InflateFileTest, FileReadBackEqualsTheInMemoryInflation) {
  auto small = Model::Load(small_path_);
  ASSERT_TRUE(small.ok()) << small.status();
  auto shape = inflate::ParseShape(kShape, (*small)->config);
  ASSERT_TRUE(shape.ok());
  auto big = inflate::Inflate(**small, *shape, kSeed);
  ASSERT_TRUE(big.ok()) << big.status();
  for (inflate::FileType ft : {inflate::FileType::kF16, inflate::FileType::kQ8_0, inflate::FileType::kQ4_K_M}) {
    SCOPED_TRACE(std::string(inflate::Info(ft).flag));
    ASSERT_NO_FATAL_FAILURE(ExpectFileHoldsInflation(Out(std::string(inflate::Info(ft).flag)), **big, ft));
  }
  // A different seed gives different filler weights: the comparison can fail.
  auto other = inflate::Inflate(**small, *shape, kSeed + 1);
  ASSERT_TRUE(other.ok());
  const MatrixView& a = (*big)->model.weights.layers[7].up;
  const MatrixView& b = (*other)->model.weights.layers[7].up;
  EXPECT_NE(std::memcmp(a.data, b.data, a.row_bytes * a.rows), 0);
}

TEST_F(InflateFileTest, Q4_K_MUsesLlamaCppsMix) {
  auto file = GgufFile::Open(Out("q4_k_m"));
  ASSERT_TRUE(file.ok()) << file.status();
  auto type = [&](const std::string& name) { return (*file)->FindTensor(name)->type; };
  EXPECT_EQ(type("output.weight"), GgmlType::kQ6_K);
  EXPECT_EQ(type("token_embd.weight"), GgmlType::kQ4_K);
  // 8 layers: more bits in 0 and 7 (first and last eighth) and 3, 6 (every third).
  for (int l = 0; l < 8; ++l) {
    const bool more = l == 0 || l == 3 || l == 6 || l == 7;
    const std::string p = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(type(p + "attn_v.weight"), more ? GgmlType::kQ6_K : GgmlType::kQ4_K) << l;
    EXPECT_EQ(type(p + "ffn_down.weight"), more ? GgmlType::kQ6_K : GgmlType::kQ4_K) << l;
    EXPECT_EQ(type(p + "attn_q.weight"), GgmlType::kQ4_K) << l;
    EXPECT_EQ(type(p + "attn_output.weight"), GgmlType::kQ5_0) << l;  // rows of 576: no K-quant blocks
    EXPECT_EQ(type(p + "attn_norm.weight"), GgmlType::kF32) << l;
  }
}

TEST_F(InflateFileTest, AnIndependentReaderLoadsTheFiles) {
  if (Shell("python3 -c pass").exit_code != 0) SPECSERVE_MISSING_INPUT("python3");
  const std::string reader = testing::SourceDir() + "/tests/gguf_read.py";
  for (const auto& [type, tensor] : std::vector<std::pair<std::string, std::string>>{
           {"f16", "blk.0.attn_q.weight"}, {"q8_0", "blk.1.ffn_up.weight"}, {"q4_k_m", "output_norm.weight"}}) {
    SCOPED_TRACE(type);
    const ShellRun r = Shell("python3 " + reader + " " + Out(type) + " --row " + tensor);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json j = nlohmann::json::parse(r.output);
    auto file = GgufFile::Open(Out(type));
    ASSERT_TRUE(file.ok());
    const GgufFile& f = **file;
    EXPECT_EQ(j["version"], 3);
    EXPECT_EQ(j["n_tensors"], f.tensors().size());
    EXPECT_EQ(j["n_kv"], f.keys().size());
    EXPECT_EQ(j["data_start"], f.data_start());
    EXPECT_EQ(j["arch"], "llama");
    EXPECT_EQ(j["n_tokens"], 4096);
    EXPECT_EQ(j["meta"]["llama.embedding_length"], 512);
    EXPECT_EQ(j["meta"]["llama.attention.head_count"], 12);
    EXPECT_EQ(j["meta"]["llama.attention.key_length"], 48);
    for (const GgufTensor& t : f.tensors()) {
      const nlohmann::json& jt = j["tensors"][t.name];
      EXPECT_EQ(jt["offset"], t.offset) << t.name;
      EXPECT_EQ(jt["nbytes"], t.nbytes) << t.name;
      EXPECT_EQ(jt["type"], std::string(GgmlTypeName(t.type))) << t.name;
    }
    const GgufTensor* t = f.FindTensor(tensor);
    std::vector<float> row(t->ne[0]);
    DequantizeRow(t->type, t->data, row.data(), t->ne[0]);
    const std::vector<double> got = j["row"].get<std::vector<double>>();
    ASSERT_EQ(got.size(), row.size());
    for (size_t i = 0; i < row.size(); ++i) EXPECT_NEAR(got[i], row[i], 1e-6 * std::max(1.0f, std::abs(row[i]))) << i;
  }
}

TEST_F(InflateFileTest, BadFlagsFailClearly) {
  const std::string base = Specserve() + " inflate --model " + small_path_ + " --out " + dir_ + "/bad.gguf";
  const struct {
    std::string flags, message;
  } cases[] = {
      {"--shape 512,8,12 --type f16", "--shape '512,8,12'"},
      {"--shape llama-3b --type f16", "--shape 'llama-3b'"},
      {"--shape 512,8,x,4,1024 --type f16", "five positive integers"},
      {"--shape 256,8,12,4,1024 --type f16", "n_embd 256 must be a power of two >= 288"},
      {"--shape 512,8,12,4,1024 --type q3_k", "--type 'q3_k' is not one of f16, q8_0, q4_k_m"},
      {"--shape 512,8,12,4,1024 --type f16 --bogus 1", "bogus"},
  };
  for (const auto& c : cases) {
    const ShellRun r = Shell(base + " " + c.flags);
    EXPECT_NE(r.exit_code, 0) << c.flags;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.flags << ": " << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/bad.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/bad.gguf.tmp"));
}

TEST(InflateShape, NamedShapesFitTheSmallModel) {
  ModelConfig c;
  c.n_embd = 288, c.n_head = 6, c.n_head_kv = 2, c.head_dim = 48;  // code-target-7m
  auto s = inflate::ParseShape("llama-1b", c);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->n_embd, 2048);
  EXPECT_EQ(s->n_layer, 16);
  EXPECT_EQ(s->n_ff, 8192);
  EXPECT_EQ(s->n_head, 48);
  EXPECT_EQ(s->n_head_kv, 12);
  c.n_embd = 2048, c.n_head = 32, c.n_head_kv = 8, c.head_dim = 64;  // Llama-3.2-1B's heads
  s = inflate::ParseShape("llama-1b", c);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->n_head, 32);
  EXPECT_EQ(s->n_head_kv, 8);
  s = inflate::ParseShape("llama-8b", c);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->n_embd, 4096);
  EXPECT_EQ(s->n_layer, 32);
  EXPECT_EQ(s->n_head, 64);
  EXPECT_EQ(s->n_head_kv, 16);
  EXPECT_EQ(s->n_ff, 14336);
}

}  // namespace
}  // namespace specserve
