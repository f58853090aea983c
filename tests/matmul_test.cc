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

// The AVX-512 kernel's contract, bit for bit: each result is DequantizeRow's
// values times x, fused multiply-adds into 16 lanes in column order (lane
// i % 16), the lanes then summed pairwise as _mm512_reduce_add_ps does (8 + 8,
// 4 + 4, 2 + 2, 1 + 1). Q4_K blocks cover every 6-bit scale and min in every
// sub-block j = 0..7 and Q6_K blocks every int8 scale, with d and dmin of
// either sign (zero included), for passes of 1..9 tokens.
float LaneOrderDot(const float* w, const float* x, int64_t n) {
  float lane[16] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % 16] = std::fma(w[i], x[i], lane[i % 16]);
  float a[8], b[4];
  for (int i = 0; i < 8; ++i) a[i] = lane[i] + lane[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  return (b[0] + b[2]) + (b[1] + b[3]);
}

// Q4_K's 12 scale bytes: sub-block j's 6-bit scale and min (the inverse of
// ggml's get_scale_min_k4).
void PutScaleMinK4(int j, uint8_t* q, int sc, int m) {
  if (j < 4) {
    q[j] = static_cast<uint8_t>((q[j] & 0xC0) | sc);
    q[j + 4] = static_cast<uint8_t>((q[j + 4] & 0xC0) | m);
  } else {
    q[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    q[j - 4] = static_cast<uint8_t>((q[j - 4] & 0x3F) | ((sc >> 4) << 6));
    q[j] = static_cast<uint8_t>((q[j] & 0x3F) | ((m >> 4) << 6));
  }
}

TEST(MatMulKernelTest, Avx512EqualsDequantizeThenLaneOrderDotBitForBit) {
  if (!cpu::UseAvx512MatMul()) GTEST_SKIP() << "this CPU has no AVX-512 (or SPECSERVE_CPU_KERNELS=avx2)";
  // 16 rows of 4 super-blocks: 64 super-blocks per matrix.
  constexpr int64_t kR = 16, kC = 1024, kBlocks = kR * kC / 256;
  const std::vector<float> x = RandomX(9 * kC, 7);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ5_0, GgmlType::kQ4_K,
                        GgmlType::kQ6_K}) {
    Matrix w = RandomMatrix(type, kR, kC, 11);
    std::mt19937 rng(13);
    if (type == GgmlType::kQ4_K) {
      for (int64_t blk = 0; blk < kBlocks; ++blk) {
        uint8_t* b = w.bytes.data() + blk * 144;
        for (int j = 0; j < 8; ++j) PutScaleMinK4(j, b + 4, (blk + j) % 64, (5 * blk + 3 * j + 1) % 64);
        if (blk % 16 == 3) std::memset(b, 0, 2);      // d = 0
        if (blk % 16 == 7) std::memset(b + 2, 0, 2);  // dmin = 0
      }
    } else if (type == GgmlType::kQ6_K) {
      for (int64_t blk = 0; blk < kBlocks; ++blk) {
        for (int i = 0; i < 16; ++i) w.bytes[blk * 210 + 192 + i] = static_cast<uint8_t>(blk * 16 + i);
      }
    }
    std::vector<float> row(kC), want(9 * kR);
    for (int64_t r = 0; r < kR; ++r) {
      DequantizeRow(type, w.view.row(r), row.data(), kC);
      for (int64_t t = 0; t < 9; ++t) want[t * kR + r] = LaneOrderDot(row.data(), x.data() + t * kC, kC);
    }
    for (int64_t T = 1; T <= 9; ++T) {
      std::vector<float> y(T * kR);
      cpu::MatMulRowsAvx512(w.view, x.data(), T, y.data(), 0, kR);
      for (int64_t i = 0; i < T * kR; ++i) {
        uint32_t got_bits, want_bits;
        std::memcpy(&got_bits, &y[i], 4);
        std::memcpy(&want_bits, &want[i], 4);
        ASSERT_EQ(got_bits, want_bits) << GgmlTypeName(type) << ", pass of " << T << ", token " << i / kR
                                       << ", row " << i % kR << ": " << y[i] << " vs " << want[i];
      }
    }
  }
}

}  // namespace
}  // namespace specserve
