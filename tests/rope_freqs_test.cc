// RoPE frequency factors (Llama 3.1's rope_freqs.weight) and linear scaling
// (*.rope.scaling.*): cpu::Rope against the formula, and the loader and
// forward pass on a tiny model written here.
#include <cmath>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/weights.h"
#include "kernels/cpu_ops.h"
#include "tests/gguf_writer.h"

namespace specserve {
namespace {

using ::testing::HasSubstr;

std::vector<float> RandomVec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

constexpr int32_t kHeads = 3, kHeadDim = 16;
const std::vector<int32_t> kPositions = {0, 1, 7, 100, 1000, 8191};

std::vector<float> Rotated(const std::vector<float>& x, const cpu::RopeParams& p) {
  std::vector<float> y = x;
  cpu::Rope(y.data(), kPositions.data(), static_cast<int64_t>(kPositions.size()), p);
  return y;
}

class RopeFactorsTest : public ::testing::TestWithParam<std::tuple<bool, int32_t>> {
 protected:
  cpu::RopeParams Params() const {
    return {kHeads, kHeadDim, std::get<1>(GetParam()), 500000.f, std::get<0>(GetParam())};
  }
  std::vector<float> x_ = RandomVec(kPositions.size() * kHeads * kHeadDim, 7);
};

TEST_P(RopeFactorsTest, OnesChangeNothing) {
  cpu::RopeParams p = Params();
  const std::vector<float> plain = Rotated(x_, p);
  const std::vector<float> ones(p.rope_dim / 2, 1.0f);
  p.freq_factors = ones.data();
  EXPECT_EQ(Rotated(x_, p), plain);  // bit for bit
  p.freq_factors = nullptr;
  p.freq_scale = 1.0f;
  EXPECT_EQ(Rotated(x_, p), plain);
}

TEST_P(RopeFactorsTest, FactorsDivideEachAngle) {
  cpu::RopeParams p = Params();
  const int32_t half = p.rope_dim / 2;
  std::vector<float> factors(half);
  for (int32_t i = 0; i < half; ++i) factors[i] = 1.0f + 0.75f * i;  // 1, 1.75, 2.5, ...
  p.freq_factors = factors.data();
  const std::vector<float> got = Rotated(x_, p);
  const std::vector<float> plain = Rotated(x_, Params());
  bool changed = false;
  for (size_t t = 0; t < kPositions.size(); ++t) {
    for (int32_t h = 0; h < kHeads; ++h) {
      const size_t base = (t * kHeads + h) * kHeadDim;
      for (int32_t i = 0; i < half; ++i) {
        // theta_i = pos * base^(-2i/d) / factor_i
        const double theta = kPositions[t] * std::pow(500000.0, -2.0 * i / p.rope_dim) / factors[i];
        const int32_t a = p.neox ? i : 2 * i;
        const int32_t b = p.neox ? i + half : 2 * i + 1;
        const double x0 = x_[base + a], x1 = x_[base + b];
        EXPECT_NEAR(got[base + a], x0 * std::cos(theta) - x1 * std::sin(theta), 2e-6) << t << " " << i;
        EXPECT_NEAR(got[base + b], x0 * std::sin(theta) + x1 * std::cos(theta), 2e-6) << t << " " << i;
        if (got[base + a] != plain[base + a]) changed = true;
      }
      // Dimensions past rope_dim never move.
      for (int32_t d = p.rope_dim; d < kHeadDim; ++d) EXPECT_EQ(got[base + d], x_[base + d]);
    }
  }
  EXPECT_TRUE(changed);
}

TEST_P(RopeFactorsTest, LinearScaleEqualsUniformFactors) {
  cpu::RopeParams p = Params();
  const std::vector<float> fours(p.rope_dim / 2, 4.0f);
  p.freq_factors = fours.data();
  const std::vector<float> by_factors = Rotated(x_, p);
  p.freq_factors = nullptr;
  p.freq_scale = 0.25f;  // scaling by a power of two is exact either way
  EXPECT_EQ(Rotated(x_, p), by_factors);
}

INSTANTIATE_TEST_SUITE_P(Layouts, RopeFactorsTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(16, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "neox" : "interleaved") +
                                  "_rope" + std::to_string(std::get<1>(info.param));
                         });

// --- Through the loader and the forward pass ---------------------------------

constexpr int64_t kVocab = 16, kEmbd = 8, kFf = 16;

struct TinyOptions {
  std::vector<float> rope_freqs;  // written as rope_freqs.weight when not empty
  std::string scaling_type;       // llama.rope.scaling.type when not empty
  float scaling_factor = 0.f;     // llama.rope.scaling.factor when > 0
};

TinyOptions Freqs(std::vector<float> f) {
  TinyOptions o;
  o.rope_freqs = std::move(f);
  return o;
}

// A one-layer llama with 2 heads of 4 dims and random F32 weights.
std::string WriteTinyLlama(const std::string& name, const TinyOptions& o) {
  testing::GgufWriter w;
  w.String("general.architecture", "llama");
  w.U32("llama.embedding_length", kEmbd);
  w.U32("llama.block_count", 1);
  w.U32("llama.attention.head_count", 2);
  w.U32("llama.feed_forward_length", kFf);
  w.U32("llama.context_length", 64);
  if (!o.scaling_type.empty()) w.String("llama.rope.scaling.type", o.scaling_type);
  if (o.scaling_factor > 0) w.F32("llama.rope.scaling.factor", o.scaling_factor);
  uint32_t seed = 1;
  auto matrix = [&](const std::string& n, int64_t rows, int64_t cols) {
    w.F32Tensor(n, {cols, rows}, RandomVec(rows * cols, seed++));
  };
  matrix("token_embd.weight", kVocab, kEmbd);
  w.F32Tensor("output_norm.weight", {kEmbd}, std::vector<float>(kEmbd, 1.f));
  if (!o.rope_freqs.empty()) {
    w.F32Tensor("rope_freqs.weight", {static_cast<int64_t>(o.rope_freqs.size())}, o.rope_freqs);
  }
  w.F32Tensor("blk.0.attn_norm.weight", {kEmbd}, std::vector<float>(kEmbd, 1.f));
  w.F32Tensor("blk.0.ffn_norm.weight", {kEmbd}, std::vector<float>(kEmbd, 1.f));
  for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
    matrix(std::string("blk.0.") + m + ".weight", kEmbd, kEmbd);
  }
  matrix("blk.0.ffn_gate.weight", kFf, kEmbd);
  matrix("blk.0.ffn_up.weight", kFf, kEmbd);
  matrix("blk.0.ffn_down.weight", kEmbd, kFf);
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(testing::WriteFile(path, w.Build()));
  return path;
}

// Logits of every position of a fixed 12-token prompt.
std::vector<float> AllLogits(const Model& m) {
  auto b = MakeCpuBackend(m, BackendOptions{});
  EXPECT_TRUE(b.ok()) << b.status();
  std::vector<TokenId> ids;
  for (int i = 0; i < 12; ++i) ids.push_back((i * 5 + 3) % kVocab);
  KvSeq s;
  std::vector<float> logits;
  EXPECT_TRUE((*b)->Forward({ForwardSeq{&s, ids, static_cast<int32_t>(ids.size())}}, &logits).ok());
  return logits;
}

TEST(RopeFreqsModelTest, FactorsReachTheForwardPass) {
  auto plain = Model::Load(WriteTinyLlama("rope_plain.gguf", {}));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->weights.rope_freqs, nullptr);
  EXPECT_EQ((*plain)->config.rope_freq_scale, 1.0f);
  const std::vector<float> want = AllLogits(**plain);

  auto ones = Model::Load(WriteTinyLlama("rope_ones.gguf", Freqs({1.f, 1.f})));
  ASSERT_TRUE(ones.ok()) << ones.status();
  ASSERT_NE((*ones)->weights.rope_freqs, nullptr);
  EXPECT_EQ(AllLogits(**ones), want);

  auto scaled = Model::Load(WriteTinyLlama("rope_scaled.gguf", Freqs({1.f, 8.f})));
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_NE(AllLogits(**scaled), want);

  // Linear scaling by 4 rotates as factors of 4 do.
  TinyOptions lin;
  lin.scaling_type = "linear";
  lin.scaling_factor = 4.f;
  auto linear = Model::Load(WriteTinyLlama("rope_linear.gguf", lin));
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_EQ((*linear)->config.rope_freq_scale, 0.25f);
  auto fours = Model::Load(WriteTinyLlama("rope_fours.gguf", Freqs({4.f, 4.f})));
  ASSERT_TRUE(fours.ok()) << fours.status();
  EXPECT_EQ(AllLogits(**linear), AllLogits(**fours));
}

TEST(RopeFreqsModelTest, BadScalingIsRefusedByName) {
  TinyOptions yarn;
  yarn.scaling_type = "yarn";
  yarn.scaling_factor = 4.f;
  auto m = Model::Load(WriteTinyLlama("rope_yarn.gguf", yarn));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(m.status().message(), HasSubstr("yarn"));

  m = Model::Load(WriteTinyLlama("rope_wrong_len.gguf", Freqs({1.f, 1.f, 1.f})));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("rope_freqs.weight"));

  m = Model::Load(WriteTinyLlama("rope_zero.gguf", Freqs({1.f, 0.f})));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("rope_freqs.weight[1]"));
}

}  // namespace
}  // namespace specserve
