// The paged attention kernel, written once over a vector type V and compiled
// twice: for AVX2 (V8, 8 floats, kernels/cpu_attention.cc) and for AVX-512
// (V16, 16 floats, kernels/cpu_attention_avx512.cc). Each file includes every
// header this one needs, defines V, then includes this file inside an
// anonymous namespace of its own, so no function here is shared between the
// two instruction sets. Numerics: kernels/cpu_attention.h.
//
// V provides: R (the register type), kLanes, Zero(), Set1(f), Load(p),
// LoadN(p, n) / StoreN(p, r, n) (the first n lanes; n < kLanes), Store(p, r),
// Fma(a, b, c) = a * b + c, Add, Mul.
//
// Per (KV head, chunk of up to kAttentionTokenChunk tokens) the queries are
// j = 0 .. per_head - 1 (token j / group, query head j % group of the KV
// head's group).
//   Scores: per block, per run of V::kLanes keys, up to kScoreQueries queries
//     at a time; each dimension's keys are one vector load (the transposed
//     key block) that feeds every query's FMA.
//   Values: per block, up to kValueQueries queries at a time share each
//     value row's loads; the keys every one of them sees run together and a
//     query's further keys of the block run alone (the same order per
//     output element).

// Queries whose scores are computed together: 4 partial sums each.
template <class V>
constexpr int kScoreQueries = V::kLanes == 16 ? 6 : 3;

// n <= kLanes keys from key c0 of a transposed key block (kt: head_dim rows
// of bs floats) against NQ queries: s[q][c0 .. c0 + stores[q]).
template <class V, int NQ>
inline void ScoreKeys(const float* kt, int32_t bs, int32_t hd, int32_t c0, int32_t n, const float* const* q,
                      float scale, float* const* s, const int32_t* stores) {
  using R = typename V::R;
  R acc[NQ][4];
#pragma GCC unroll 8
  for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc[i][r] = V::Zero();
  const float* col = kt + c0;
  // A whole vector of keys, or the first n (masked; n < kLanes).
  auto load = [&](int32_t d) {
    const float* p = col + static_cast<int64_t>(d) * bs;
    return n == V::kLanes ? V::Load(p) : V::LoadN(p, n);
  };
  int32_t d = 0;
  for (; d + 4 <= hd; d += 4) {
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const R k = load(d + r);
#pragma GCC unroll 8
      for (int i = 0; i < NQ; ++i) acc[i][r] = V::Fma(V::Set1(q[i][d + r]), k, acc[i][r]);
    }
  }
  for (; d < hd; ++d) {
    const R k = load(d);
#pragma GCC unroll 8
    for (int i = 0; i < NQ; ++i) acc[i][d % 4] = V::Fma(V::Set1(q[i][d]), k, acc[i][d % 4]);
  }
  const R sv = V::Set1(scale);
#pragma GCC unroll 8
  for (int i = 0; i < NQ; ++i) {
    if (stores[i] <= 0) continue;
    const R sum = V::Mul(V::Add(V::Add(acc[i][0], acc[i][1]), V::Add(acc[i][2], acc[i][3])), sv);
    if (stores[i] >= V::kLanes) {
      V::Store(s[i] + c0, sum);
    } else {
      V::StoreN(s[i] + c0, sum, stores[i]);
    }
  }
}

template <class V>
using ScoreKeysFn = void (*)(const float*, int32_t, int32_t, int32_t, int32_t, const float* const*, float,
                             float* const*, const int32_t*);
template <class V, int... I>
constexpr std::array<ScoreKeysFn<V>, sizeof...(I)> ScoreKeysTable(std::integer_sequence<int, I...>) {
  return {ScoreKeys<V, I + 1>...};
}
// kScoreKeys[NQ - 1] for NQ <= kScoreQueries.
template <class V>
constexpr auto kScoreKeys = ScoreKeysTable<V>(std::make_integer_sequence<int, kScoreQueries<V>>());

// Values: out[q][d] += sum_i w[q][i] * rows[i * stride + d] over the NC
// vectors from d, all NQ * NC sums in registers; the rows are one KV head's,
// shared by the NQ queries.
template <class V>
constexpr int kValueQueries = V::kLanes == 16 ? 6 : 3;
template <class V>
constexpr int kValueRegisters = V::kLanes == 16 ? 24 : 12;
constexpr int kMaxChunks = 8;

template <class V, int NQ, int NC>
void WeightedRows(const float* const* w, const float* rows, int64_t stride, int32_t n, float* const* acc) {
  using R = typename V::R;
  R r[NQ][NC];
#pragma GCC unroll 8
  for (int q = 0; q < NQ; ++q)
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) r[q][c] = V::Load(acc[q] + V::kLanes * c);
  for (int32_t i = 0; i < n; ++i) {
    const float* row = rows + i * stride;
    R v[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) v[c] = V::Load(row + V::kLanes * c);
#pragma GCC unroll 8
    for (int q = 0; q < NQ; ++q) {
      const R wi = V::Set1(w[q][i]);
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) r[q][c] = V::Fma(wi, v[c], r[q][c]);
    }
  }
#pragma GCC unroll 8
  for (int q = 0; q < NQ; ++q)
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) V::Store(acc[q] + V::kLanes * c, r[q][c]);
}

// The last hd % kLanes elements (m of them), one query at a time.
template <class V>
void WeightedRowsTail(const float* w, const float* rows, int64_t stride, int32_t n, int32_t m, float* acc) {
  using R = typename V::R;
  R r = V::LoadN(acc, m);
  for (int32_t i = 0; i < n; ++i) r = V::Fma(V::Set1(w[i]), V::LoadN(rows + i * stride, m), r);
  V::StoreN(acc, r, m);
}

template <class V>
using WeightedRowsFn = void (*)(const float* const*, const float*, int64_t, int32_t, float* const*);

// kWeightedRows[NQ - 1][NC - 1] for NQ <= kValueQueries, NC <= kMaxChunks
// (nullptr where NQ * NC > kValueRegisters).
template <class V, int NQ, int NC>
constexpr WeightedRowsFn<V> WeightedRowsOrNull() {
  if constexpr (NQ * NC <= kValueRegisters<V>) {
    return WeightedRows<V, NQ, NC>;
  } else {
    return nullptr;
  }
}
template <class V, int NQ, int... C>
constexpr std::array<WeightedRowsFn<V>, sizeof...(C)> WeightedRowsRow(std::integer_sequence<int, C...>) {
  return {WeightedRowsOrNull<V, NQ, C + 1>()...};
}
template <class V, int... Q>
constexpr std::array<std::array<WeightedRowsFn<V>, kMaxChunks>, sizeof...(Q)> WeightedRowsTable(
    std::integer_sequence<int, Q...>) {
  return {WeightedRowsRow<V, Q + 1>(std::make_integer_sequence<int, kMaxChunks>())...};
}
template <class V>
constexpr auto kWeightedRows = WeightedRowsTable<V>(std::make_integer_sequence<int, kValueQueries<V>>());

// Chunks of at most kMaxChunks vectors (and NQ * NC <= kValueRegisters),
// then the tail: out[q][d] += sum over n keys for d < hd.
template <class V>
void AccumulateValues(int nq, const float* const* w, const float* rows, int64_t stride, int32_t n, int32_t hd,
                      float* const* out) {
  if (n <= 0) return;
  const int max_chunks = std::min(kMaxChunks, kValueRegisters<V> / nq);
  int32_t d = 0;
  for (; d + V::kLanes <= hd;) {
    const int nc = std::min(max_chunks, (hd - d) / V::kLanes);
    float* o[kValueQueries<V>];
    for (int q = 0; q < nq; ++q) o[q] = out[q] + d;
    kWeightedRows<V>[nq - 1][nc - 1](w, rows + d, stride, n, o);
    d += V::kLanes * nc;
  }
  if (d < hd) {
    for (int q = 0; q < nq; ++q) WeightedRowsTail<V>(w[q], rows + d, stride, n, hd - d, out[q] + d);
  }
}

template <class V>
void PagedAttentionT(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch) {
  const int64_t kv_dim = static_cast<int64_t>(a.n_head_kv) * a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  const int32_t bs = a.block_size;
  const int32_t hd = a.head_dim;
  thread_local std::vector<const float*> qs;
  thread_local std::vector<float*> outs;
  thread_local std::vector<int32_t> nkeys;
  for (int64_t h0 = begin; h0 < end; h0 += kHeadsPerChunk) {
    const int32_t nh = static_cast<int32_t>(std::min<int64_t>(kHeadsPerChunk, end - h0));
    for (int64_t t0 = 0; t0 < a.T; t0 += kAttentionTokenChunk) {
      const int32_t tc = static_cast<int32_t>(std::min<int64_t>(kAttentionTokenChunk, a.T - t0));
      // Query j: KV head h0 + j / per_head; within it, token t0 + (j % per_head) / group
      // and query head (h0 + j / per_head) * group + j % group.
      const int32_t per_head = tc * group;
      const int32_t nq = nh * per_head;
      const int32_t stride = a.positions[t0 + tc - 1] + 1;  // keys of the chunk's last token
      // Per query: its vector, its output, its keys, its scores (computed
      // once here: the index arithmetic divides).
      qs.resize(nq);
      outs.resize(nq);
      nkeys.resize(nq);
      for (int32_t j = 0; j < nq; ++j) {
        const int64_t tok = t0 + (j % per_head) / group;
        const int64_t offset = (tok * a.n_head + (h0 + j / per_head) * group + j % group) * hd;
        qs[j] = a.q + offset;
        outs[j] = a.out + offset;
        nkeys[j] = a.positions[tok] + 1;
      }
      auto row = [&](int32_t j) { return scratch + static_cast<int64_t>(j) * stride; };
      for (int32_t p0 = 0, b = 0; p0 < stride; p0 += bs, ++b) {
        const int32_t n = std::min(bs, stride - p0);
        const int64_t block = a.block_table[b];
        for (int32_t h = 0; h < nh; ++h) {
          const float* kt = a.k_cache + ((block * a.n_head_kv + h0 + h) * hd) * bs;
          for (int32_t j0 = h * per_head; j0 < (h + 1) * per_head; j0 += kScoreQueries<V>) {
            const int nqs = std::min<int32_t>(kScoreQueries<V>, (h + 1) * per_head - j0);
            const float* q[kScoreQueries<V>];
            float* s[kScoreQueries<V>];
            for (int i = 0; i < nqs; ++i) {
              q[i] = qs[j0 + i];
              s[i] = row(j0 + i) + p0;
            }
            for (int32_t c0 = 0; c0 < n; c0 += V::kLanes) {
              const int32_t lanes = std::min<int32_t>(V::kLanes, n - c0);
              int32_t stores[kScoreQueries<V>];
              bool any = false;
              for (int i = 0; i < nqs; ++i) {
                stores[i] = std::min(lanes, nkeys[j0 + i] - p0 - c0);
                any = any || stores[i] > 0;
              }
              if (any) kScoreKeys<V>[nqs - 1](kt, bs, hd, c0, lanes, q, a.scale, s, stores);
            }
          }
        }
      }
      for (int32_t j = 0; j < nq; ++j) {
        SoftmaxInPlace(row(j), nkeys[j]);
        std::fill(outs[j], outs[j] + hd, 0.f);
      }
      for (int32_t p0 = 0, b = 0; p0 < stride; p0 += bs, ++b) {
        const int32_t n = std::min(bs, stride - p0);
        const int64_t block = a.block_table[b];
        for (int32_t h = 0; h < nh; ++h) {
          const float* rows = a.v_cache + block * bs * kv_dim + (h0 + h) * hd;
          for (int32_t j0 = h * per_head; j0 < (h + 1) * per_head; j0 += kValueQueries<V>) {
            const int nqs = std::min<int32_t>(kValueQueries<V>, (h + 1) * per_head - j0);
            const float* w[kValueQueries<V>];
            float* o[kValueQueries<V>];
            int32_t nj[kValueQueries<V>];
            int32_t common = n;
            for (int i = 0; i < nqs; ++i) {
              w[i] = row(j0 + i) + p0;
              o[i] = outs[j0 + i];
              nj[i] = std::clamp(nkeys[j0 + i] - p0, 0, n);
              common = std::min(common, nj[i]);
            }
            AccumulateValues<V>(nqs, w, rows, kv_dim, common, hd, o);
            for (int i = 0; i < nqs; ++i) {
              if (nj[i] <= common) continue;
              const float* wi = w[i] + common;
              AccumulateValues<V>(1, &wi, rows + common * kv_dim, kv_dim, nj[i] - common, hd, &o[i]);
            }
          }
        }
      }
    }
  }
}
