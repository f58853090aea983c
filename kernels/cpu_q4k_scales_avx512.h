// A Q4_K super-block's 8 scales and 8 mins, decoded with AVX-512 and
// multiplied by d and dmin: the fp32 products ggml's dequantization computes
// (d1 = d * sc, m1 = dmin * m), for the fp32 kernel.
//
// Include this only inside an AVX-512 target region (after
// `#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,...")`, as
// kernels/cpu_matmul_avx512.cc does): its
// function is compiled with those instructions and has internal linkage, so
// no copy of it can reach a CPU without AVX-512.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace specserve::cpu {
namespace {

// b: block_q4_K { f16 d, dmin; u8 scales[12]; u8 qs[128] }.
// dm[0..8) = d * sc of sub-blocks 0..7, dm[8..16) = dmin * m.
// The 6-bit scales and mins are gathered as ggml's get_scale_min_k4 does:
// for j < 4, byte j (scale) or j + 4 (min) & 63; for j >= 4, the low
// (scale) or high (min) nibble of byte j + 4, with the top two bits of byte
// j - 4 (scale) or j (min) above it.
inline void DecodeQ4_KScales(const uint8_t* b, float* dm) {
  // The 12 scale bytes (and 4 bytes of qs, unused) as 16 ints.
  const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4)));
  const __m512i low_at = _mm512_set_epi32(11, 10, 9, 8, 7, 6, 5, 4, 11, 10, 9, 8, 3, 2, 1, 0);
  const __m512i high_at = _mm512_set_epi32(7, 6, 5, 4, 0, 0, 0, 0, 3, 2, 1, 0, 0, 0, 0, 0);
  const __m512i low_shift = _mm512_set_epi32(4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i low_mask = _mm512_set_epi32(15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63);
  const __m512i high_mask = _mm512_set_epi32(48, 48, 48, 48, 0, 0, 0, 0, 48, 48, 48, 48, 0, 0, 0, 0);
  const __m512i low =
      _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(low_at, bytes), low_shift), low_mask);
  const __m512i high = _mm512_and_si512(
      _mm512_slli_epi32(_mm512_srli_epi32(_mm512_permutexvar_epi32(high_at, bytes), 6), 4), high_mask);
  // d in lanes 0..7, dmin in 8..15.
  uint32_t halves;
  std::memcpy(&halves, b, sizeof(halves));
  const __m128 d_dmin = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(halves)));
  const __m512 dd = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                                          _mm512_castps128_ps512(d_dmin));
  _mm512_storeu_ps(dm, _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_or_si512(low, high))));
}

}  // namespace
}  // namespace specserve::cpu
