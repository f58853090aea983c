// The attention kernel (kernels/cpu_attention_body.h) with 16-float AVX-512
// vectors. Only called after UseAvx512MatMul() said the CPU has AVX-512 (and
// SPECSERVE_CPU_KERNELS does not turn it off). Every header is included
// before the target pragma, so no inline function of theirs is emitted with
// these instructions.
#include "kernels/cpu_attention_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu_attention.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx2,fma")

namespace specserve::cpu {
namespace {

struct V16 {
  using R = __m512;
  static constexpr int kLanes = 16;
  static __mmask16 Mask(int n) { return static_cast<__mmask16>((1u << n) - 1); }
  static R Zero() { return _mm512_setzero_ps(); }
  static R Set1(float f) { return _mm512_set1_ps(f); }
  static R Load(const float* p) { return _mm512_loadu_ps(p); }
  static R LoadN(const float* p, int n) { return _mm512_maskz_loadu_ps(Mask(n), p); }
  static void Store(float* p, R r) { _mm512_storeu_ps(p, r); }
  static void StoreN(float* p, R r, int n) { _mm512_mask_storeu_ps(p, Mask(n), r); }
  static R Fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R Add(R a, R b) { return _mm512_add_ps(a, b); }
  static R Mul(R a, R b) { return _mm512_mul_ps(a, b); }
};

#include "kernels/cpu_attention_body.h"

}  // namespace

void PagedAttentionAvx512(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch) {
  PagedAttentionT<V16>(a, begin, end, scratch);
}

}  // namespace specserve::cpu

#pragma GCC pop_options
