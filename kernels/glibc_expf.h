// expf bit-for-bit as glibc computes it on x86-64 with FMA (the __expf_fma
// variant its ifunc picks on every x86-64-v3 CPU), usable on the host and in
// CUDA device code.
//
// Why: spec/sampling.h fixes the arithmetic recipe of the target
// distribution (e_i = expf((logit_i - max) / temperature), double sums in
// token order), and the CPU reference calls the C library's expf. CUDA's expf
// differs from glibc's in the last ulp for some inputs, which would make the
// device verifier disagree with the CPU one whenever a uniform lands within
// that ulp of a CDF boundary. Evaluating glibc's own algorithm on the device
// (double arithmetic, every step IEEE with the same fused multiply-adds)
// gives the same bits. Source: glibc sysdeps/ieee754/flt-32/e_expf.c and
// e_exp2f_data.c (Szabolcs Nagy, ARM optimized-routines); the fused steps are
// those of libm.so's __expf_fma. tests/cuda_ops_test.cc compares GlibcExpf
// with the C library's expf on the test machine.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if !defined(SPECSERVE_HD)
#if defined(__CUDACC__)
#define SPECSERVE_HD __host__ __device__
#else
#define SPECSERVE_HD
#endif
#endif

namespace specserve {
namespace glibc_expf_internal {

// 2^(i/32) as double bits, minus i << 47 (exp2f_data.tab, EXP2F_TABLE_BITS 5).
#define SPECSERVE_EXP2F_TABLE                                                         \
  {0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, \
   0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, \
   0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d, \
   0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585, \
   0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13, \
   0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, \
   0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, \
   0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540}
static constexpr uint64_t kHostTable[32] = SPECSERVE_EXP2F_TABLE;
#if defined(__CUDACC__)
static __constant__ uint64_t kDeviceTable[32] = SPECSERVE_EXP2F_TABLE;
#endif
#undef SPECSERVE_EXP2F_TABLE

SPECSERVE_HD inline uint64_t Table(uint64_t i) {
#if defined(__CUDA_ARCH__)
  return kDeviceTable[i];
#else
  return kHostTable[i];
#endif
}

SPECSERVE_HD inline double AsDouble(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof(d));
  return d;
}
SPECSERVE_HD inline uint64_t AsBits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof(u));
  return u;
}

// Plain IEEE operations that a compiler must not fuse with anything.
#if defined(__CUDA_ARCH__)
SPECSERVE_HD inline double Mul(double a, double b) { return __dmul_rn(a, b); }
SPECSERVE_HD inline double Sub(double a, double b) { return __dsub_rn(a, b); }
#else
SPECSERVE_HD inline double Mul(double a, double b) { return a * b; }
SPECSERVE_HD inline double Sub(double a, double b) { return a - b; }
#endif

}  // namespace glibc_expf_internal

SPECSERVE_HD inline float GlibcExpf(float x) {
  using namespace glibc_expf_internal;
  uint32_t ux;
  memcpy(&ux, &x, sizeof(ux));
  const uint32_t abstop = (ux >> 20) & 0x7ff;
  if (abstop >= 0x42a) {                     // |x| >= 88 or x is NaN
    if (ux == 0xff800000u) return 0.0f;      // -inf
    if (abstop >= 0x7f8) return x + x;       // +inf or NaN
    if (x > 0x1.62e42ep6f) return INFINITY;  // overflow
    if (x < -0x1.9fe368p6f) return 0.0f;     // underflow
    if (x < -0x1.9d1d9ep6f) return 0x1.4p-75f * 0x1.4p-75f;  // __math_may_uflowf
  }
  const double xd = x;
  const double inv_ln2_n = AsDouble(0x40471547652b82feull);  // 32 / ln 2
  const double shift = AsDouble(0x4338000000000000ull);      // 0x1.8p52
  double kd = fma(inv_ln2_n, xd, shift);                     // round(x * 32 / ln2) + shift
  const uint64_t ki = AsBits(kd);
  kd = Sub(kd, shift);
  const double r = fma(inv_ln2_n, xd, -kd);                  // in [-1/2, 1/2]
  const double s = AsDouble(Table(ki & 31) + (ki << 47));   // 2^(k/32)
  const double z = fma(r, AsDouble(0x3ebc6af84b912394ull), AsDouble(0x3f2ebfce50fac4f3ull));
  const double r2 = Mul(r, r);
  const double y0 = fma(r, AsDouble(0x3f962e42ff0c52d6ull), 1.0);
  const double y = Mul(fma(z, r2, y0), s);
  return static_cast<float>(y);
}

}  // namespace specserve
