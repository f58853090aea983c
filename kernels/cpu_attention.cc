#include "kernels/cpu_attention.h"

#include <immintrin.h>

#include <cmath>

namespace specserve::cpu {
namespace {

inline float Dot(const float* a, const float* b, int32_t n) {
  __m256 acc = _mm256_setzero_ps();
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float r = _mm_cvtss_f32(s);
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch) {
  const int32_t kv_dim = a.n_head_kv * a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t t = item / a.n_head;
    const int32_t h = static_cast<int32_t>(item % a.n_head);
    const int32_t kvh = h / group;
    const float* q = a.q + (t * a.n_head + h) * a.head_dim;
    const int32_t n_keys = a.positions[t] + 1;
    float max_score = -INFINITY;
    for (int32_t p = 0; p < n_keys; ++p) {
      const int64_t slot = static_cast<int64_t>(a.block_table[p / a.block_size]) * a.block_size + p % a.block_size;
      const float s = Dot(q, a.k_cache + slot * kv_dim + kvh * a.head_dim, a.head_dim) * a.scale;
      scratch[p] = s;
      max_score = s > max_score ? s : max_score;
    }
    float* out = a.out + (t * a.n_head + h) * a.head_dim;
    for (int32_t d = 0; d < a.head_dim; ++d) out[d] = 0.f;
    float denom = 0.f;
    for (int32_t p = 0; p < n_keys; ++p) {
      const float w = std::exp(scratch[p] - max_score);
      denom += w;
      const int64_t slot = static_cast<int64_t>(a.block_table[p / a.block_size]) * a.block_size + p % a.block_size;
      const float* v = a.v_cache + slot * kv_dim + kvh * a.head_dim;
      for (int32_t d = 0; d < a.head_dim; ++d) out[d] += w * v[d];
    }
    const float inv = 1.f / denom;
    for (int32_t d = 0; d < a.head_dim; ++d) out[d] *= inv;
  }
}

}  // namespace specserve::cpu
