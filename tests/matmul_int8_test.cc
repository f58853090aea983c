// The int8-activation matrix kernels (kernels/cpu_matmul_int8.h, MatMul with
// MatMulActivations::kInt8): bit for bit against a plain scalar model of the
// documented numerics (quantization, integer codes, per-lane float order,
// lane reduction) for Q8_0, Q5_0, Q4_K and Q6_K on shapes of several tiles
// with ragged ends; the same bits whatever the pass width and thread count
// (batch invariance); close to the fp32 path; edge-case activation blocks;
// the portable kernels give the bits of the AVX-512 VNNI ones; both orders
// of a wide pass over packed weights (cpu::PackedWidePass) give the same bits.
#include <cfloat>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/fp16.h"
#include "common/quantize.h"
#include "common/tensor_types.h"
#include "common/thread_pool.h"
#include "common/weights.h"
#include "kernels/cpu_matmul.h"
#include "kernels/cpu_matmul_int8.h"
#include "kernels/cpu_matmul_packed.h"
#include "tests/matmul_int8_reference.h"

namespace specserve {
namespace {

using int8_reference::RefDecode;
using int8_reference::RefMatMul;
using int8_reference::RefRow;

struct Matrix {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> packed;  // Q8_0 / Q4_K / Q6_K: as the CPU backend packs them
  MatrixView view;
};

// Q8_0, Q4_K and Q6_K views are packed, as the CPU backend does under int8
// activations.
void PackIfPackable(Matrix& m) {
  if (!cpu::PackableForInt8(m.view)) return;
  m.packed.resize(cpu::PackedBytes(m.view));
  cpu::PackForInt8(m.view, m.packed.data());
  m.view.packed = m.packed.data();
}

// Realistic weights: normal values quantized with QuantizeRow.
Matrix QuantizedMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.05f);
  Matrix m;
  const uint64_t row_bytes = RowBytes(type, cols);
  m.bytes.resize(rows * row_bytes);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = normal(rng);
    QuantizeRow(type, row.data(), m.bytes.data() + r * row_bytes, cols);
  }
  m.view = MatrixView{type, m.bytes.data(), rows, cols, row_bytes};
  PackIfPackable(m);
  return m;
}

// Random bytes (every code, every 6-bit scale and min), every f16 scale field
// a small finite value of either sign.
Matrix RandomBytesMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.01f);
  Matrix m;
  const uint64_t row_bytes = RowBytes(type, cols);
  m.bytes.resize(rows * row_bytes);
  for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
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
    for (size_t h : halves) {
      const uint16_t v = F32ToF16(normal(rng));
      std::memcpy(m.bytes.data() + off + h, &v, 2);
    }
  }
  m.view = MatrixView{type, m.bytes.data(), rows, cols, row_bytes};
  PackIfPackable(m);
  return m;
}

std::vector<float> RandomX(int64_t n, uint32_t seed, float sigma = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// The reference's codes are ggml's values: (u - o) * ws - m1 is what
// DequantizeRow gives, up to the rounding of ggml's float expression.
TEST(MatMulInt8Reference, DecodesGgmlValues) {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ5_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const Matrix w = RandomBytesMatrix(type, 3, 512, 21);
    std::vector<float> deq(512);
    for (int64_t r = 0; r < 3; ++r) {
      DequantizeRow(type, w.view.row(r), deq.data(), 512);
      const RefRow rr = RefDecode(type, w.view.row(r), 512);
      for (int64_t i = 0; i < 512; ++i) {
        const double want = static_cast<double>(rr.u[i] - rr.o) * rr.ws[i] - rr.m1[i / 32];
        ASSERT_NEAR(deq[i], want, 1e-6 * (std::fabs(want) + rr.m1[i / 32]) + 1e-30)
            << GgmlTypeName(type) << " row " << r << " value " << i;
      }
    }
  }
}

class MatMulInt8Test : public ::testing::TestWithParam<GgmlType> {};

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, int64_t rows,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(Bits(got[i]), Bits(want[i])) << what << ", token " << i / rows << ", row " << i % rows << ": "
                                           << got[i] << " vs " << want[i];
  }
}

// Sets the packed kernel's wide-pass order for one scope, then restores it.
class WidePassScope {
 public:
  explicit WidePassScope(cpu::PackedWidePass order) : saved_(cpu::CurrentPackedWidePass()) {
    cpu::SetPackedWidePass(order);
  }
  ~WidePassScope() { cpu::SetPackedWidePass(saved_); }

 private:
  cpu::PackedWidePass saved_;
};

const char* WidePassName(cpu::PackedWidePass order) {
  switch (order) {
    case cpu::PackedWidePass::kUnitSweep: return "unit sweep";
    case cpu::PackedWidePass::kTokenGroupTiles: return "token-group tiles";
    default: return "AMX tiles";
  }
}

// Every order this CPU runs: the AMX tiles only where AMX-INT8 runs (said
// once, so that a log shows which machines checked them).
std::vector<cpu::PackedWidePass> WidePasses() {
  std::vector<cpu::PackedWidePass> orders = {cpu::PackedWidePass::kUnitSweep,
                                             cpu::PackedWidePass::kTokenGroupTiles};
  if (cpu::AmxInt8Runs()) {
    orders.push_back(cpu::PackedWidePass::kAmxTiles);
  } else {
    static const bool said = [] {
      std::printf("note: this CPU has no AMX-INT8; the AMX kernel is not checked here\n");
      return true;
    }();
    (void)said;
  }
  return orders;
}

// The scalar model's bits for every case below.
void ExpectScalarModelBits(GgmlType type) {
  const bool k_quant = type == GgmlType::kQ4_K || type == GgmlType::kQ6_K;
  const std::vector<int64_t> cols = k_quant ? std::vector<int64_t>{256, 768, 2304}
                                            : std::vector<int64_t>{32, 96, 288, 2304};
  ThreadPool pool(2);
  constexpr int64_t kMaxT = 40;
  for (int64_t rows : {37, 100}) {
    for (int64_t n : cols) {
      for (int kind = 0; kind < 2; ++kind) {
        const Matrix w = kind == 0 ? QuantizedMatrix(type, rows, n, 5 + rows + n)
                                   : RandomBytesMatrix(type, rows, n, 6 + rows + n);
        const std::vector<float> x = RandomX(kMaxT * n, 7 + n);
        const std::vector<float> want = RefMatMul(w.view, x.data(), kMaxT);
        std::vector<int64_t> Ts;
        for (int64_t T = 1; T <= 17; ++T) Ts.push_back(T);
        Ts.push_back(kMaxT);
        for (int64_t T : Ts) {
          std::vector<float> y(T * rows);
          MatMul(w.view, x.data(), T, y.data(), pool, MatMulActivations::kInt8);
          ExpectSameBits(y, std::vector<float>(want.begin(), want.begin() + T * rows), rows,
                         std::string(GgmlTypeName(type)) + " " + std::to_string(rows) + "x" + std::to_string(n) +
                             (kind == 0 ? " quantized" : " random bytes") + ", pass of " + std::to_string(T));
        }
      }
    }
  }
}

// Every T = 1..17 and 40, rows spanning several row tiles with ragged ends,
// columns from one block up (32 * odd for the 32-value types), with either
// order of a wide pass over the packed weights (cpu_matmul_packed.h).
TEST_P(MatMulInt8Test, EqualsTheScalarModelBitForBit) {
  for (cpu::PackedWidePass order : WidePasses()) {
    SCOPED_TRACE(WidePassName(order));
    const WidePassScope scope(order);
    ExpectScalarModelBits(GetParam());
  }
}

TEST_P(MatMulInt8Test, EveryPassWidthAndThreadCountGivesTheBitsOfOneToken) {
  const GgmlType type = GetParam();
  constexpr int64_t kRows = 53, kCols = 768, kMaxT = 33;
  const Matrix w = QuantizedMatrix(type, kRows, kCols, 3);
  const std::vector<float> x = RandomX(kMaxT * kCols, 4);
  std::vector<float> want(kMaxT * kRows);
  ThreadPool one(1);
  for (int64_t t = 0; t < kMaxT; ++t) {
    MatMul(w.view, x.data() + t * kCols, 1, want.data() + t * kRows, one, MatMulActivations::kInt8);
  }
  for (cpu::PackedWidePass order : WidePasses()) {
    const WidePassScope scope(order);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      for (int64_t T : {2, 5, 9, 17, 33}) {
        std::vector<float> y(T * kRows);
        MatMul(w.view, x.data(), T, y.data(), pool, MatMulActivations::kInt8);
        ExpectSameBits(y, std::vector<float>(want.begin(), want.begin() + T * kRows), kRows,
                       std::string(WidePassName(order)) + ", threads " + std::to_string(threads) + ", pass of " +
                           std::to_string(T));
      }
    }
  }
}

// int8 activations move each result by about the quantization step of x
// (1/254 of each block's max) times |w|: well within 2% of sum |w| |x|.
TEST_P(MatMulInt8Test, CloseToTheFp32Path) {
  const GgmlType type = GetParam();
  constexpr int64_t kRows = 64, kCols = 2304, kT = 5;
  const Matrix w = QuantizedMatrix(type, kRows, kCols, 8);
  const std::vector<float> x = RandomX(kT * kCols, 9);
  std::vector<float> y8(kT * kRows), y32(kT * kRows), deq(kCols);
  ThreadPool pool(1);
  MatMul(w.view, x.data(), kT, y8.data(), pool, MatMulActivations::kInt8);
  MatMul(w.view, x.data(), kT, y32.data(), pool, MatMulActivations::kFp32);
  double worst = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    DequantizeRow(type, w.view.row(r), deq.data(), kCols);
    for (int64_t t = 0; t < kT; ++t) {
      double scale = 0;
      for (int64_t i = 0; i < kCols; ++i) scale += std::fabs(static_cast<double>(deq[i]) * x[t * kCols + i]);
      const double err = std::fabs(static_cast<double>(y8[t * kRows + r]) - y32[t * kRows + r]) / scale;
      worst = std::max(worst, err);
      ASSERT_LE(err, 0.02) << "row " << r << " token " << t << ": " << y8[t * kRows + r] << " vs fp32 "
                           << y32[t * kRows + r];
    }
  }
  // Typical relative error is ~1e-3; a broken offset or scale is far above.
  EXPECT_LT(worst, 0.005);
}

// An all-zero block, a block with one huge value, tiny (denormal) blocks, an
// all-zero token: finite results with the model's bits; a zero token gives 0.
TEST_P(MatMulInt8Test, EdgeCaseActivationBlocks) {
  const GgmlType type = GetParam();
  constexpr int64_t kRows = 19, kCols = 512, kT = 4;
  const Matrix w = QuantizedMatrix(type, kRows, kCols, 10);
  std::vector<float> x = RandomX(kT * kCols, 11);
  std::fill(x.begin() + 32, x.begin() + 64, 0.f);           // token 0, block 1: zero
  x[kCols + 70] = 1e30f;                                    // token 1, block 2: one huge value
  for (int j = 0; j < 32; ++j) x[kCols + 256 + j] = 1e-40f * (j - 16);  // token 1, block 8: denormals
  x[kCols + 300] = -3e-39f;                                 // token 1, block 9: one denormal among normals
  std::fill(x.begin() + 3 * kCols, x.end(), 0.f);           // token 3: zero
  ThreadPool pool(1);
  std::vector<float> y(kT * kRows);
  MatMul(w.view, x.data(), kT, y.data(), pool, MatMulActivations::kInt8);
  ExpectSameBits(y, RefMatMul(w.view, x.data(), kT), kRows, "edge cases");
  for (int64_t i = 0; i < kT * kRows; ++i) ASSERT_TRUE(std::isfinite(y[i])) << i;
  for (int64_t r = 0; r < kRows; ++r) EXPECT_EQ(y[3 * kRows + r], 0.f);
  // The huge value (exactly 127 d) dominates token 1: close to the fp32 result.
  std::vector<float> y32(kT * kRows);
  MatMul(w.view, x.data(), kT, y32.data(), pool, MatMulActivations::kFp32);
  for (int64_t r = 0; r < kRows; ++r) EXPECT_NEAR(y[kRows + r], y32[kRows + r], 1e-5 * std::fabs(y32[kRows + r]) + 1);
}

// A block holding inf or NaN makes its token's results NaN (never a
// finite-looking number); other tokens are untouched.
TEST_P(MatMulInt8Test, NonFiniteActivationsGiveNaN) {
  const GgmlType type = GetParam();
  constexpr int64_t kRows = 11, kCols = 256, kT = 3;
  const Matrix w = QuantizedMatrix(type, kRows, kCols, 12);
  std::vector<float> x = RandomX(kT * kCols, 13);
  x[5] = std::numeric_limits<float>::infinity();
  x[kCols + 200] = std::numeric_limits<float>::quiet_NaN();
  ThreadPool pool(1);
  std::vector<float> y(kT * kRows), alone(kRows);
  MatMul(w.view, x.data(), kT, y.data(), pool, MatMulActivations::kInt8);
  MatMul(w.view, x.data() + 2 * kCols, 1, alone.data(), pool, MatMulActivations::kInt8);
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_TRUE(std::isnan(y[r])) << r;
    EXPECT_TRUE(std::isnan(y[kRows + r])) << r;
    EXPECT_EQ(Bits(y[2 * kRows + r]), Bits(alone[r])) << r;
    EXPECT_TRUE(std::isfinite(y[2 * kRows + r])) << r;
  }
}

// A pass of no tokens (a batch whose sequences all finished) returns at
// once; the packed Q8_0 kernel once divided by its zero token groups here.
TEST_P(MatMulInt8Test, AnEmptyPassComputesNothing) {
  const Matrix w = QuantizedMatrix(GetParam(), 21, 256, 16);
  const std::vector<float> x = RandomX(256, 17);
  ThreadPool pool(2);
  float y = 1.f;
  MatMul(w.view, x.data(), 0, &y, pool, MatMulActivations::kInt8);
  EXPECT_EQ(y, 1.f);
}

// The portable kernels (CPUs without VNNI) give the VNNI kernels' bits: the
// quantized activations record for record, the products bit for bit.
TEST_P(MatMulInt8Test, PortableKernelsGiveTheSameBits) {
  const GgmlType type = GetParam();
  const int64_t cols = type == GgmlType::kQ4_K || type == GgmlType::kQ6_K ? 768 : 288;
  constexpr int64_t kRows = 29, kT = 11;
  const Matrix w = RandomBytesMatrix(type, kRows, cols, 14);
  std::vector<float> x = RandomX(kT * cols, 15);
  std::fill(x.begin() + 64, x.begin() + 96, 0.f);
  x[cols + 3] = 1e30f;
  x[2 * cols + 40] = std::numeric_limits<float>::infinity();
  cpu::Int8Activations a, b;
  cpu::QuantizeActivationsInt8(type, x.data(), kT, cols, a);
  cpu::QuantizeActivationsInt8Portable(type, x.data(), kT, cols, b);
  ASSERT_EQ(a.pairs, b.pairs);
  ASSERT_EQ(a.supers, b.supers);
  for (int64_t i = 0; i < kT * a.pairs; ++i) {
    ASSERT_EQ(std::memcmp(a.pair[i].q, b.pair[i].q, 64), 0) << "pair " << i;
    ASSERT_EQ(std::memcmp(a.pair[i].bias, b.pair[i].bias, 64), 0) << "pair " << i;
    ASSERT_EQ(std::memcmp(a.pair[i].d, b.pair[i].d, 64), 0) << "pair " << i;
  }
  for (int64_t i = 0; i < kT * a.supers; ++i) ASSERT_EQ(std::memcmp(a.ms[i].v, b.ms[i].v, 64), 0) << "super " << i;
  ASSERT_EQ(a.subs, b.subs);
  for (int64_t i = 0; i < kT * a.subs; ++i) ASSERT_EQ(a.sub_bias[i], b.sub_bias[i]) << "sub-block " << i;
  std::vector<float> y(kT * kRows), z(kT * kRows);
  cpu::MatMulInt8Rows(w.view, a, y.data(), 0, kRows);
  cpu::MatMulInt8RowsPortable(w.view, b, z.data(), 0, kRows);
  for (int64_t i = 0; i < kT * kRows; ++i) {
    if (std::isnan(y[i]) && std::isnan(z[i])) continue;
    ASSERT_EQ(Bits(y[i]), Bits(z[i])) << "token " << i / kRows << ", row " << i % kRows;
  }
}

// A packed kernel called directly: the scalar model's bits for every pass
// width up to 17, 33 and 40, on random bytes (every code, Q8_0's -128
// included, every 6-bit scale and min) and quantized weights, over row
// ranges that start and end inside a 16-row group and inside an 8-row half.
using PackedKernel = void (*)(const MatrixView&, const cpu::Int8Activations&, float*, int64_t, int64_t);
void ExpectPackedKernelBits(GgmlType type, PackedKernel kernel) {
  const bool k_quant = type == GgmlType::kQ4_K || type == GgmlType::kQ6_K;
  const std::vector<int64_t> cols = k_quant ? std::vector<int64_t>{256, 2304} : std::vector<int64_t>{32, 288, 2304};
  constexpr int64_t kRows = 77, kMaxT = 40;
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, kRows}, {3, 45}, {16, 24}, {21, 22}, {60, kRows}};
  for (int64_t n : cols) {
    for (int kind = 0; kind < 2; ++kind) {
      const Matrix w = kind == 0 ? QuantizedMatrix(type, kRows, n, 31 + n) : RandomBytesMatrix(type, kRows, n, 32 + n);
      ASSERT_NE(w.view.packed, nullptr);
      const std::vector<float> x = RandomX(kMaxT * n, 33 + n);
      const std::vector<float> want = RefMatMul(w.view, x.data(), kMaxT);
      std::vector<int64_t> Ts;
      for (int64_t T = 1; T <= 17; ++T) Ts.push_back(T);
      Ts.push_back(33);
      Ts.push_back(kMaxT);
      for (int64_t T : Ts) {
        cpu::Int8Activations a;
        cpu::QuantizeActivationsInt8Portable(type, x.data(), T, n, a);
        for (const auto& [r0, r1] : ranges) {
          std::vector<float> y(T * kRows, -7.f);
          kernel(w.view, a, y.data(), r0, r1);
          for (int64_t t = 0; t < T; ++t) {
            for (int64_t r = 0; r < kRows; ++r) {
              const float got = y[t * kRows + r];
              const float expect = r >= r0 && r < r1 ? want[t * kRows + r] : -7.f;  // rows outside: untouched
              ASSERT_EQ(Bits(got), Bits(expect))
                  << GgmlTypeName(type) << " " << kRows << "x" << n << (kind == 0 ? " quantized" : " random bytes")
                  << ", pass of " << T << ", rows [" << r0 << ", " << r1 << "), token " << t << ", row " << r
                  << ": " << got << " vs " << expect;
            }
          }
        }
      }
    }
  }
}

// The AVX2 packed kernel (CPUs without VNNI), so that AVX-512 machines test
// it too.
TEST_P(MatMulInt8Test, PackedAvx2KernelEqualsTheScalarModelBitForBit) {
  if (!cpu::PackedAvx2Runs(GetParam())) GTEST_SKIP() << "no AVX2 packed kernel for this type (or no AVX2 here)";
  ExpectPackedKernelBits(GetParam(), cpu::MatMulPackedAvx2);
}

// The AMX kernel at every pass width, not only those MatMul gives it
// (AmxMinTokens(type) and up).
TEST_P(MatMulInt8Test, PackedAmxKernelEqualsTheScalarModelBitForBit) {
  if (!cpu::PackedAmxRuns(GetParam())) GTEST_SKIP() << "no AMX kernel for this type (or no AMX-INT8 here)";
  ExpectPackedKernelBits(GetParam(), cpu::MatMulPackedAmx);
}

INSTANTIATE_TEST_SUITE_P(Types, MatMulInt8Test,
                         ::testing::Values(GgmlType::kQ8_0, GgmlType::kQ5_0, GgmlType::kQ4_K, GgmlType::kQ6_K),
                         [](const auto& info) { return std::string(GgmlTypeName(info.param)); });

// Types without int8 kernels keep the fp32 path, bit for bit.
TEST(MatMulInt8Dispatch, OtherTypesKeepTheFp32Path) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
    constexpr int64_t kRows = 13, kCols = 96, kT = 3;
    std::vector<uint8_t> bytes(kRows * RowBytes(type, kCols));
    std::vector<float> vals = RandomX(kRows * kCols, 16);
    for (int64_t r = 0; r < kRows; ++r) {
      QuantizeRow(type, vals.data() + r * kCols, bytes.data() + r * RowBytes(type, kCols), kCols);
    }
    const MatrixView view{type, bytes.data(), kRows, kCols, RowBytes(type, kCols)};
    EXPECT_FALSE(cpu::Int8MatMulSupports(view));
    const std::vector<float> x = RandomX(kT * kCols, 17);
    std::vector<float> y8(kT * kRows), y32(kT * kRows);
    ThreadPool pool(1);
    MatMul(view, x.data(), kT, y8.data(), pool, MatMulActivations::kInt8);
    MatMul(view, x.data(), kT, y32.data(), pool, MatMulActivations::kFp32);
    ExpectSameBits(y8, y32, kRows, std::string(GgmlTypeName(type)));
  }
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ5_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    EXPECT_TRUE(cpu::Int8MatMulSupports(MatrixView{type, nullptr, 1, 256, RowBytes(type, 256)}));
  }
}

TEST(MatMulInt8Dispatch, VnniIsUsedWhereTheCpuHasIt) {
  __builtin_cpu_init();
  const bool vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                    __builtin_cpu_supports("avx512vnni");
  if (!vnni) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: the portable kernels run";
  const char* env = std::getenv("SPECSERVE_CPU_KERNELS");
  if (env != nullptr && std::string(env) == "avx2") GTEST_SKIP() << "SPECSERVE_CPU_KERNELS=avx2";
  EXPECT_TRUE(cpu::UseVnniInt8MatMul());
}

}  // namespace
}  // namespace specserve
