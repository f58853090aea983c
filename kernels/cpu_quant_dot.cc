#include "kernels/cpu_quant_dot.h"

#include <immintrin.h>

#include "kernels/cpu_exp.h"

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

using cpu::HorizontalSum8;

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
    for (int j = 0; j < nrows; ++j) y[t * ldy + j] = HorizontalSum8(acc[t][j]);
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

namespace specserve {
namespace {

inline float LoadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return F16ToF32(h);
}

// Stores 32 int8 lanes as fp32 times `scale` (dst[0..32)).
inline void Store32(__m256i q, __m256 scale, float* dst) {
  const __m128i lo = _mm256_castsi256_si128(q);
  const __m128i hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int k = 0; k < 4; ++k) {
    const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k]));
    _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(f, scale));
  }
}

// 0xFF in byte k where bit k of the 32-bit value is set (llama.cpp's
// bytes_from_bits_32).
inline __m256i BytesFromBits(uint32_t bits) {
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                         0x0101010101010101, 0x0000000000000000);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(bits)), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

// block_q8_0 { f16 d; i8 qs[32] }: y = q * d.
void DequantQ8_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kBlockBytes, y += kBlock) {
    const __m256 d = _mm256_set1_ps(LoadHalf(x));
    Store32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 2)), d, y);
  }
}

// block_q5_0 { f16 d; u32 qh; u8 qs[16] }: element e is
// (nibble e of qs: low nibbles first) | (bit e of qh) << 4, minus 16, times d.
void DequantQ5_0(const uint8_t* x, float* y, int64_t nb) {
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (int64_t i = 0; i < nb; ++i, x += 22, y += 32) {
    const __m256 d = _mm256_set1_ps(LoadHalf(x));
    uint32_t qh;
    std::memcpy(&qh, x + 2, sizeof(qh));
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 6));
    const __m128i lo = _mm_and_si128(qs, low4);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(qs, 4), low4);
    __m256i q = _mm256_set_m128i(hi, lo);
    q = _mm256_or_si256(q, _mm256_and_si256(BytesFromBits(qh), _mm256_set1_epi8(0x10)));
    q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
    Store32(q, d, y);
  }
}

// block_q4_K { f16 d, dmin; u8 scales[12]; u8 qs[128] }: eight sub-blocks of
// 32, y = (d * sc) * q - dmin * m, two sub-blocks per 32 bytes of qs (low
// nibbles first). Multiply then subtract, as the scalar code does (no fma).
void DequantQ4_K(const uint8_t* x, float* y, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < nb; ++i, x += 144) {
    const float d = LoadHalf(x);
    const float dmin = LoadHalf(x + 2);
    const uint8_t* scales = x + 4;
    const uint8_t* q = x + 16;
    for (int j = 0; j < 4; ++j, q += 32) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
      const __m256i nib[2] = {_mm256_and_si256(bytes, low4),
                              _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4)};
      for (int h = 0; h < 2; ++h, y += 32) {
        int sc, m;
        Q4_KScaleMin(2 * j + h, scales, &sc, &m);
        const __m256 d1 = _mm256_set1_ps(d * sc);
        const __m256 m1 = _mm256_set1_ps(dmin * m);
        const __m128i lo = _mm256_castsi256_si128(nib[h]);
        const __m128i hi = _mm256_extracti128_si256(nib[h], 1);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int k = 0; k < 4; ++k) {
          const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[k]));
          _mm256_storeu_ps(y + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d1, f), m1));
        }
      }
    }
  }
}

// block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }: 6-bit values
// minus 32 in sixteen sub-blocks of 16, y = (d * scale) * q. Each half of 128
// takes 64 bytes of ql and 32 of qh and interleaves four rows of 32.
void DequantQ6_K(const uint8_t* x, float* y, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < nb; ++i, x += 210) {
    const uint8_t* ql = x;
    const uint8_t* qh = x + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(x + 192);
    const float d = LoadHalf(x + 208);
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
      // The masks keep every shifted bit inside its own byte.
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(a, low4),
                          _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(0x03)), 4)),
          _mm256_or_si256(_mm256_and_si256(b, low4),
                          _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(0x0C)), 2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4),
                          _mm256_and_si256(h, _mm256_set1_epi8(0x30))),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low4),
                          _mm256_srli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(static_cast<char>(0xC0))), 2)),
      };
      for (int r = 0; r < 4; ++r) {
        const __m256i v = _mm256_sub_epi8(q[r], _mm256_set1_epi8(32));
        const __m128i lo = _mm256_castsi256_si128(v);
        const __m128i hi = _mm256_extracti128_si256(v, 1);
        // Row r holds sub-blocks 2r (values 0..15) and 2r+1 (16..31).
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int k = 0; k < 4; ++k) {
          const __m256 s = _mm256_set1_ps(d * sc[2 * r + k / 2]);
          const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k]));
          _mm256_storeu_ps(y + 32 * r + 8 * k, _mm256_mul_ps(s, f));
        }
      }
    }
  }
}

}  // namespace

void DequantizeRowFast(GgmlType t, const uint8_t* src, float* dst, int64_t n) {
  switch (t) {
    case GgmlType::kQ8_0:
      SPECSERVE_CHECK(n % 32 == 0);
      return DequantQ8_0(src, dst, n / 32);
    case GgmlType::kQ5_0:
      SPECSERVE_CHECK(n % 32 == 0);
      return DequantQ5_0(src, dst, n / 32);
    case GgmlType::kQ4_K:
      SPECSERVE_CHECK(n % 256 == 0);
      return DequantQ4_K(src, dst, n / 256);
    case GgmlType::kQ6_K:
      SPECSERVE_CHECK(n % 256 == 0);
      return DequantQ6_K(src, dst, n / 256);
    default:
      return DequantizeRow(t, src, dst, n);
  }
}

}  // namespace specserve
