// Quantized model files (Q8_0 and the Q4_K_M mix of Q4_K, Q5_0, Q6_K, Q8_0)
// against golden_quant.json: fp32 arithmetic on exactly the weights ggml
// dequantizes. Also the direct Q8_0 kernel against the dequantize-then-dot
// path, and refusal of tensor types and architectures the engine lacks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/backend.h"
#include "common/fp16.h"
#include "common/weights.h"
#include "kernels/cpu_matmul.h"
#include "kernels/cpu_matmul_avx512.h"
#include "kernels/cpu_quant_dot.h"
#include "tests/gguf_writer.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// Top-5 logits must agree to this (absolute) ...
constexpr float kLogitTol = 1e-2f;
// ... and a greedy step may pick another token only when the two are this
// close in our logits (a near-tie that summation order can flip).
constexpr float kNearTie = 1e-3f;

// With --cpu-activations int8 (llama.cpp's rounding of the activations) the
// logits move further from the fp32 reference: measured worst top-5 errors
// 0.10 (7m Q8_0), 0.18 (1m Q8_0), 0.26 (7m Q4_K_M) and 0.13 (bpe Q4_K_M),
// so int8 is held to this looser bound, and a greedy
// step may differ where the two choices are this close in our logits.
constexpr float kInt8LogitTol = 0.35f;
constexpr float kInt8NearTie = 0.35f;

// Every golden prompt of FILE: its top-5 logits within LOGIT_TOL and its
// greedy continuation equal to the reference's until a near-tie (a gap below
// NEAR_TIE in our logits), which ends that prompt's comparison.
void ExpectMatchesQuantGolden(const std::string& file, MatMulActivations activations, float logit_tol,
                              float near_tie) {
  const json golden = testing::LoadJson(testing::GoldenPath("golden_quant.json"));
  if (golden.is_null()) SPECSERVE_MISSING_INPUT("../shared/golden/golden_quant.json");
  ASSERT_TRUE(golden["files"].contains(file)) << file;
  const std::string path = testing::SharedPath("models/variants/" + file);
  if (path.empty()) SPECSERVE_MISSING_INPUT(file);
  BackendOptions opts;
  opts.threads = 2;
  opts.cpu_activations = activations;
  testing::LoadedModel l = testing::LoadModel(path, opts);
  ASSERT_TRUE(l.backend != nullptr);
  Backend& b = *l.backend;
  const int32_t V = l.model->config.vocab;
  float worst = 0;
  int ties = 0;
  for (const json& p : golden["files"][file]["prompts"]) {
    const auto ids = p["ids"].get<std::vector<TokenId>>();
    KvSeq seq;
    std::vector<float> logits;
    ASSERT_TRUE(b.Forward({ForwardSeq{&seq, ids, 1}}, &logits).ok());
    const testing::LogitError err = testing::ExpectTop5Near(logits, p["last_logits_top5"], logit_tol, 0.0,
                                                            absl::StrCat(file, " prompt ", p["id"].dump()));
    worst = std::max(worst, err.abs);
    const auto want = p["greedy_32"].get<std::vector<TokenId>>();
    TokenId next = testing::ArgmaxRow(logits.data(), V);
    for (size_t step = 0; step < want.size(); ++step) {
      if (next != want[step]) {
        // Ours and the reference's choice, compared in our logits.
        const float gap = logits[next] - logits[want[step]];
        if (gap < near_tie) {
          ++ties;
          std::printf("%s prompt %d: near-tie at step %zu: %d vs reference %d, gap %.3g; "
                      "not comparing the rest\n",
                      file.c_str(), p["id"].get<int>(), step, next, want[step], gap);
          ::testing::Test::RecordProperty(absl::StrCat("near_tie_prompt_", p["id"].get<int>()),
                         absl::StrCat("step ", step, " gap ", gap));
        } else {
          ADD_FAILURE() << file << " prompt " << p["id"] << " diverges at step " << step << ": "
                        << next << " vs reference " << want[step] << ", logit gap " << gap;
        }
        break;
      }
      TokenId one[1] = {next};
      ASSERT_TRUE(b.Forward({ForwardSeq{&seq, one, 1}}, &logits).ok());
      next = testing::ArgmaxRow(logits.data(), V);
    }
    b.kv_pool().Release(seq);
  }
  std::printf("%s, %s activations: worst top-5 logit error %.3g, near-ties %d\n", file.c_str(),
              MatMulActivationsName(activations), worst, ties);
  ::testing::Test::RecordProperty("worst_top5_abs_error", std::to_string(worst));
}

class QuantGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantGoldenTest, TopLogitsAndGreedyContinuation) {
  ExpectMatchesQuantGolden(GetParam(), MatMulActivations::kFp32, kLogitTol, kNearTie);
}

TEST_P(QuantGoldenTest, Int8ActivationsStayNearTheReference) {
  ExpectMatchesQuantGolden(GetParam(), MatMulActivations::kInt8, kInt8LogitTol, kInt8NearTie);
}

// The int8 mode is live: it changes logits (so it is not the fp32 path under
// another name), by less than its tolerance.
TEST(QuantInt8Test, Int8ActivationsChangeTheLogitsALittle) {
  const std::string path = testing::SharedPath("models/variants/code-target-7m-q8_0.gguf");
  if (path.empty()) SPECSERVE_MISSING_INPUT("code-target-7m-q8_0.gguf");
  std::vector<float> logits[2];
  for (MatMulActivations a : {MatMulActivations::kFp32, MatMulActivations::kInt8}) {
    BackendOptions opts;
    opts.cpu_activations = a;
    testing::LoadedModel l = testing::LoadModel(path, opts);
    KvSeq seq;
    const std::vector<TokenId> ids = {1, 822, 995, 298, 876, 1125, 13, 678};
    ASSERT_TRUE(l.backend->Forward({ForwardSeq{&seq, ids, 1}}, &logits[a == MatMulActivations::kInt8]).ok());
    l.backend->kv_pool().Release(seq);
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  float worst = 0;
  for (size_t i = 0; i < logits[0].size(); ++i) worst = std::max(worst, std::abs(logits[0][i] - logits[1][i]));
  EXPECT_GT(worst, 1e-4f);
  EXPECT_LT(worst, 2 * kInt8LogitTol);
}

INSTANTIATE_TEST_SUITE_P(Variants, QuantGoldenTest,
                         ::testing::Values("code-target-7m-q8_0.gguf", "code-draft-1m-q8_0.gguf",
                                           "code-target-7m-q4_k_m.gguf", "code-bpe-4m-q4_k_m.gguf"),
                         [](const auto& info) {
                           std::string s = info.param.substr(0, info.param.size() - 5);
                           std::replace(s.begin(), s.end(), '-', '_');
                           std::replace(s.begin(), s.end(), '.', '_');
                           return s;
                         });

// Every file in variants/ loads, whatever its types.
TEST(QuantLoadTest, EveryVariantLoads) {
  const std::string dir = testing::SharedPath("models/variants");
  if (dir.empty()) SPECSERVE_MISSING_INPUT("../shared/models/variants");
  int n = 0;
  for (const char* f : {"code-target-7m-q8_0.gguf", "code-draft-1m-q8_0.gguf",
                        "code-target-7m-q4_k_m.gguf", "code-bpe-4m-q4_k_m.gguf",
                        "code-target-7m-qwen2.gguf"}) {
    const std::string path = dir + "/" + f;
    if (!std::ifstream(path).good()) continue;
    auto m = Model::Load(path);
    EXPECT_TRUE(m.ok()) << f << ": " << m.status();
    ++n;
  }
  EXPECT_GT(n, 0);
}

// --- The direct Q8_0 kernel -----------------------------------------------

// Random Q8_0 blocks for a [rows, cols] matrix.
std::string RandomQ8_0(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_real_distribution<float> d(0.001f, 0.05f);
  std::string data;
  for (int64_t b = 0; b < rows * cols / 32; ++b) {
    const uint16_t h = F32ToF16(d(rng));
    data.append(reinterpret_cast<const char*>(&h), 2);
    for (int i = 0; i < 32; ++i) data.push_back(static_cast<char>(q(rng)));
  }
  return data;
}

TEST(Q8_0KernelTest, EqualsDequantizeThenDot) {
  for (int64_t rows : {1, 5, 37}) {
    for (int64_t cols : {32, 288}) {
      const std::string data = RandomQ8_0(rows, cols, static_cast<uint32_t>(rows * 1000 + cols));
      const MatrixView w{GgmlType::kQ8_0, reinterpret_cast<const uint8_t*>(data.data()), rows,
                         cols, RowBytes(GgmlType::kQ8_0, cols)};
      std::vector<float> deq(rows * cols);
      for (int64_t r = 0; r < rows; ++r) DequantizeMatrixRow(w, r, deq.data() + r * cols);
      for (int64_t T : {1, 2, 3, 4, 7, 12, 13}) {
        std::mt19937 rng(static_cast<uint32_t>(T));
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        std::vector<float> x(T * cols);
        for (float& v : x) v = u(rng);
        // Two row ranges, as the thread pool splits them.
        std::vector<float> direct(T * rows, -1.f);
        MatMulQ8_0Rows(w, x.data(), T, direct.data(), 0, rows / 2);
        MatMulQ8_0Rows(w, x.data(), T, direct.data(), rows / 2, rows);
        ThreadPool pool(2);
        std::vector<float> via_matmul(T * rows);
        MatMul(w, x.data(), T, via_matmul.data(), pool);  // direct up to 12, tiled above
        for (int64_t t = 0; t < T; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            double ref = 0;
            for (int64_t i = 0; i < cols; ++i) ref += static_cast<double>(deq[r * cols + i]) * x[t * cols + i];
            EXPECT_NEAR(direct[t * rows + r], ref, 1e-4) << rows << "x" << cols << " T " << T;
            EXPECT_NEAR(via_matmul[t * rows + r], ref, 1e-4) << rows << "x" << cols << " T " << T;
            // On the AVX2 path MatMul runs this kernel up to 3 tokens and the
            // tiled path above with the same widening and fma order:
            // identical. (AVX-512 CPUs run kernels/cpu_matmul_avx512.h,
            // tested in tests/matmul_test.cc.)
            if (!cpu::UseAvx512MatMul()) {
              EXPECT_EQ(direct[t * rows + r], via_matmul[t * rows + r]) << rows << "x" << cols << " T " << T;
            }
          }
        }
      }
    }
  }
}

// --- Vectorised dequantizers -------------------------------------------------

// Random blocks of `type` whose f16 scales are finite (random bytes elsewhere).
std::string RandomBlocks(GgmlType type, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.1f, 0.1f);
  std::string data(RowBytes(type, n), '\0');
  for (char& c : data) c = static_cast<char>(byte(rng));
  auto put_half = [&](size_t off) {
    const uint16_t h = F32ToF16(scale(rng));
    std::memcpy(data.data() + off, &h, 2);
  };
  for (size_t b = 0; b < data.size();) {
    switch (type) {
      case GgmlType::kQ5_0: put_half(b); b += 22; break;
      case GgmlType::kQ4_K: put_half(b); put_half(b + 2); b += 144; break;
      case GgmlType::kQ6_K: put_half(b + 208); b += 210; break;
      default: b = data.size();
    }
  }
  return data;
}

TEST(DequantizeFastTest, BitIdenticalToDequantizeRow) {
  for (GgmlType t : {GgmlType::kQ5_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0}) {
    const int64_t n = 1024;
    for (uint32_t seed = 0; seed < 20; ++seed) {
      const std::string data = RandomBlocks(t, n, seed);
      std::vector<float> want(n), got(n);
      DequantizeRow(t, data.data(), want.data(), n);
      DequantizeRowFast(t, reinterpret_cast<const uint8_t*>(data.data()), got.data(), n);
      ASSERT_EQ(std::memcmp(want.data(), got.data(), n * sizeof(float)), 0)
          << GgmlTypeName(t) << " seed " << seed;
    }
  }
}

TEST(DequantizeFastTest, BitIdenticalOnEveryRowOfTheVariants) {
  const std::string dir = testing::SharedPath("models/variants");
  if (dir.empty()) SPECSERVE_MISSING_INPUT("../shared/models/variants");
  int64_t rows = 0;
  for (const char* f : {"code-target-7m-q4_k_m.gguf", "code-bpe-4m-q4_k_m.gguf"}) {
    auto file = GgufFile::Open(dir + "/" + f);
    if (!file.ok()) continue;
    for (const GgufTensor& t : (*file)->tensors()) {
      if (t.type == GgmlType::kF32 || t.type == GgmlType::kF16) continue;
      std::vector<float> want(t.ne[0]), got(t.ne[0]);
      for (int64_t r = 0; r < t.nrows(); ++r, ++rows) {
        DequantizeRow(t.type, t.row(r), want.data(), t.ne[0]);
        DequantizeRowFast(t.type, t.row(r), got.data(), t.ne[0]);
        ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
            << f << " " << t.name << " row " << r;
      }
    }
  }
  if (rows == 0) SPECSERVE_MISSING_INPUT("a Q4_K_M variant");
}

// --- Refusals --------------------------------------------------------------

// A llama header and a token embedding of the given ggml type (the first
// tensor BindWeights binds), with room for 32 x 256 elements of any type.
std::string WriteEmbeddingOnly(const std::string& name, const std::string& arch, uint32_t type) {
  testing::GgufWriter w;
  w.String("general.architecture", arch);
  w.U32(arch + ".embedding_length", 256);
  w.U32(arch + ".block_count", 1);
  w.U32(arch + ".attention.head_count", 2);
  w.U32(arch + ".feed_forward_length", 128);
  w.U32(arch + ".context_length", 64);
  w.Tensor({"token_embd.weight", {256, 32}, type, std::string(32 * 256 * 4, '\0'), std::nullopt});
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(testing::WriteFile(path, w.Build()));
  return path;
}

TEST(QuantLoadTest, UnsupportedTensorTypeIsRefusedByName) {
  for (auto [type, type_name] : {std::pair<uint32_t, const char*>{2, "Q4_0"}, {13, "Q5_K"},
                                 {23, "IQ4_XS"}}) {
    auto m = Model::Load(WriteEmbeddingOnly(absl::StrCat("type_", type, ".gguf"), "llama", type));
    ASSERT_FALSE(m.ok()) << type_name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented) << m.status();
    EXPECT_THAT(m.status().message(), HasSubstr(type_name));
    EXPECT_THAT(m.status().message(), HasSubstr("token_embd.weight"));
  }
}

TEST(QuantLoadTest, UnsupportedArchitectureIsRefusedByName) {
  auto m = Model::Load(WriteEmbeddingOnly("arch.gguf", "mamba", 0));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(m.status().message(), HasSubstr("mamba"));
}

}  // namespace
}  // namespace specserve
