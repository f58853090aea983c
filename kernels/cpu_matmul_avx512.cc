#include "kernels/cpu_matmul_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "common/check.h"
#include "common/fp16.h"

// Everything below is compiled for AVX-512 and only called after
// UseAvx512MatMul() said the CPU has it. All headers are included above, so
// no inline function of theirs is emitted with these instructions.
#pragma GCC push_options
// GCC 12 reports its own _mm512_undefined_* placeholders as uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")

#include "kernels/cpu_q4k_scales_avx512.h"  // inside the target region (its header says why)

namespace specserve::cpu {
namespace {

// Every decoder hands out a row 32 values (one "chunk") at a time, as two
// 16-lane fp32 vectors holding exactly what DequantizeRow writes there.
constexpr int64_t kChunk = 32;

inline float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return F16ToF32(h);
}

inline __m128i Load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i Load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// A decoder reads its row kGroup chunks at a time (a K-quant super-block):
// Prepare(row, g, state) decodes what the chunks of group g share (scales)
// once per row, then Chunk(row, c, k, state, w0, w1) widens chunk c = g *
// kGroup + k. Decoders of self-contained 32-value blocks have no state.
struct Ungrouped {
  static constexpr int kGroup = 1;
  struct State {};
  static void Prepare(const uint8_t*, int64_t, State&) {}
};

struct DecodeF32 : Ungrouped {
  static void Chunk(const uint8_t* row, int64_t c, int, const State&, __m512& w0, __m512& w1) {
    const float* p = reinterpret_cast<const float*>(row) + c * kChunk;
    w0 = _mm512_loadu_ps(p);
    w1 = _mm512_loadu_ps(p + 16);
  }
};

struct DecodeF16 : Ungrouped {
  static void Chunk(const uint8_t* row, int64_t c, int, const State&, __m512& w0, __m512& w1) {
    const uint8_t* p = row + c * kChunk * 2;
    w0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    w1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
  }
};

// block_q8_0 { f16 d; i8 qs[32] }: q * d.
struct DecodeQ8_0 : Ungrouped {
  static void Chunk(const uint8_t* row, int64_t c, int, const State&, __m512& w0, __m512& w1) {
    const uint8_t* b = row + c * 34;
    const __m512 d = _mm512_set1_ps(Half(b));
    w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(Load16(b + 2))), d);
    w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(Load16(b + 18))), d);
  }
};

// block_q5_0 { f16 d; u32 qh; u8 qs[16] }: element e < 16 is the low nibble
// of qs[e] with bit e of qh above it, element 16 + e the high nibble with bit
// 16 + e; minus 16, times d.
struct DecodeQ5_0 : Ungrouped {
  static void Chunk(const uint8_t* row, int64_t c, int, const State&, __m512& w0, __m512& w1) {
    const uint8_t* b = row + c * 22;
    const __m512 d = _mm512_set1_ps(Half(b));
    uint32_t qh;
    std::memcpy(&qh, b + 2, sizeof(qh));
    const __m512i bytes = _mm512_cvtepu8_epi32(Load16(b + 6));
    const __m512i four = _mm512_set1_epi32(0x0F);
    const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i bits = _mm512_set1_epi32(static_cast<int32_t>(qh));
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i sixteen = _mm512_set1_epi32(16);
    const __m512i hb0 = _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(bits, lanes), one), 4);
    const __m512i hb1 = _mm512_slli_epi32(
        _mm512_and_si512(_mm512_srlv_epi32(bits, _mm512_add_epi32(lanes, sixteen)), one), 4);
    const __m512i q0 = _mm512_or_si512(_mm512_and_si512(bytes, four), hb0);
    const __m512i q1 = _mm512_or_si512(_mm512_srli_epi32(bytes, 4), hb1);
    w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q0, sixteen)), d);
    w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q1, sixteen)), d);
  }
};

// block_q4_K { f16 d, dmin; u8 scales[12]; u8 qs[128] }: sub-block j (32
// values) is nibble j % 2 of qs[32 (j / 2) ..], as (d * sc) * q - dmin * m.
// Prepare computes the eight d1 = d * sc and m1 = dmin * m of a super-block
// (the float products DequantizeRow computes); Chunk builds the 16 values a
// nibble can stand for, d1 * q - m1 for q = 0..15 with the same two float
// ops in 16 lanes, and looks each nibble up in that table (vpermps reads only
// the low 4 bits of an index, so a nibble needs no mask, only a shift by 0
// or 4): the bits of DequantizeRow, without a conversion per value.
struct DecodeQ4_K {
  static constexpr int kGroup = 8;
  struct State {
    float dm[16];  // d1 of sub-blocks 0..7, then m1
    const uint8_t* qs;
  };
  // The scales and mins: kernels/cpu_q4k_scales_avx512.h.
  static void Prepare(const uint8_t* row, int64_t g, State& s) {
    const uint8_t* b = row + g * 144;
    DecodeQ4_KScales(b, s.dm);
    s.qs = b + 16;
  }
  static void Chunk(const uint8_t*, int64_t, int j, const State& s, __m512& w0, __m512& w1) {
    const __m512 iota = _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512 table = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(s.dm[j]), iota), _mm512_set1_ps(s.dm[8 + j]));
    const uint8_t* q = s.qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    const __m512i i0 = _mm512_srli_epi32(_mm512_cvtepu8_epi32(Load16(q)), shift);
    const __m512i i1 = _mm512_srli_epi32(_mm512_cvtepu8_epi32(Load16(q + 16)), shift);
    w0 = _mm512_permutexvar_ps(i0, table);
    w1 = _mm512_permutexvar_ps(i1, table);
  }
};

// The same values as DecodeQ4_K, bit for bit, decoded chunk by chunk with
// no per-super-block state: faster in groups of 7 or 8 tokens (3 rows, 24
// accumulators), where the table and the super-block state leave too few
// registers (DecoderFor below).
struct DecodeQ4_KPerChunk : Ungrouped {
  static void Chunk(const uint8_t* row, int64_t c, int, const State&, __m512& w0, __m512& w1) {
    const uint8_t* b = row + (c / 8) * 144;
    const int j = static_cast<int>(c % 8);
    int sc, m;
    Q4_KScaleMin(j, b + 4, &sc, &m);
    const __m512 d1 = _mm512_set1_ps(Half(b) * static_cast<float>(sc));
    const __m512 m1 = _mm512_set1_ps(Half(b + 2) * static_cast<float>(m));
    const uint8_t* q = b + 16 + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    const __m512i four = _mm512_set1_epi32(0x0F);
    const __m512i n0 = _mm512_and_si512(_mm512_srli_epi32(_mm512_cvtepu8_epi32(Load16(q)), shift), four);
    const __m512i n1 = _mm512_and_si512(_mm512_srli_epi32(_mm512_cvtepu8_epi32(Load16(q + 16)), shift), four);
    w0 = _mm512_sub_ps(_mm512_mul_ps(d1, _mm512_cvtepi32_ps(n0)), m1);
    w1 = _mm512_sub_ps(_mm512_mul_ps(d1, _mm512_cvtepi32_ps(n1)), m1);
  }
};

// block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }: chunk j of a
// super-block is row r = j % 4 of half h = j / 4; value l of it takes nibble
// r / 2 of ql[64 h + 32 (r % 2) + l] and bits 2r of qh[32 h + l], minus 32,
// times d * scales[8 h + 2 r + l / 16]. Prepare computes the 16 products
// d * scale of a super-block; Chunk assembles the 32 6-bit values in one
// 256-bit register of bytes, then widens each half.
struct DecodeQ6_K {
  static constexpr int kGroup = 8;
  struct State {
    float ds[16];
    const uint8_t* b;
  };
  static void Prepare(const uint8_t* row, int64_t g, State& s) {
    const uint8_t* b = row + g * 210;
    const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(Load16(b + 192)));
    _mm512_storeu_ps(s.ds, _mm512_mul_ps(_mm512_set1_ps(Half(b + 208)), sc));
    s.b = b;
  }
  static void Chunk(const uint8_t*, int64_t, int j, const State& s, __m512& w0, __m512& w1) {
    const int h = j / 4, r = j % 4;
    const uint8_t* ql = s.b + 64 * h + 32 * (r % 2);
    const uint8_t* qh = s.b + 128 + 32 * h;
    const int lshift = 4 * (r / 2), hshift = 2 * r;
    // 16-bit shifts: the bits that cross into a byte from its neighbour are
    // masked off.
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(Load32(ql), lshift), _mm256_set1_epi8(0x0F));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(Load32(qh), hshift), _mm256_set1_epi8(0x03));
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
    w0 = _mm512_mul_ps(_mm512_set1_ps(s.ds[8 * h + 2 * r]),
                       _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))));
    w1 = _mm512_mul_ps(_mm512_set1_ps(s.ds[8 * h + 2 * r + 1]),
                       _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))));
  }
};

// The decoder a group of T tokens uses. Both Q4_K decoders give the same
// bits, so the choice never changes a result: the table (DecodeQ4_K) wins
// where decoding is a large share of the work (few tokens per group), the
// per-chunk one in the 7- and 8-token groups of a prefill (perf on the ~1B
// Q4_K_M model: Tile<DecodeQ4_K, 3, 8> took 18% more samples with the table).
template <class D, int T>
struct DecoderFor {
  using type = D;
};
template <int T>
struct DecoderFor<DecodeQ4_K, T> {
  using type = std::conditional_t<(T <= 6), DecodeQ4_K, DecodeQ4_KPerChunk>;
};

// R rows times T tokens, all accumulators in registers (R * T <= 24 of the
// 32 zmm); x rows are read from cache as memory operands of the FMAs.
// rows[0..R) may repeat a row (a short last group): its sums are computed
// and dropped (nrows says how many are stored). The chunks of a group are a
// loop, not unrolled: unrolled, GCC spilled accumulators (Q4_K passes of 5
// and 17 tokens got slower; docs/performance_model.md).
template <class D, int R, int T>
void Tile(const uint8_t* const* rows, int nrows, const float* x, int64_t n, float* y, int64_t ldy) {
  __m512 acc[R][T];
#pragma GCC unroll 32
  for (int j = 0; j < R; ++j)
#pragma GCC unroll 32
    for (int t = 0; t < T; ++t) acc[j][t] = _mm512_setzero_ps();
  const int64_t chunks = n / kChunk;
  for (int64_t c0 = 0; c0 < chunks; c0 += D::kGroup) {
    typename D::State state[R];
#pragma GCC unroll 32
    for (int j = 0; j < R; ++j) D::Prepare(rows[j], c0 / D::kGroup, state[j]);
#pragma GCC unroll 1
    for (int k = 0; k < D::kGroup; ++k) {
      const int64_t c = c0 + k, i = c * kChunk;
#pragma GCC unroll 32
      for (int j = 0; j < R; ++j) {
        __m512 w0, w1;
        D::Chunk(rows[j], c, k, state[j], w0, w1);
#pragma GCC unroll 32
        for (int t = 0; t < T; ++t) {
          acc[j][t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + t * n + i), acc[j][t]);
          acc[j][t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + t * n + i + 16), acc[j][t]);
        }
      }
    }
  }
  for (int j = 0; j < nrows; ++j)
    for (int t = 0; t < T; ++t) y[t * ldy + j] = _mm512_reduce_add_ps(acc[j][t]);
}

// Rows per group for a pass of T tokens: enough independent FMA chains for
// one token (8), and R * T accumulators within the register file.
constexpr int RowsFor(int T) { return T <= 3 ? 8 : T <= 4 ? 6 : T <= 6 ? 4 : 3; }

// Rows [r0, r1) (at most kRowBlock) times T <= 8 tokens, R rows at a time.
template <class D, int T>
void Group(const MatrixView& w, const float* x, float* y, int64_t r0, int64_t r1) {
  constexpr int R = RowsFor(T);
  using Decoder = typename DecoderFor<D, T>::type;
  for (int64_t r = r0; r < r1; r += R) {
    const int nrows = static_cast<int>(std::min<int64_t>(R, r1 - r));
    const uint8_t* rows[R];
    for (int j = 0; j < R; ++j) rows[j] = w.row(r + (j < nrows ? j : 0));
    Tile<Decoder, R, T>(rows, nrows, x, w.cols, y + r, w.rows);
  }
}

template <class D>
void GroupOf(int T, const MatrixView& w, const float* x, float* y, int64_t r0, int64_t r1) {
  switch (T) {
    case 1: return Group<D, 1>(w, x, y, r0, r1);
    case 2: return Group<D, 2>(w, x, y, r0, r1);
    case 3: return Group<D, 3>(w, x, y, r0, r1);
    case 4: return Group<D, 4>(w, x, y, r0, r1);
    case 5: return Group<D, 5>(w, x, y, r0, r1);
    case 6: return Group<D, 6>(w, x, y, r0, r1);
    case 7: return Group<D, 7>(w, x, y, r0, r1);
    default: return Group<D, 8>(w, x, y, r0, r1);
  }
}

// Tokens per pass over memory: the weights stream from DRAM once per 24
// tokens (a verify pass of up to 17 at once, a prefill 24 at a time) ...
constexpr int kStreamTokens = 24;
// ... and within that, a block of rows (24: a multiple of every RowsFor) is
// read from DRAM by the first group of at most 8 tokens and from cache by the
// rest, so x (24 tokens x n) is reused across rows from L1/L2.
constexpr int64_t kRowBlock = 24;
constexpr int kGroupTokens = 8;

template <class D>
void Rows(const MatrixView& w, const float* x, int64_t T, float* y, int64_t r0, int64_t r1) {
  for (int64_t t0 = 0; t0 < T; t0 += kStreamTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kStreamTokens, T - t0));
    const int groups = (nt + kGroupTokens - 1) / kGroupTokens;
    for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
      const int64_t re = std::min(r1, rb + kRowBlock);
      // nt tokens in `groups` near-equal groups of at most 8.
      for (int g = 0, t = 0; g < groups; ++g) {
        const int size = (nt - t) / (groups - g);
        GroupOf<D>(size, w, x + (t0 + t) * w.cols, y + (t0 + t) * w.rows, rb, re);
        t += size;
      }
    }
  }
}

}  // namespace

void MatMulRowsAvx512(const MatrixView& w, const float* x, int64_t T, float* y, int64_t r0, int64_t r1) {
  switch (w.type) {
    case GgmlType::kF32: return Rows<DecodeF32>(w, x, T, y, r0, r1);
    case GgmlType::kF16: return Rows<DecodeF16>(w, x, T, y, r0, r1);
    case GgmlType::kQ8_0: return Rows<DecodeQ8_0>(w, x, T, y, r0, r1);
    case GgmlType::kQ5_0: return Rows<DecodeQ5_0>(w, x, T, y, r0, r1);
    case GgmlType::kQ4_K: return Rows<DecodeQ4_K>(w, x, T, y, r0, r1);
    case GgmlType::kQ6_K: return Rows<DecodeQ6_K>(w, x, T, y, r0, r1);
    default: SPECSERVE_CHECK(false && "MatMulRowsAvx512: unsupported type");
  }
}

}  // namespace specserve::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace specserve::cpu {

bool UseAvx512MatMul() {
  static const bool use = [] {
    const char* env = std::getenv("SPECSERVE_CPU_KERNELS");
    if (env != nullptr && std::string_view(env) == "avx2") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }();
  return use;
}

bool Avx512MatMulSupports(const MatrixView& w) {
  if (w.cols % kChunk != 0) return false;
  switch (w.type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

}  // namespace specserve::cpu
