// The device kernels' plans, checked on the host (no GPU needed):
// kernels/matmul_plan.h (which passes take the fixed-order kernel; the
// power-of-two row scale that keeps split-f16 inside f16's range, with the
// split emulated in host f16) and kernels/attention_plan.h (the fixed key
// chunks that make a token's attention independent of the pass).
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backends/weight_convert.h"
#include "common/fp16.h"
#include "common/thread_pool.h"
#include "common/weights.h"
#include "kernels/attention_plan.h"
#include "kernels/matmul_plan.h"

namespace specserve {
namespace {

TEST(MatmulPlan, SmallPassesTakeTheFixedOrderKernel) {
  EXPECT_FALSE(UseFixedOrderMatmul(0));
  for (int64_t T = 1; T <= kFixedOrderMaxTokens; ++T) EXPECT_TRUE(UseFixedOrderMatmul(T)) << T;
  EXPECT_FALSE(UseFixedOrderMatmul(kFixedOrderMaxTokens + 1));
  // A verify pass of the largest round (K = 16) plus one decode fits.
  EXPECT_GE(kFixedOrderMaxTokens, 17 + 1);
}

TEST(MatmulPlan, ScaleExponentPutsTheRowMaximumInsideF16) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp2(-140, 127);
  for (int i = 0; i < 100000; ++i) {
    const float m = std::ldexp(mant(rng), exp2(rng));
    if (!(m > 0.0f) || std::isinf(m)) continue;
    const int e = SplitScaleExponent(m);
    ASSERT_GE(e, -126);
    ASSERT_LE(e, 126);
    const double scaled = std::ldexp(static_cast<double>(m), e);
    ASSERT_LT(scaled, 32768.0) << m;  // below f16's 65504 with room for the rounding
    if (e > -126 && e < 126) {
      ASSERT_GE(scaled, 16384.0) << m;
    }
    // The scale and its inverse are floats, and scaling is exact.
    const float s = std::ldexp(1.0f, e), inv = std::ldexp(1.0f, -e);
    ASSERT_TRUE(std::isfinite(s) && inv > 0.0f);
    if (std::abs(e) < 100) {
      ASSERT_EQ(m * s * inv, m);
    }
  }
  EXPECT_EQ(SplitScaleExponent(0.0f), 0);
  EXPECT_EQ(SplitScaleExponent(std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(SplitScaleExponent(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(SplitScaleExponent(FLT_MAX), 15 - 128);
  EXPECT_EQ(SplitScaleExponent(65520.0f), -1);  // 65520 = 0.9998 * 2^16: 32760 after
  EXPECT_EQ(SplitScaleExponent(1.0f), 14);      // 1 = 0.5 * 2^1
}

// The split path of kernels/cuda_matmul.cu on one row, in host f16: scale,
// hi = f16(s x), lo = f16(s x - hi), (hi + lo) / s.
std::vector<float> SplitRoundTrip(const std::vector<float>& x, bool scaled) {
  float m = 0.0f;
  for (float v : x) m = std::fmax(m, std::fabs(v));
  const int e = scaled ? SplitScaleExponent(m) : 0;
  const float s = std::ldexp(1.0f, e), inv = std::ldexp(1.0f, -e);
  std::vector<float> out;
  for (float v : x) {
    const float sv = v * s;
    const float hi = F16ToF32(F32ToF16(sv));
    const float lo = F16ToF32(F32ToF16(sv - hi));
    out.push_back((hi + lo) * inv);
  }
  return out;
}

TEST(MatmulPlan, ScaledSplitKeepsActivationsBeyondF16Finite) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float big : {65520.0f, 70000.0f, 1e6f, 3e9f, 1e30f}) {
    std::vector<float> x(512);
    for (float& v : x) v = normal(rng);
    x[17] = big;
    x[300] = -big / 3;
    // Unscaled, the split overflows: f16(big) = inf, and inf - inf = NaN.
    const std::vector<float> raw = SplitRoundTrip(x, false);
    EXPECT_FALSE(std::isfinite(raw[17])) << big;
    const std::vector<float> got = SplitRoundTrip(x, true);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << big << " at " << i;
      // About 22 bits relative to the row's largest entry survive.
      ASSERT_LE(std::fabs(got[i] - x[i]), big * std::ldexp(1.0f, -21)) << big << " at " << i;
    }
    EXPECT_EQ(got[17], big);
  }
  // Small rows gain precision instead of losing it to f16's subnormals.
  std::vector<float> tiny(64);
  for (float& v : tiny) v = normal(rng) * 1e-6f;
  float m = 0.0f;
  for (float v : tiny) m = std::fmax(m, std::fabs(v));
  const std::vector<float> got = SplitRoundTrip(tiny, true);
  for (size_t i = 0; i < tiny.size(); ++i) ASSERT_LE(std::fabs(got[i] - tiny[i]), m * std::ldexp(1.0f, -21));
}

TEST(AttentionPlan, KeyChunksDoNotDependOnThePass) {
  // A token with n keys sees chunks [c * C, min(n, (c + 1) * C)) for
  // c < ceil(n / C), whatever the pass's longest sequence.
  for (int32_t n : {1, 31, 255, 256, 257, 1000, 4096, 131072}) {
    const int32_t own = AttentionSplits(n);
    for (int32_t max_keys : {n, n + 1, n + 300, 200000}) {
      const int32_t splits = AttentionSplits(max_keys);
      ASSERT_GE(splits, own);
      int32_t nonempty = 0;
      for (int32_t c = 0; c < splits; ++c) nonempty += c * kAttentionKeyChunk < n ? 1 : 0;
      ASSERT_EQ(nonempty, own) << n << " keys in a pass of up to " << max_keys;
    }
  }
  EXPECT_EQ(AttentionSplits(1), 1);
  EXPECT_EQ(AttentionSplits(kAttentionKeyChunk), 1);
  EXPECT_EQ(AttentionSplits(kAttentionKeyChunk + 1), 2);
  EXPECT_EQ(kAttentionKeyChunk % 128, 0);  // 4 warps x 32 keys start at the same offsets in every chunk
}

TEST(AttentionPlan, SlicesBoundTheScratch) {
  for (int64_t T : {1, 17, 4096, 100000}) {
    for (int32_t keys : {1, 300, 8192, 131072}) {
      const int64_t slice = AttentionSliceTokens(T, 64, 128, keys);
      ASSERT_GE(slice, 1);
      ASSERT_LE(slice, T);
      const int64_t bytes = AttentionPartBytes(T, 64, 128, keys);
      if (slice > 1) {
        ASSERT_LE(bytes, kAttentionPartBytes) << T << " " << keys;
      }
      ASSERT_EQ(bytes, slice * 64 * AttentionSplits(keys) * 130 * 4);
    }
  }
  EXPECT_EQ(AttentionSliceTokens(5, 32, 128, 100), 5);  // a verify pass: one launch
}

// The weight upload's conversion (backends/weight_convert.h) on several
// threads: every row, rounded to nearest even as the portable reference.
TEST(WeightConvert, RowsToF16OnManyThreadsMatchesThePortableRounding) {
  const int64_t rows = 37, cols = 1003;
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> w(rows * cols);
  for (float& v : w) v = normal(rng);
  w[5] = 1e6f;      // overflows f16: inf
  w[6] = 1e-9f;     // below f16's subnormals: 0
  w[7] = 3.1e-5f;   // an f16 subnormal
  const MatrixView m{GgmlType::kF32, reinterpret_cast<const uint8_t*>(w.data()), rows, cols,
                     static_cast<uint64_t>(cols * sizeof(float))};
  ThreadPool pool(4);
  std::vector<uint16_t> out((rows - 3) * cols, 0xffff);
  RowsToF16(m, 3, rows - 3, out.data(), pool);
  for (int64_t r = 3; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(out[(r - 3) * cols + c], fp16_internal::F32ToF16Portable(w[r * cols + c])) << r << "," << c;
    }
  }
  std::vector<uint16_t> first(cols);
  RowsToF16(m, 0, 1, first.data(), pool);
  EXPECT_EQ(F16ToF32(first[5]), std::numeric_limits<float>::infinity());
  EXPECT_EQ(first[6], 0);
  EXPECT_EQ(first[7], fp16_internal::F32ToF16Portable(3.1e-5f));
}

}  // namespace
}  // namespace specserve
