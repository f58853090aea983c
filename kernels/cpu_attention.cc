#include "kernels/cpu_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu_exp.h"

namespace specserve::cpu {
namespace {

inline float Dot(const float* a, const float* b, int32_t n) {
  __m256 acc = _mm256_setzero_ps();
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float r = HorizontalSum8(acc);
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

// acc[c] += sum_i w[i] * rows[i * stride + 8c .. 8c+8) for NC chunks, the NC
// accumulators in registers (NC <= 8).
template <int NC>
void WeightedRows(const float* w, const float* rows, int64_t stride, int32_t n, float* acc) {
  __m256 r[NC];
  for (int c = 0; c < NC; ++c) r[c] = _mm256_loadu_ps(acc + 8 * c);
  for (int32_t i = 0; i < n; ++i) {
    const __m256 wi = _mm256_set1_ps(w[i]);
    const float* row = rows + i * stride;
    for (int c = 0; c < NC; ++c) r[c] = _mm256_fmadd_ps(wi, _mm256_loadu_ps(row + 8 * c), r[c]);
  }
  for (int c = 0; c < NC; ++c) _mm256_storeu_ps(acc + 8 * c, r[c]);
}

using WeightedRowsFn = void (*)(const float*, const float*, int64_t, int32_t, float*);
constexpr WeightedRowsFn kWeightedRows[9] = {nullptr,          WeightedRows<1>, WeightedRows<2>,
                                             WeightedRows<3>, WeightedRows<4>, WeightedRows<5>,
                                             WeightedRows<6>, WeightedRows<7>, WeightedRows<8>};

// In place: s[i] = exp(s[i] - max(s)) / sum; returns nothing, s has n entries.
void Softmax(float* s, int32_t n) {
  float m = -INFINITY;
  for (int32_t i = 0; i < n; ++i) m = std::max(m, s[i]);
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

}  // namespace

int64_t PagedAttentionScratch(const PagedAttentionArgs& a) {
  const int64_t group = a.n_head / a.n_head_kv;
  return kAttentionTokenChunk * group * (static_cast<int64_t>(a.positions[a.T - 1]) + 1);
}

void PagedAttention(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch) {
  const int64_t kv_dim = static_cast<int64_t>(a.n_head_kv) * a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  const int32_t bs = a.block_size;
  const int32_t hd = a.head_dim;
  for (int64_t kvh = begin; kvh < end; ++kvh) {
    auto block_base = [&](const float* cache, int32_t b) {
      return cache + static_cast<int64_t>(a.block_table[b]) * bs * kv_dim + kvh * hd;
    };
    for (int64_t t0 = 0; t0 < a.T; t0 += kAttentionTokenChunk) {
      const int32_t tc = static_cast<int32_t>(std::min<int64_t>(kAttentionTokenChunk, a.T - t0));
      const int32_t nq = tc * group;              // query j = (token t0 + j / group, head kvh * group + j % group)
      const int32_t stride = a.positions[t0 + tc - 1] + 1;  // keys of the chunk's last token
      auto query = [&](int32_t j) { return a.q + ((t0 + j / group) * a.n_head + kvh * group + j % group) * hd; };
      auto keys = [&](int32_t j) { return a.positions[t0 + j / group] + 1; };
      // Scores: each key row is loaded once for all nq queries that see it.
      for (int32_t p0 = 0, b = 0; p0 < stride; p0 += bs, ++b) {
        const float* kb = block_base(a.k_cache, b);
        const int32_t n = std::min(bs, stride - p0);
        for (int32_t j = 0; j < nq; ++j) {
          const int32_t nj = std::min(n, keys(j) - p0);
          const float* qj = query(j);
          float* sj = scratch + static_cast<int64_t>(j) * stride + p0;
          for (int32_t i = 0; i < nj; ++i) sj[i] = Dot(qj, kb + i * kv_dim, hd) * a.scale;
        }
      }
      for (int32_t j = 0; j < nq; ++j) {
        Softmax(scratch + static_cast<int64_t>(j) * stride, keys(j));
        float* o = a.out + ((t0 + j / group) * a.n_head + kvh * group + j % group) * hd;
        std::fill(o, o + hd, 0.f);
      }
      // Values: one block of rows (L1-resident) serves every query in turn.
      for (int32_t p0 = 0, b = 0; p0 < stride; p0 += bs, ++b) {
        const float* vb = block_base(a.v_cache, b);
        const int32_t n = std::min(bs, stride - p0);
        for (int32_t j = 0; j < nq; ++j) {
          const int32_t nj = std::min(n, keys(j) - p0);
          if (nj <= 0) continue;
          const float* w = scratch + static_cast<int64_t>(j) * stride + p0;
          float* o = a.out + ((t0 + j / group) * a.n_head + kvh * group + j % group) * hd;
          int32_t d = 0;
          for (; d + 8 <= hd; ) {
            const int nc = std::min(8, (hd - d) / 8);
            kWeightedRows[nc](w, vb + d, kv_dim, nj, o + d);
            d += 8 * nc;
          }
          for (; d < hd; ++d) {
            for (int32_t i = 0; i < nj; ++i) o[d] += w[i] * vb[i * kv_dim + d];
          }
        }
      }
    }
  }
}

}  // namespace specserve::cpu
