// IEEE half (F16) and bfloat16 (BF16) <-> float conversions, bit-exact with
// ggml's: float -> half rounds to nearest even; float -> bf16 rounds to
// nearest even and keeps NaNs quiet (ggml_compute_fp32_to_bf16).
//
// With F16C (the project's x86-64-v3 floor) the half conversions use the
// hardware instructions; the portable versions in `fp16_internal` give the same
// bits everywhere else and are tested against the hardware ones.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace specserve {

namespace fp16_internal {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float F16ToF32Portable(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return BitsFloat(sign);  // +-0
  // Subnormal half: normalise (every half subnormal is a normal float).
  int e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return BitsFloat(sign | (static_cast<uint32_t>(e) << 23) | ((mant & 0x3ffu) << 13));
}

inline uint16_t F32ToF16Portable(float f) {
  const uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) {  // NaN: keep the top payload bits, force quiet
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (ax >= 0x38800000u) {                         // normal half range
    // Rebias the exponent (127 -> 15) and round the 13 dropped bits to even;
    // a carry out of the mantissa correctly bumps the exponent.
    const uint32_t r = ax - 0x38000000u;
    const uint32_t rounded = r + 0xfffu + ((r >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  if (ax < 0x33000000u) return sign;  // below half the smallest subnormal
  // Subnormal half: value = mant24 * 2^(e-150); target unit is 2^-24.
  const uint32_t e = ax >> 23;
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24 for e in 102..112
  const uint32_t half_ulp = 1u << (shift - 1);
  const uint32_t rem = mant & ((1u << shift) - 1);
  uint32_t q = mant >> shift;
  if (rem > half_ulp || (rem == half_ulp && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

}  // namespace fp16_internal

inline float F16ToF32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return fp16_internal::F16ToF32Portable(h);
#endif
}

inline uint16_t F32ToF16(float f) {
#if defined(__F16C__)
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
  return fp16_internal::F32ToF16Portable(f);
#endif
}

inline float Bf16ToF32(uint16_t h) {
  return fp16_internal::BitsFloat(static_cast<uint32_t>(h) << 16);
}

inline uint16_t F32ToBf16(float f) {
  const uint32_t x = fp16_internal::FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64u);
  return static_cast<uint16_t>((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

}  // namespace specserve
