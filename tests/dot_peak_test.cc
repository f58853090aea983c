// tools/dot_peak.h: the multiply-adds `specserve bench` counts for one token
// (its arithmetic floor's numerator) and the int8 dot peak it measures (the
// denominator).
#include "tools/dot_peak.h"

#include <gtest/gtest.h>

#include "kernels/cpu_matmul_int8.h"
#include "tests/test_models.h"

namespace specserve {
namespace {

// Every matrix of every layer and the output matrix, from the config alone:
// a matrix left out (or counted twice) changes the sum.
TEST(DotPeakTest, MacsPerTokenCountsEveryMatrixOnce) {
  for (const char* name : {"code-draft-1m", "code-target-7m"}) {
    const std::string path = testing::ModelPath(name);
    ASSERT_FALSE(path.empty()) << name;
    auto model = Model::Load(path);
    ASSERT_TRUE(model.ok()) << model.status();
    const ModelConfig& c = (*model)->config;
    const int64_t d = c.n_embd, q = c.q_dim(), kv = c.kv_dim(), ff = c.n_ff;
    const int64_t per_layer = q * d + 2 * kv * d + d * q + 3 * ff * d;
    EXPECT_EQ(cli::MatrixMacsPerToken((*model)->weights), c.n_layer * per_layer + int64_t{c.vocab} * d) << name;
  }
}

TEST(DotPeakTest, MeasuresTheKernelsDot) {
  const cli::DotPeak one = cli::MeasureInt8DotPeak(1);
  if (cpu::UseVnniInt8MatMul()) {
    EXPECT_EQ(one.instruction, "vpdpbusd zmm");
  } else if (!__builtin_cpu_supports("avx2")) {
    EXPECT_TRUE(one.instruction.empty());
    EXPECT_EQ(one.gmacs_per_s, 0);
    return;
  }
  // At least one 64-byte dot every 8 cycles of a 1 GHz core, and not more
  // than 4 a cycle at 6 GHz: a broken loop (hoisted, or timed empty) leaves
  // this range.
  EXPECT_GT(one.gmacs_per_s, 8.0);
  EXPECT_LT(one.gmacs_per_s, 4 * 64 * 6.0);
}

}  // namespace
}  // namespace specserve
