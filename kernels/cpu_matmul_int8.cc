#include "kernels/cpu_matmul_int8.h"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/check.h"
#include "common/fp16.h"
#include "kernels/cpu_matmul_avx512.h"
#include "kernels/cpu_matmul_int8_record.h"
#include "kernels/cpu_matmul_packed.h"


// ---------------------------------------------------------------------------
// AVX-512 VNNI kernels. Everything below is compiled for AVX-512 + VNNI and
// only called after UseVnniInt8MatMul() said the CPU has them. All headers
// are included above, so no inline function of theirs is emitted with these
// instructions.
#pragma GCC push_options
// GCC 12 reports its own _mm512_undefined_* placeholders as uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")


namespace specserve::cpu {
namespace {

using namespace int8_record;  // NOLINT: the record helpers shared with the portable kernel

inline __m128i Load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// 16 lanes: the f16 h0 in lanes 0..7, h1 in lanes 8..15, as fp32.
inline __m512 PairScale(uint16_t h0, uint16_t h1) {
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h0 | (static_cast<uint32_t>(h1) << 16))));
  return _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                               _mm512_castps128_ps512(f));
}

// A decoder hands out a row a pair (64 values) at a time: w, the 64 codes u
// as unsigned bytes in value order, and sw, the 16 lanes' ws. Half() decodes
// a lone last block (rows of 32 * odd values) with the second block's codes
// and scales zero. (Q5_0 is the one type left on this kernel: Q8_0, Q4_K and
// Q6_K run the packed one, kernels/cpu_matmul_packed.h.)
//
// block_q5_0 { f16 d; u32 qh; u8 qs[16] }: element e < 16 is the low nibble
// of qs[e], element 16 + e the high nibble of qs[e], bit e of qh the fifth bit.
struct VQ5_0 {
  static constexpr int kPairBytes = 44;
  static __m512i Codes(__m128i s0, __m128i s1, uint64_t qh) {
    const __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(s0), s1, 1);
    // 128-bit lanes qs0, qs0, qs1, qs1; the second of each pair shifted by 4.
    const __m512i v = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0), _mm512_castsi256_si512(t));
    const int64_t four = 4 * 0x0001000100010001LL;
    const __m512i sh = _mm512_set_epi64(four, four, 0, 0, four, four, 0, 0);
    const __m512i lo = _mm512_and_si512(_mm512_srlv_epi16(v, sh), _mm512_set1_epi8(0x0F));
    return _mm512_mask_add_epi8(lo, _cvtu64_mask64(qh), lo, _mm512_set1_epi8(0x10));
  }
  static void Pair(const uint8_t* row, int64_t p, __m512i& w, __m512& sw) {
    const uint8_t* b = row + 44 * p;
    uint32_t h0, h1;
    std::memcpy(&h0, b + 2, 4);
    std::memcpy(&h1, b + 24, 4);
    w = Codes(Load16(b + 6), Load16(b + 28), h0 | (static_cast<uint64_t>(h1) << 32));
    sw = PairScale(U16(b), U16(b + 22));
  }
  static void Half(const uint8_t* row, int64_t c, __m512i& w, __m512& sw) {
    const uint8_t* b = row + 22 * c;
    uint32_t h0;
    std::memcpy(&h0, b + 2, 4);
    w = Codes(Load16(b + 6), _mm_setzero_si128(), h0);
    sw = PairScale(U16(b), 0);
  }
};

// One pair of one token into one accumulator: the exact integer dot (the
// bias, -o * S4, preloaded), then acc = fma(float(i), ws * d, acc).
inline void Step(const __m512i& w, const __m512& sw, const Int8Pair& x, __m512& acc) {
  __m512i i = _mm512_load_si512(x.bias);
  i = _mm512_dpbusd_epi32(i, w, _mm512_load_si512(x.q));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(sw, _mm512_load_ps(x.d)), acc);
}

// R rows times T tokens, all accumulators in registers. rows[0..R) may
// repeat a row (a short last group): its sums are computed and dropped.
// `ahead`, when set, is the memory of R rows further on: it is prefetched
// into L2 a slice per pair, so that it has arrived when its tile starts. Without it the R interleaved short row streams left a
// one-token pass streaming Q8_0 weights well below the read bandwidth;
// prefetching into L1 was slower still
// (docs/decisions/0006-q8-0-tile-prefetch.md).
template <class D, int R, int T>
void Tile(const uint8_t* const* rows, int nrows, const Int8Activations& a, int64_t t0, float* y, int64_t ldy,
          const uint8_t* ahead) {
  __m512 acc[R][T];
#pragma GCC unroll 32
  for (int j = 0; j < R; ++j)
#pragma GCC unroll 32
    for (int t = 0; t < T; ++t) acc[j][t] = _mm512_setzero_ps();
  const Int8Pair* xs[T];
  for (int t = 0; t < T; ++t) xs[t] = a.token(t0 + t);
  const int64_t chunks = a.n / kBlock, full = chunks / 2;
  // Cache lines of `ahead` per pair.
  constexpr int kLines = (R * D::kPairBytes + 63) / 64;
#pragma GCC unroll 1
  for (int64_t p = 0; p < full; ++p) {
    if (ahead != nullptr) {
      const char* pf = reinterpret_cast<const char*>(ahead) + 64 * kLines * p;
#pragma GCC unroll 32
      for (int l = 0; l < kLines; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T1);
    }
#pragma GCC unroll 32
    for (int j = 0; j < R; ++j) {
      __m512i w;
      __m512 sw;
      D::Pair(rows[j], p, w, sw);
#pragma GCC unroll 32
      for (int t = 0; t < T; ++t) Step(w, sw, xs[t][p], acc[j][t]);
    }
  }
  if (chunks % 2 != 0) {
#pragma GCC unroll 32
    for (int j = 0; j < R; ++j) {
      __m512i w;
      __m512 sw;
      D::Half(rows[j], chunks - 1, w, sw);
#pragma GCC unroll 32
      for (int t = 0; t < T; ++t) Step(w, sw, xs[t][full], acc[j][t]);
    }
  }
  // Every sum is reduced with constant indices (acc indexed by the run-time
  // nrows made GCC keep a copy of the accumulators on the stack, stored at
  // every pair); the repeated rows of a short tile are then dropped.
  float sums[R][T];
#pragma GCC unroll 32
  for (int j = 0; j < R; ++j)
#pragma GCC unroll 32
    for (int t = 0; t < T; ++t) sums[j][t] = _mm512_reduce_add_ps(acc[j][t]);
  for (int j = 0; j < nrows; ++j)
    for (int t = 0; t < T; ++t) y[t * ldy + j] = sums[j][t];
}

// Rows per tile for T tokens: enough independent chains for one token, and
// R * T accumulators plus the T hoisted biases within the 32 zmm registers
// (at 3 tokens 8 rows spill registers; docs/decisions/0004-int8-token-groups.md).
constexpr int RowsFor(int T) { return T <= 2 ? 8 : T <= 4 ? 6 : T <= 6 ? 4 : 3; }

// Rows [r0, r1) times T tokens; when `prefetch`, each tile prefetches R
// rows two tiles ahead (up to `end`).
template <class D, int T>
void Group(const MatrixView& w, const Int8Activations& a, int64_t t0, float* y, int64_t r0, int64_t r1,
           bool prefetch, int64_t end) {
  constexpr int R = RowsFor(T);
  for (int64_t r = r0; r < r1; r += R) {
    const int nrows = static_cast<int>(std::min<int64_t>(R, r1 - r));
    const uint8_t* rows[R];
    for (int j = 0; j < R; ++j) rows[j] = w.row(r + (j < nrows ? j : 0));
    // Two tiles ahead: the next tile is too late to arrive in time at one
    // token (docs/decisions/0006-q8-0-tile-prefetch.md).
    const bool pf = prefetch && r + nrows + R < end;
    Tile<D, R, T>(rows, nrows, a, t0, y + r, w.rows, pf ? w.row(r + nrows + R) : nullptr);
  }
}

template <class D>
void GroupOf(int T, const MatrixView& w, const Int8Activations& a, int64_t t0, float* y, int64_t r0, int64_t r1,
             bool prefetch, int64_t end) {
  switch (T) {
    case 1: return Group<D, 1>(w, a, t0, y, r0, r1, prefetch, end);
    case 2: return Group<D, 2>(w, a, t0, y, r0, r1, prefetch, end);
    case 3: return Group<D, 3>(w, a, t0, y, r0, r1, prefetch, end);
    case 4: return Group<D, 4>(w, a, t0, y, r0, r1, prefetch, end);
    case 5: return Group<D, 5>(w, a, t0, y, r0, r1, prefetch, end);
    case 6: return Group<D, 6>(w, a, t0, y, r0, r1, prefetch, end);
    case 7: return Group<D, 7>(w, a, t0, y, r0, r1, prefetch, end);
    default: return Group<D, 8>(w, a, t0, y, r0, r1, prefetch, end);
  }
}

// As in the fp32 kernel: the weights stream from DRAM once per 24 tokens, a
// block of 24 rows read from DRAM by the first group of <= 8 tokens and from
// cache by the others.
constexpr int kStreamTokens = 24;
constexpr int64_t kRowBlock = 24;


template <class D>
void Rows(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  // Tokens per group: 7, the integer dots starting from the T biases held in
  // registers (8 spilled: passes of 8-64 tokens 15-20% faster in groups of
  // <= 7 on the former Q8_0 path, the former 16-lane Q6_K 2-6%).
  constexpr int kGroupTokens = 7;
  const int64_t T = a.T;
  for (int64_t t0 = 0; t0 < T; t0 += kStreamTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kStreamTokens, T - t0));
    const int groups = (nt + kGroupTokens - 1) / kGroupTokens;
    for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
      const int64_t re = std::min(r1, rb + kRowBlock);
      for (int g = 0, t = 0; g < groups; ++g) {
        const int size = (nt - t) / (groups - g);
        // The first group reads the rows from memory: it prefetches.
        GroupOf<D>(size, w, a, t0 + t, y + (t0 + t) * w.rows, rb, re, g == 0, r1);
        t += size;
      }
    }
  }
}

// One block of 32 values into half h of rec; returns d.
inline float QuantizeBlockVnni(const float* x, Int8Pair& rec, int h) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  // QNaN, +inf, -inf, SNaN.
  if ((_mm512_fpclass_ps_mask(v0, 0x99) | _mm512_fpclass_ps_mask(v1, 0x99)) != 0) {
    std::memset(rec.q + 32 * h, 0, 32);
    return std::numeric_limits<float>::quiet_NaN();
  }
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  float d = amax / 127.0f;
  if (d < FLT_MIN) d = 0.0f;
  const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, id), kRound);
  const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, id), kRound);
  _mm_store_si128(reinterpret_cast<__m128i*>(rec.q + 32 * h), _mm512_cvtepi32_epi8(q0));
  _mm_store_si128(reinterpret_cast<__m128i*>(rec.q + 32 * h + 16), _mm512_cvtepi32_epi8(q1));
  return d;
}

void QuantizeVnni(GgmlType type, const float* x, int64_t T, int64_t n, Int8Activations& out) {
  Resize(type, T, n, out);
  const int64_t chunks = n / kBlock;
  const __m512i neg_offset = _mm512_set1_epi32(-Offset(type));
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t p = 0; p < out.pairs; ++p) {
      Int8Pair& rec = out.pair[t * out.pairs + p];
      const int64_t c = 2 * p;
      const float d0 = QuantizeBlockVnni(x + t * n + c * kBlock, rec, 0);
      float d1 = 0.0f;
      if (c + 1 < chunks) {
        d1 = QuantizeBlockVnni(x + t * n + (c + 1) * kBlock, rec, 1);
      } else {
        std::memset(rec.q + 32, 0, 32);
      }
      // S4: the sums of 4 q per lane (1 * q); the bias -o * S4.
      const __m512i s4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_load_si512(rec.q));
      _mm512_store_si512(rec.bias, _mm512_mullo_epi32(s4, neg_offset));
      _mm512_store_ps(rec.d, _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1));
      if (out.supers != 0) {
        SetMs(out, t, c, d0, _mm512_mask_reduce_add_epi32(0x00FF, s4));
        if (c + 1 < chunks) SetMs(out, t, c + 1, d1, _mm512_mask_reduce_add_epi32(0xFF00, s4));
      }
    }
  }
  SumBlockBiases(out);
}

void RowsVnni(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  switch (w.type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      // Packed by the backend (kernels/cpu_matmul_packed.h); a view nobody
      // packed (or Q6_K on a CPU without VBMI) runs the portable kernel: the
      // same bits.
      if (w.packed != nullptr && PackedVnniRuns(w.type)) return MatMulPackedVnni(w, a, y, r0, r1);
      return MatMulInt8RowsPortable(w, a, y, r0, r1);
    case GgmlType::kQ5_0: return Rows<VQ5_0>(w, a, y, r0, r1);
    default: SPECSERVE_CHECK(false && "MatMulInt8Rows: unsupported type");
  }
}

}  // namespace
}  // namespace specserve::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace specserve::cpu {

using int8_record::kBlock;

bool Int8MatMulSupports(const MatrixView& w) {
  if (w.cols % kBlock != 0) return false;
  switch (w.type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

bool UseVnniInt8MatMul() {
  static const bool use = [] {
    __builtin_cpu_init();
    return UseAvx512MatMul() && __builtin_cpu_supports("avx512vnni");
  }();
  return use;
}

void QuantizeActivationsInt8(GgmlType type, const float* x, int64_t T, int64_t n, Int8Activations& out) {
  if (UseVnniInt8MatMul()) return QuantizeVnni(type, x, T, n, out);
  QuantizeActivationsInt8Portable(type, x, T, n, out);
}

void MatMulInt8Rows(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  SPECSERVE_CHECK(a.type == w.type && a.n == w.cols);
  if (UseVnniInt8MatMul()) return RowsVnni(w, a, y, r0, r1);
  // AVX2 without VNNI: Q8_0, Q4_K and Q6_K packed by the backend run the AVX2
  // kernel, the rest (and views nobody packed) the portable one: the same bits.
  if (w.packed != nullptr && PackedAvx2Runs(w.type)) return MatMulPackedAvx2(w, a, y, r0, r1);
  MatMulInt8RowsPortable(w, a, y, r0, r1);
}

}  // namespace specserve::cpu
