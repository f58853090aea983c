#include "common/cpu_quant_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/fp16.h"

namespace specserve {
namespace {

constexpr int64_t kBlock = 32;       // values per Q8_0 block
constexpr int64_t kBlockBytes = 34;  // block_q8_0: { f16 d; int8 qs[32]; }
constexpr int kRows = 4;             // weight rows per micro-kernel
constexpr int kTok = 3;              // tokens per micro-kernel: 12 accumulators

inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// 8 int8 weights at q, widened to fp32 and times the block scale d.
inline __m256 Dequant8(const uint8_t* q, __m256 d) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), d);
}

// `nrows` (<= kRows) rows times `ntok` (<= kTok) tokens over n values.
void MicroKernel(const uint8_t* const* rows, int nrows, const float* x, int64_t ldx, int ntok,
                 int64_t n, float* y, int64_t ldy) {
  __m256 acc[kTok][kRows];
  for (int t = 0; t < kTok; ++t)
    for (int j = 0; j < kRows; ++j) acc[t][j] = _mm256_setzero_ps();
  const int64_t nb = n / kBlock;
  for (int64_t b = 0; b < nb; ++b) {
    __m256 d[kRows];
    for (int j = 0; j < kRows; ++j) {
      uint16_t h = 0;
      if (j < nrows) std::memcpy(&h, rows[j] + b * kBlockBytes, sizeof(h));
      d[j] = _mm256_set1_ps(F16ToF32(h));
    }
    for (int c = 0; c < kBlock; c += 8) {
      __m256 wv[kRows];
      for (int j = 0; j < kRows; ++j) {
        wv[j] = j < nrows ? Dequant8(rows[j] + b * kBlockBytes + 2 + c, d[j]) : _mm256_setzero_ps();
      }
      const int64_t i = b * kBlock + c;
      for (int t = 0; t < ntok; ++t) {
        const __m256 xv = _mm256_loadu_ps(x + t * ldx + i);
        for (int j = 0; j < kRows; ++j) acc[t][j] = _mm256_fmadd_ps(wv[j], xv, acc[t][j]);
      }
    }
  }
  for (int t = 0; t < ntok; ++t) {
    for (int j = 0; j < nrows; ++j) y[t * ldy + j] = HorizontalSum(acc[t][j]);
  }
}

}  // namespace

void MatMulQ8_0Rows(const MatrixView& w, const float* x, int64_t T, float* y, int64_t r0,
                    int64_t r1) {
  SPECSERVE_CHECK(w.type == GgmlType::kQ8_0 && w.cols % kBlock == 0);
  const int64_t n = w.cols;
  for (int64_t r = r0; r < r1; r += kRows) {
    const int nrows = static_cast<int>(std::min<int64_t>(kRows, r1 - r));
    const uint8_t* rows[kRows];
    for (int j = 0; j < nrows; ++j) rows[j] = w.row(r + j);
    for (int64_t t = 0; t < T; t += kTok) {
      const int ntok = static_cast<int>(std::min<int64_t>(kTok, T - t));
      MicroKernel(rows, nrows, x + t * n, n, ntok, n, y + t * w.rows + r, w.rows);
    }
  }
}

}  // namespace specserve
