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

// Eight dot products of q with key rows k + i * stride (i < 8), hd a multiple
// of 8: eight independent FMA chains (no horizontal sum per key), then one
// transpose-and-add of the eight accumulators into a vector of eight scores.
inline __m256 Dot8Keys(const float* q, const float* k, int64_t stride, int32_t hd) {
  __m256 a[8];
  for (int r = 0; r < 8; ++r) a[r] = _mm256_setzero_ps();
  for (int32_t d = 0; d < hd; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int r = 0; r < 8; ++r) a[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + r * stride + d), a[r]);
  }
  // hadd pairs lanes within each 128-bit half: after two rounds u0 holds the
  // half-sums of rows 0-3 (low half of each row in lanes 0-3, high in 4-7).
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// s[i] = scale * q . k_i for the n key rows k + i * stride.
void Scores(const float* q, const float* k, int64_t stride, int32_t hd, int32_t n, float scale, float* s) {
  int32_t i = 0;
  if (hd % 8 == 0) {
    const __m256 sv = _mm256_set1_ps(scale);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(Dot8Keys(q, k + i * stride, stride, hd), sv));
  }
  for (; i < n; ++i) s[i] = Dot(q, k + i * stride, hd) * scale;
}

// For NQ queries q, each over its own n rows rows[q] + i * stride:
// acc[q][8c .. 8c+8) += sum_i w[q][i] * rows[q][i * stride + 8c .. 8c+8),
// c < NC, all NQ * NC accumulators in registers (<= 12 of the 16 ymm).
// NQ * NC independent FMA chains keep both FMA pipes busy where one query
// alone would wait on the FMA latency. Every query's sum runs over its rows
// in order whatever NQ is (same bits).
template <int NQ, int NC>
void WeightedRows(const float* const* w, const float* const* rows, int64_t stride, int32_t n, float* const* acc) {
  static_assert(NQ * NC <= 12);
  __m256 r[NQ][NC];
  for (int q = 0; q < NQ; ++q)
    for (int c = 0; c < NC; ++c) r[q][c] = _mm256_loadu_ps(acc[q] + 8 * c);
  for (int32_t i = 0; i < n; ++i) {
    for (int q = 0; q < NQ; ++q) {
      const __m256 wi = _mm256_set1_ps(w[q][i]);
      const float* row = rows[q] + i * stride;
      for (int c = 0; c < NC; ++c) r[q][c] = _mm256_fmadd_ps(wi, _mm256_loadu_ps(row + 8 * c), r[q][c]);
    }
  }
  for (int q = 0; q < NQ; ++q)
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(acc[q] + 8 * c, r[q][c]);
}

using WeightedRowsFn = void (*)(const float* const*, const float* const*, int64_t, int32_t, float* const*);
constexpr int kMaxQueries = 3;
// kWeightedRows[NQ - 1][NC - 1]; NC up to kMaxChunks[NQ - 1].
constexpr int kMaxChunks[kMaxQueries] = {8, 6, 4};
constexpr WeightedRowsFn kWeightedRows[kMaxQueries][8] = {
    {WeightedRows<1, 1>, WeightedRows<1, 2>, WeightedRows<1, 3>, WeightedRows<1, 4>, WeightedRows<1, 5>,
     WeightedRows<1, 6>, WeightedRows<1, 7>, WeightedRows<1, 8>},
    {WeightedRows<2, 1>, WeightedRows<2, 2>, WeightedRows<2, 3>, WeightedRows<2, 4>, WeightedRows<2, 5>,
     WeightedRows<2, 6>, nullptr, nullptr},
    {WeightedRows<3, 1>, WeightedRows<3, 2>, WeightedRows<3, 3>, WeightedRows<3, 4>, nullptr, nullptr, nullptr,
     nullptr}};

// out[q][d] += sum_i w[q][i] * rows[q][i * stride + d] for d < hd, nq <= 3 queries.
void AccumulateValues(int nq, const float* const* w, const float* const* rows, int64_t stride, int32_t n,
                      int32_t hd, float* const* out) {
  int32_t d = 0;
  for (; d + 8 <= hd;) {
    const int nc = std::min(kMaxChunks[nq - 1], (hd - d) / 8);
    float* o[kMaxQueries];
    const float* r[kMaxQueries];
    for (int q = 0; q < nq; ++q) {
      o[q] = out[q] + d;
      r[q] = rows[q] + d;
    }
    kWeightedRows[nq - 1][nc - 1](w, r, stride, n, o);
    d += 8 * nc;
  }
  for (; d < hd; ++d) {
    for (int q = 0; q < nq; ++q) {
      for (int32_t i = 0; i < n; ++i) out[q][d] += w[q][i] * rows[q][i * stride + d];
    }
  }
}

// In place: s[i] = exp(s[i] - max(s)) / sum; returns nothing, s has n entries.
void Softmax(float* s, int32_t n) {
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

}  // namespace

int64_t PagedAttentionScratch(const PagedAttentionArgs& a) {
  const int64_t group = a.n_head / a.n_head_kv;
  const int64_t heads = std::min<int64_t>(kHeadsPerChunk, a.n_head_kv);
  return kAttentionTokenChunk * group * heads * (static_cast<int64_t>(a.positions[a.T - 1]) + 1);
}

void PagedAttention(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch) {
  const int64_t kv_dim = static_cast<int64_t>(a.n_head_kv) * a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  const int32_t bs = a.block_size;
  const int32_t hd = a.head_dim;
  // KV heads are taken kHeadsPerChunk at a time, so that a decode step of a
  // model with one query per KV head still has several queries whose value
  // sums can run side by side.
  for (int64_t h0 = begin; h0 < end; h0 += kHeadsPerChunk) {
    const int32_t nh = static_cast<int32_t>(std::min<int64_t>(kHeadsPerChunk, end - h0));
    for (int64_t t0 = 0; t0 < a.T; t0 += kAttentionTokenChunk) {
      const int32_t tc = static_cast<int32_t>(std::min<int64_t>(kAttentionTokenChunk, a.T - t0));
      // Query j: KV head h0 + j / per_head; within it, token t0 + (j % per_head) / group
      // and query head (h0 + j / per_head) * group + j % group.
      const int32_t per_head = tc * group;
      const int32_t nq = nh * per_head;
      const int32_t stride = a.positions[t0 + tc - 1] + 1;  // keys of the chunk's last token
      auto kv_head = [&](int32_t j) { return h0 + j / per_head; };
      auto token = [&](int32_t j) { return t0 + (j % per_head) / group; };
      auto head_offset = [&](int32_t j) { return (token(j) * a.n_head + kv_head(j) * group + j % group) * hd; };
      auto keys = [&](int32_t j) { return a.positions[token(j)] + 1; };
      auto block_base = [&](const float* cache, int32_t b, int32_t j) {
        return cache + static_cast<int64_t>(a.block_table[b]) * bs * kv_dim + kv_head(j) * hd;
      };
      // Scores: a block's key rows stay in L1 while every query reads them.
      for (int32_t p0 = 0, b = 0; p0 < stride; p0 += bs, ++b) {
        const int32_t n = std::min(bs, stride - p0);
        for (int32_t j = 0; j < nq; ++j) {
          const int32_t nj = std::min(n, keys(j) - p0);
          float* sj = scratch + static_cast<int64_t>(j) * stride + p0;
          if (nj > 0) Scores(a.q + head_offset(j), block_base(a.k_cache, b, j), kv_dim, hd, nj, a.scale, sj);
        }
      }
      for (int32_t j = 0; j < nq; ++j) {
        Softmax(scratch + static_cast<int64_t>(j) * stride, keys(j));
        std::fill(a.out + head_offset(j), a.out + head_offset(j) + hd, 0.f);
      }
      // Values: up to three queries that see the same number of keys of the
      // block run together.
      for (int32_t p0 = 0, b = 0; p0 < stride; p0 += bs, ++b) {
        const int32_t n = std::min(bs, stride - p0);
        for (int32_t j = 0; j < nq;) {
          const int32_t nj = std::min(n, keys(j) - p0);
          int nqs = 1;
          while (nqs < kMaxQueries && j + nqs < nq && std::min(n, keys(j + nqs) - p0) == nj) ++nqs;
          if (nj > 0) {
            const float* w[kMaxQueries];
            const float* rows[kMaxQueries];
            float* o[kMaxQueries];
            for (int q = 0; q < nqs; ++q) {
              w[q] = scratch + static_cast<int64_t>(j + q) * stride + p0;
              rows[q] = block_base(a.v_cache, b, j + q);
              o[q] = a.out + head_offset(j + q);
            }
            AccumulateValues(nqs, w, rows, kv_dim, nj, hd, o);
          }
          j += nqs;
        }
      }
    }
  }
}

}  // namespace specserve::cpu
