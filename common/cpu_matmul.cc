#include "common/cpu_matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "common/fp16.h"

namespace specserve {
namespace {

constexpr int kTile = 4;  // weight rows per inner step: x is loaded once per 4 rows

inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Loads 8 weights as fp32 from an fp32 or f16 row.
inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float Widen(float v) { return v; }
inline float Widen(uint16_t v) { return F16ToF32(v); }

// Register-blocked micro-kernel: up to kTile weight rows times up to kTok
// tokens. Each 8-wide chunk of a weight row is loaded (and widened) once per
// kTok tokens, and each chunk of x once per kTile rows: 12 accumulators,
// 4 + 3 loads per 12 FMAs.
constexpr int kTok = 3;

template <typename W>
void MicroKernel(const W* const* w, int nrows, const float* x, int64_t ldx, int ntok, int64_t n,
                 float* y, int64_t ldy) {
  __m256 acc[kTok][kTile];
  for (int t = 0; t < kTok; ++t)
    for (int j = 0; j < kTile; ++j) acc[t][j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 wv[kTile];
    for (int j = 0; j < kTile; ++j) wv[j] = j < nrows ? Load8(w[j] + i) : _mm256_setzero_ps();
    for (int t = 0; t < ntok; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * ldx + i);
      for (int j = 0; j < kTile; ++j) acc[t][j] = _mm256_fmadd_ps(wv[j], xv, acc[t][j]);
    }
  }
  for (int t = 0; t < ntok; ++t) {
    for (int j = 0; j < nrows; ++j) {
      float s = HorizontalSum(acc[t][j]);
      for (int64_t k = i; k < n; ++k) s += Widen(w[j][k]) * x[t * ldx + k];
      y[t * ldy + j] = s;
    }
  }
}

template <typename W>
void TileAllTokens(const W* const* rows, int nrows, const float* x, int64_t T, int64_t n, float* y,
                   int64_t ldy) {
  for (int64_t t = 0; t < T; t += kTok) {
    const int ntok = static_cast<int>(std::min<int64_t>(kTok, T - t));
    MicroKernel(rows, nrows, x + t * n, n, ntok, n, y + t * ldy, ldy);
  }
}

void WidenF16Row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, Load8(src + i));
  for (; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

void MatMulRows(const MatrixView& w, const float* x, int64_t T, float* y, int64_t r0, int64_t r1) {
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
      TileAllTokens(rows, nrows, x, T, n, y + r, w.rows);
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
        DequantizeRow(w.type, w.row(r + j), buf.data() + j * n, n);
        rows[j] = buf.data() + j * n;
      }
    }
    TileAllTokens(rows, nrows, x, T, n, y + r, w.rows);
  }
}

}  // namespace

void MatMul(const MatrixView& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  const int64_t tiles = (w.rows + kTile - 1) / kTile;
  pool.ParallelFor(tiles, 8, [&](int64_t b, int64_t e) {
    MatMulRows(w, x, T, y, b * kTile, std::min(w.rows, e * kTile));
  });
}

void DequantizeMatrixRow(const MatrixView& w, int64_t r, float* out) {
  DequantizeRow(w.type, w.row(r), out, w.cols);
}

}  // namespace specserve
