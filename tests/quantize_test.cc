// common/quantize.h: every quantizer writes blocks DequantizeRow reads back
// within the type's error, and the block layouts are ggml's.
#include "common/quantize.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/fp16.h"
#include "common/tensor_types.h"

namespace specserve {
namespace {

struct Case {
  GgmlType type;
  double max_rel_rms;  // RMS error over RMS of the data, Gaussian weights
};

// N values of standard deviation SIGMA (0.02: a trained matrix's).
std::vector<float> Gaussian(int64_t n, uint64_t seed, float sigma = 0.02f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = g(rng);
  return x;
}

std::vector<float> RoundTrip(GgmlType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(RowBytes(t, n));
  QuantizeRow(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  DequantizeRow(t, q.data(), y.data(), n);
  return y;
}

class QuantizeTest : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeTest, RoundTripErrorIsTheTypes) {
  const GgmlType t = GetParam().type;
  ASSERT_TRUE(CanQuantize(t));
  const std::vector<float> x = Gaussian(4096, 3);
  // An outlier block and an all-zero block, as real matrices have.
  std::vector<float> data = x;
  data[100] = 0.5f;
  std::fill(data.begin() + 1024, data.begin() + 1280, 0.0f);
  const std::vector<float> y = RoundTrip(t, data);
  double err2 = 0, sig2 = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    err2 += (y[i] - data[i]) * (y[i] - data[i]);
    sig2 += data[i] * data[i];
    ASSERT_TRUE(std::isfinite(y[i])) << i;
  }
  for (int i = 1024; i < 1280; ++i) EXPECT_EQ(y[i], 0.0f) << "zero block, element " << i;
  const double rel = std::sqrt(err2 / sig2);
  std::printf("%s: relative RMS error %.5f\n", std::string(GgmlTypeName(t)).c_str(), rel);
  EXPECT_LT(rel, GetParam().max_rel_rms);
  // Not vacuous: a quantized type does lose something.
  if (t != GgmlType::kF32) EXPECT_GT(rel, 0.0);
}

TEST_P(QuantizeTest, ScaledDataScalesTheError) {
  // The same values times 4 quantize to the same codes: every step of the
  // fit scales exactly by a power of two (scales far from f16 subnormals).
  const GgmlType t = GetParam().type;
  const std::vector<float> x = Gaussian(512, 5, 1.0f);
  std::vector<float> x4(x);
  for (float& v : x4) v *= 4.0f;
  const std::vector<float> y = RoundTrip(t, x), y4 = RoundTrip(t, x4);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(y4[i], 4.0f * y[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizeTest,
                         ::testing::Values(Case{GgmlType::kF32, 1e-9}, Case{GgmlType::kF16, 1e-3},
                                           Case{GgmlType::kBF16, 5e-3}, Case{GgmlType::kQ8_0, 0.01},
                                           Case{GgmlType::kQ6_K, 0.04}, Case{GgmlType::kQ5_0, 0.07},
                                           Case{GgmlType::kQ4_K, 0.12}),
                         [](const auto& info) { return std::string(GgmlTypeName(info.param.type)); });

TEST(Quantize, Q8_0BlockLayout) {
  // One block: d = max|x| / 127 as f16, then int8 round(x / d).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = (j - 16) * 0.25f;  // max |x| = 4
  uint8_t b[34];
  QuantizeRow(GgmlType::kQ8_0, x.data(), b, 32);
  uint16_t d;
  std::memcpy(&d, b, 2);
  EXPECT_EQ(d, F32ToF16(4.0f / 127));
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  EXPECT_EQ(qs[0], -127);
  EXPECT_EQ(qs[16], 0);
  EXPECT_EQ(qs[20], static_cast<int8_t>(std::round(1.0f * 127 / 4)));
}

TEST(Quantize, Q4_KAndQ6_KRepresentTheirOwnGrid) {
  // Values already on a Q4_K / Q6_K grid come back exactly: the codes land
  // where the dequantizer looks for them (nibble order, scale packing).
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const std::vector<float> once = RoundTrip(t, Gaussian(256, 9));
    const std::vector<float> twice = RoundTrip(t, once);
    double worst = 0, amax = 0;
    for (size_t i = 0; i < once.size(); ++i) {
      worst = std::max(worst, double(std::abs(twice[i] - once[i])));
      amax = std::max(amax, double(std::abs(once[i])));
    }
    EXPECT_LT(worst, 0.02 * amax) << GgmlTypeName(t);
  }
}

}  // namespace
}  // namespace specserve
