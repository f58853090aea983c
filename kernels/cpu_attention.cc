// The attention kernel (kernels/cpu_attention_body.h) with 8-float AVX2
// vectors, the AVX-512 build's dispatch, the softmax and the key layout.
#include "kernels/cpu_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu_attention_avx512.h"
#include "kernels/cpu_exp.h"
#include "kernels/cpu_matmul_avx512.h"

namespace specserve::cpu {
namespace {

struct V8 {
  using R = __m256;
  static constexpr int kLanes = 8;
  // Lanes < n set (n < 8).
  static __m256i Mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static R Zero() { return _mm256_setzero_ps(); }
  static R Set1(float f) { return _mm256_set1_ps(f); }
  static R Load(const float* p) { return _mm256_loadu_ps(p); }
  static R LoadN(const float* p, int n) { return _mm256_maskload_ps(p, Mask(n)); }
  static void Store(float* p, R r) { _mm256_storeu_ps(p, r); }
  static void StoreN(float* p, R r, int n) { _mm256_maskstore_ps(p, Mask(n), r); }
  static R Fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R Add(R a, R b) { return _mm256_add_ps(a, b); }
  static R Mul(R a, R b) { return _mm256_mul_ps(a, b); }
};

#include "kernels/cpu_attention_body.h"

}  // namespace

void SoftmaxInPlace(float* s, int32_t n) {
  // The max in eight lanes (a scalar max is one long dependency chain).
  __m256 m8 = _mm256_set1_ps(-INFINITY);
  int32_t k = 0;
  for (; k + 8 <= n; k += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(s + k));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  float m = _mm_cvtss_f32(m4);
  for (; k < n; ++k) m = std::max(m, s[k]);
  const __m256 mv = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), mv));
    _mm256_storeu_ps(s + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  float total = HorizontalSum8(sum);
  for (; i < n; ++i) {
    s[i] = std::exp(s[i] - m);
    total += s[i];
  }
  const float inv = 1.f / total;
  for (int32_t j = 0; j < n; ++j) s[j] *= inv;
}

void StoreKeys(const float* k, int32_t n_head_kv, int32_t head_dim, int32_t block_size, int64_t block,
               int32_t slot, float* k_cache) {
  float* base = k_cache + block * n_head_kv * head_dim * block_size + slot;
  for (int64_t i = 0; i < int64_t{n_head_kv} * head_dim; ++i) base[i * block_size] = k[i];
}

int64_t PagedAttentionScratch(const PagedAttentionArgs& a) {
  const int64_t group = a.n_head / a.n_head_kv;
  const int64_t heads = std::min<int64_t>(kHeadsPerChunk, a.n_head_kv);
  return kAttentionTokenChunk * group * heads * (static_cast<int64_t>(a.positions[a.T - 1]) + 1);
}

void PagedAttentionAvx2(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch) {
  PagedAttentionT<V8>(a, begin, end, scratch);
}

void PagedAttention(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch) {
  if (UseAvx512MatMul()) return PagedAttentionAvx512(a, begin, end, scratch);
  PagedAttentionAvx2(a, begin, end, scratch);
}

}  // namespace specserve::cpu
