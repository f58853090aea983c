#include "kernels/cpu_matmul.h"

#include <immintrin.h>

#include "kernels/cpu_exp.h"

#include <algorithm>
#include <vector>

#include "common/fp16.h"
#include "kernels/cpu_matmul_avx512.h"
#include "kernels/cpu_matmul_int8.h"
#include "kernels/cpu_matmul_packed.h"
#include "kernels/cpu_quant_dot.h"

namespace specserve {
namespace {

constexpr int kTile = 4;  // weight rows per inner step: x is loaded once per 4 rows

using cpu::HorizontalSum8;

// Loads 8 weights as fp32 from an fp32 or f16 row.
inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float Widen(float v) { return v; }
inline float Widen(uint16_t v) { return F16ToF32(v); }

// Register-blocked micro-kernel: kTile weight rows times NTOK (<= 3) tokens.
// Per 8-wide chunk: NTOK x loads, kTile widened weight loads, kTile * NTOK
// FMAs, all 12 accumulators in registers (12 + 3 + 1 of the 16 ymm). NTOK is
// a template parameter so the accumulators never spill to the stack.
constexpr int kTok = 3;

// `ahead`, when set, is the next tile's memory (the kTile rows after these,
// contiguous): one cache line of it is prefetched per 8-wide step, so the
// next tile arrives while this one computes. Rows of a few hundred elements
// are too short for the hardware prefetcher to pick up four parallel streams.
template <int NTOK, typename W>
void MicroKernel(const W* const* w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int nrows,
                 const W* ahead) {
  __m256 acc[NTOK][kTile];
  for (int t = 0; t < NTOK; ++t)
    for (int j = 0; j < kTile; ++j) acc[t][j] = _mm256_setzero_ps();
  const W* w0 = w[0];
  const W* w1 = w[1];
  const W* w2 = w[2];
  const W* w3 = w[3];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (ahead != nullptr) {
      const char* next = reinterpret_cast<const char*>(ahead + kTile * i);
      for (size_t b = 0; b < kTile * 8 * sizeof(W); b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
    }
    __m256 xv[NTOK];
    for (int t = 0; t < NTOK; ++t) xv[t] = _mm256_loadu_ps(x + t * ldx + i);
    __m256 wv = Load8(w0 + i);
    for (int t = 0; t < NTOK; ++t) acc[t][0] = _mm256_fmadd_ps(wv, xv[t], acc[t][0]);
    wv = Load8(w1 + i);
    for (int t = 0; t < NTOK; ++t) acc[t][1] = _mm256_fmadd_ps(wv, xv[t], acc[t][1]);
    wv = Load8(w2 + i);
    for (int t = 0; t < NTOK; ++t) acc[t][2] = _mm256_fmadd_ps(wv, xv[t], acc[t][2]);
    wv = Load8(w3 + i);
    for (int t = 0; t < NTOK; ++t) acc[t][3] = _mm256_fmadd_ps(wv, xv[t], acc[t][3]);
  }
  for (int t = 0; t < NTOK; ++t) {
    for (int j = 0; j < nrows; ++j) {
      float s = HorizontalSum8(acc[t][j]);
      for (int64_t k = i; k < n; ++k) s += Widen(w[j][k]) * x[t * ldx + k];
      y[t * ldy + j] = s;
    }
  }
}

// One token (decode): 4 rows give only 4 dependent FMA chains, half what two
// FMA pipes with a 4-cycle latency need, so one token takes 8 rows at a time.
// Each row's sum runs in the same order as in MicroKernel (8-wide chunks in
// sequence, then the scalar tail), so a token's logits have the same bits
// whatever the batch it is in.
constexpr int kTile1 = 8;
constexpr int64_t kMatVecCacheBytes = 512 << 10;

template <typename W>
void MicroKernel1(const W* const* w, const float* x, int64_t n, float* y, int nrows, const W* ahead) {
  __m256 acc[kTile1];
  for (int j = 0; j < kTile1; ++j) acc[j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (ahead != nullptr) {
      const char* next = reinterpret_cast<const char*>(ahead + kTile1 * i);
      for (size_t b = 0; b < kTile1 * 8 * sizeof(W); b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
    }
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int j = 0; j < kTile1; ++j) acc[j] = _mm256_fmadd_ps(Load8(w[j] + i), xv, acc[j]);
  }
  for (int j = 0; j < nrows; ++j) {
    float s = HorizontalSum8(acc[j]);
    for (int64_t k = i; k < n; ++k) s += Widen(w[j][k]) * x[k];
    y[j] = s;
  }
}

// One token against rows [r0, r1) of fp32 or f16 weights read in place.
template <typename W>
void MatVecRows(const MatrixView& w, const float* x, float* y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; r += kTile1) {
    const int nrows = static_cast<int>(std::min<int64_t>(kTile1, r1 - r));
    const W* rows[kTile1];
    for (int j = 0; j < kTile1; ++j) rows[j] = reinterpret_cast<const W*>(w.row(r + (j < nrows ? j : 0)));
    const W* ahead = r + 3 * kTile1 <= r1 ? reinterpret_cast<const W*>(w.row(r + 2 * kTile1)) : nullptr;
    MicroKernel1(rows, x, w.cols, y + r, nrows, ahead);
  }
}

// rows[0..nrows) are real; missing rows of a short last tile repeat row 0
// (computed, never stored) so the kernel has no per-row branches.
template <typename W>
void TileAllTokens(const W* const* rows_in, int nrows, const float* x, int64_t T, int64_t n, float* y,
                   int64_t ldy, const W* ahead) {
  const W* rows[kTile];
  for (int j = 0; j < kTile; ++j) rows[j] = rows_in[j < nrows ? j : 0];
  int64_t t = 0;
  for (; t + 3 <= T; t += 3) MicroKernel<3>(rows, x + t * n, n, n, y + t * ldy, ldy, nrows, t == 0 ? ahead : nullptr);
  if (T - t == 2) MicroKernel<2>(rows, x + t * n, n, n, y + t * ldy, ldy, nrows, t == 0 ? ahead : nullptr);
  if (T - t == 1) MicroKernel<1>(rows, x + t * n, n, n, y + t * ldy, ldy, nrows, t == 0 ? ahead : nullptr);
}

void WidenF16Row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, Load8(src + i));
  for (; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

void MatMulRows(const MatrixView& w, const float* x, int64_t T, float* y, int64_t r0, int64_t r1) {
  // AVX-512 CPUs: one kernel for every pass width (kernels/cpu_matmul_avx512.h).
  if (cpu::UseAvx512MatMul() && cpu::Avx512MatMulSupports(w)) return cpu::MatMulRowsAvx512(w, x, T, y, r0, r1);
  // Q8_0 blocks are widened in registers for up to 3 tokens (one pass over
  // the weights, kernels/cpu_quant_dot.h); more tokens amortise a widened tile.
  if (w.type == GgmlType::kQ8_0 && T <= 3) return MatMulQ8_0Rows(w, x, T, y, r0, r1);
  // One token: 8 rows at a time while the matrix sits in L2 (the FMA chains
  // are the limit); a matrix streamed from L3 or DRAM is limited by memory,
  // where 4-row tiles measured faster (code-target-14m decode).
  if (T == 1 && w.rows * static_cast<int64_t>(w.row_bytes) <= kMatVecCacheBytes) {
    if (w.type == GgmlType::kF16) return MatVecRows<uint16_t>(w, x, y, r0, r1);
    if (w.type == GgmlType::kF32) return MatVecRows<float>(w, x, y, r0, r1);
  }
  const int64_t n = w.cols;
  // f16 rows are widened on the fly while T is small (decode, verify: the
  // weights dominate); for long prefills and quantized blocks a tile of rows
  // is widened once into a buffer and reused for every token (no full copy).
  const bool direct_f16 = w.type == GgmlType::kF16 && T <= 12;
  const bool direct_f32 = w.type == GgmlType::kF32;
  thread_local std::vector<float> buf;
  if (!direct_f16 && !direct_f32) buf.resize(kTile * n);
  for (int64_t r = r0; r < r1; r += kTile) {
    const int nrows = static_cast<int>(std::min<int64_t>(kTile, r1 - r));
    if (direct_f16) {
      const uint16_t* rows[kTile];
      for (int j = 0; j < nrows; ++j) rows[j] = reinterpret_cast<const uint16_t*>(w.row(r + j));
      const uint16_t* ahead = r + 3 * kTile <= r1 ? reinterpret_cast<const uint16_t*>(w.row(r + 2 * kTile)) : nullptr;
      TileAllTokens(rows, nrows, x, T, n, y + r, w.rows, ahead);
      continue;
    }
    const float* rows[kTile];
    for (int j = 0; j < nrows; ++j) {
      if (direct_f32) {
        rows[j] = reinterpret_cast<const float*>(w.row(r + j));
      } else if (w.type == GgmlType::kF16) {
        WidenF16Row(reinterpret_cast<const uint16_t*>(w.row(r + j)), buf.data() + j * n, n);
        rows[j] = buf.data() + j * n;
      } else {
        DequantizeRowFast(w.type, w.row(r + j), buf.data() + j * n, n);
        rows[j] = buf.data() + j * n;
      }
    }
    const float* ahead = direct_f32 && r + 2 * kTile <= r1 ? reinterpret_cast<const float*>(w.row(r + kTile)) : nullptr;
    TileAllTokens(rows, nrows, x, T, n, y + r, w.rows, ahead);
  }
}

// Q6_K where the CPU runs packed int8 kernels for other types but not for
// Q6_K (VNNI without VBMI, as on Cascade Lake; AVX2 without VNNI): the int8
// path would be the portable scalar kernel, so the fp32 kernel (AVX-512 or
// AVX2) takes it, in its own batch-invariant order.
bool Q6_KWithoutPackedKernel(const MatrixView& w) {
  return w.type == GgmlType::kQ6_K && cpu::PackedKernelRuns(GgmlType::kQ8_0) && !cpu::PackedKernelRuns(w.type);
}

}  // namespace

void MatMul(const MatrixView& w, const float* x, int64_t T, float* y, ThreadPool& pool,
            MatMulActivations activations) {
  const int64_t tiles = (w.rows + kTile - 1) / kTile;
  if (activations == MatMulActivations::kInt8 && cpu::Int8MatMulSupports(w) && !Q6_KWithoutPackedKernel(w)) {
    // x is quantized once, here, and read by every thread (kernels/cpu_matmul_int8.h).
    // (The lambda takes a reference: naming the thread_local in it would
    // name each worker's own, empty one.)
    thread_local cpu::Int8Activations storage;
    const cpu::Int8Activations& qx = storage;
    cpu::QuantizeActivationsInt8(w.type, x, T, w.cols, storage);
    pool.ParallelFor(tiles, 8, [&qx, &w, y](int64_t b, int64_t e) {
      cpu::MatMulInt8Rows(w, qx, y, b * kTile, std::min(w.rows, e * kTile));
    });
    return;
  }
  pool.ParallelFor(tiles, 8, [&](int64_t b, int64_t e) {
    MatMulRows(w, x, T, y, b * kTile, std::min(w.rows, e * kTile));
  });
}

void DequantizeMatrixRow(const MatrixView& w, int64_t r, float* out) {
  DequantizeRow(w.type, w.row(r), out, w.cols);
}

}  // namespace specserve
