// The CPU matrix kernels (kernels/cpu_matmul.h) for every weight type the
// engine reads: each (row, token) result is close to a double-precision dot
// product of DequantizeRow's values, and has the same bits whatever the
// number of tokens in the pass, the rows grouped with it and the number of
// threads (batch invariance: a verify pass gives one-token decoding's bits).
// Shapes span several row groups and token groups, with ragged ends.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/fp16.h"
#include "common/tensor_types.h"
#include "common/thread_pool.h"
#include "common/weights.h"
#include "kernels/cpu_matmul.h"
#include "kernels/cpu_matmul_avx512.h"

namespace specserve {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

// Random quants; every f16 scale field a finite value of either sign.
Matrix RandomMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.1f);
  Matrix m;
  const uint64_t row_bytes = RowBytes(type, cols);
  m.bytes.resize(rows * row_bytes);
  auto put_half = [&](size_t off) {
    const uint16_t h = F32ToF16(normal(rng) * 0.1f);
    std::memcpy(m.bytes.data() + off, &h, 2);
  };
  for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
  if (type == GgmlType::kF32) {
    for (size_t i = 0; i < m.bytes.size(); i += 4) {
      const float v = normal(rng);
      std::memcpy(m.bytes.data() + i, &v, 4);
    }
  } else if (type == GgmlType::kF16) {
    for (size_t i = 0; i < m.bytes.size(); i += 2) put_half(i);
  } else {
    // Block size in bytes and the offsets of its f16 scales.
    size_t block = 0;
    std::vector<size_t> halves;
    switch (type) {
      case GgmlType::kQ8_0: block = 34, halves = {0}; break;
      case GgmlType::kQ5_0: block = 22, halves = {0}; break;
      case GgmlType::kQ4_K: block = 144, halves = {0, 2}; break;
      case GgmlType::kQ6_K: block = 210, halves = {208}; break;
      default: ADD_FAILURE() << "no layout for type " << static_cast<int>(type);
    }
    for (size_t off = 0; off + block <= m.bytes.size(); off += block) {
      for (size_t h : halves) put_half(off + h);
    }
  }
  m.view = MatrixView{type, m.bytes.data(), rows, cols, row_bytes};
  return m;
}

class MatMulTest : public ::testing::TestWithParam<GgmlType> {};

// 53 rows (ragged against every row group), 768 columns (three K-quant
// super-blocks), up to 40 tokens (more than one pass over memory).
constexpr int64_t kRows = 53, kCols = 768, kMaxT = 40;

std::vector<float> RandomX(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

TEST_P(MatMulTest, CloseToDequantizedDotProducts) {
  const Matrix w = RandomMatrix(GetParam(), kRows, kCols, 1);
  const std::vector<float> x = RandomX(3 * kCols, 2);
  std::vector<float> y(3 * kRows);
  ThreadPool pool(1);
  MatMul(w.view, x.data(), 3, y.data(), pool);
  std::vector<float> row(kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    DequantizeRow(w.view.type, w.view.row(r), row.data(), kCols);
    for (int64_t t = 0; t < 3; ++t) {
      double want = 0, scale = 0;
      for (int64_t i = 0; i < kCols; ++i) {
        want += static_cast<double>(row[i]) * x[t * kCols + i];
        scale += std::fabs(static_cast<double>(row[i]) * x[t * kCols + i]);
      }
      ASSERT_NEAR(y[t * kRows + r], want, 1e-5 * scale + 1e-6) << "row " << r << " token " << t;
    }
  }
}

TEST_P(MatMulTest, EveryPassWidthAndThreadCountGivesTheBitsOfOneToken) {
  const Matrix w = RandomMatrix(GetParam(), kRows, kCols, 3);
  const std::vector<float> x = RandomX(kMaxT * kCols, 4);
  // One token at a time, one thread.
  std::vector<float> want(kMaxT * kRows);
  ThreadPool one(1);
  for (int64_t t = 0; t < kMaxT; ++t) MatMul(w.view, x.data() + t * kCols, 1, want.data() + t * kRows, one);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int64_t T : {2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 24, 25, 40}) {
      std::vector<float> y(T * kRows);
      MatMul(w.view, x.data(), T, y.data(), pool);
      for (int64_t i = 0; i < T * kRows; ++i) {
        ASSERT_EQ(y[i], want[i]) << "threads " << threads << ", pass of " << T << ", token " << i / kRows
                                 << ", row " << i % kRows;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatMulTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ5_0,
                                           GgmlType::kQ4_K, GgmlType::kQ6_K),
                         [](const auto& info) { return std::string(GgmlTypeName(info.param)); });

TEST(MatMulKernelTest, Avx512IsUsedWhereTheCpuHasIt) {
  if (!cpu::UseAvx512MatMul()) GTEST_SKIP() << "this CPU has no AVX-512 (or SPECSERVE_CPU_KERNELS=avx2)";
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ5_0, GgmlType::kQ4_K,
                     GgmlType::kQ6_K}) {
    EXPECT_TRUE(cpu::Avx512MatMulSupports(RandomMatrix(t, 2, 256, 5).view)) << GgmlTypeName(t);
  }
  EXPECT_FALSE(cpu::Avx512MatMulSupports(RandomMatrix(GgmlType::kF32, 2, 40, 5).view));
}

}  // namespace
}  // namespace specserve
