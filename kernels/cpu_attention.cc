#include "kernels/cpu_attention.h"

#include <immintrin.h>

#include <algorithm>
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

// acc[c] += sum_i w[i] * rows[i * stride + 8c .. 8c+8) for NC chunks: one
// pass over the rows with the NC accumulators in registers (NC <= 8).
template <int NC>
void WeightedRows(const float* w, const float* rows, int64_t stride, int32_t n, __m256* acc) {
  __m256 r[NC];
  for (int c = 0; c < NC; ++c) r[c] = acc[c];
  for (int32_t i = 0; i < n; ++i) {
    const __m256 wi = _mm256_set1_ps(w[i]);
    const float* row = rows + i * stride;
    for (int c = 0; c < NC; ++c) r[c] = _mm256_fmadd_ps(wi, _mm256_loadu_ps(row + 8 * c), r[c]);
  }
  for (int c = 0; c < NC; ++c) acc[c] = r[c];
}

using WeightedRowsFn = void (*)(const float*, const float*, int64_t, int32_t, __m256*);
constexpr WeightedRowsFn kWeightedRows[9] = {nullptr,          WeightedRows<1>, WeightedRows<2>,
                                             WeightedRows<3>, WeightedRows<4>, WeightedRows<5>,
                                             WeightedRows<6>, WeightedRows<7>, WeightedRows<8>};

}  // namespace

void PagedAttention(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch) {
  const int64_t kv_dim = static_cast<int64_t>(a.n_head_kv) * a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  const int32_t bs = a.block_size;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t t = item / a.n_head;
    const int32_t h = static_cast<int32_t>(item % a.n_head);
    const int32_t kvh = h / group;
    const float* q = a.q + (t * a.n_head + h) * a.head_dim;
    const int32_t n_keys = a.positions[t] + 1;
    // Walk the cache block by block: slots inside a block are contiguous, so
    // there is one block-table lookup per block, not a division per position.
    auto block_base = [&](const float* cache, int32_t b) {
      return cache + static_cast<int64_t>(a.block_table[b]) * bs * kv_dim + kvh * a.head_dim;
    };
    float max_score = -INFINITY;
    for (int32_t p0 = 0, b = 0; p0 < n_keys; p0 += bs, ++b) {
      const int32_t n = std::min(bs, n_keys - p0);
      const float* k = block_base(a.k_cache, b);
      for (int32_t i = 0; i < n; ++i) {
        const float s = Dot(q, k + i * kv_dim, a.head_dim) * a.scale;
        scratch[p0 + i] = s;
        max_score = std::max(max_score, s);
      }
    }
    float denom = 0.f;
    for (int32_t p = 0; p < n_keys; ++p) {
      scratch[p] = std::exp(scratch[p] - max_score);
      denom += scratch[p];
    }
    const float inv = 1.f / denom;
    float* out = a.out + (t * a.n_head + h) * a.head_dim;
    // Up to 64 dims of the head per pass over the positions.
    int32_t d = 0;
    while (d + 8 <= a.head_dim) {
      const int nc = std::min(8, (a.head_dim - d) / 8);
      __m256 acc[8];
      for (int c = 0; c < nc; ++c) acc[c] = _mm256_setzero_ps();
      for (int32_t p0 = 0, b = 0; p0 < n_keys; p0 += bs, ++b) {
        kWeightedRows[nc](scratch + p0, block_base(a.v_cache, b) + d, kv_dim, std::min(bs, n_keys - p0), acc);
      }
      for (int c = 0; c < nc; ++c) _mm256_storeu_ps(out + d + 8 * c, _mm256_mul_ps(acc[c], _mm256_set1_ps(inv)));
      d += 8 * nc;
    }
    for (; d < a.head_dim; ++d) {
      float acc = 0.f;
      for (int32_t p0 = 0, b = 0; p0 < n_keys; p0 += bs, ++b) {
        const float* v = block_base(a.v_cache, b) + d;
        for (int32_t i = 0; i < std::min(bs, n_keys - p0); ++i) acc += scratch[p0 + i] * v[i * kv_dim];
      }
      out[d] = acc * inv;
    }
  }
}

}  // namespace specserve::cpu
