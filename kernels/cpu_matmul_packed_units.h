// The AVX-512 VNNI kernels' units over the packed layouts of
// cpu_matmul_packed.h: per 32-value block (Q8_0) or 256-value super-block
// (Q4_K, Q6_K), G groups of 16 rows times T tokens into T G float sums.
// cpu_matmul_packed.cc drives them over row tiles and token groups.
//
// Include this only inside an AVX-512 target region (after
// `#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi,...")`,
// as kernels/cpu_matmul_packed.cc does): its functions are compiled with
// those instructions and have internal linkage, so no copy of them can reach
// a CPU without AVX-512 VNNI.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu_matmul_int8.h"
#include "kernels/cpu_matmul_packed.h"

namespace specserve::cpu {
namespace {

inline __m512 HalvesToFloats(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 BytesToFloats(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512i Broadcast4(const int8_t* p) {
  int32_t x4;
  std::memcpy(&x4, p, 4);
  return _mm512_set1_epi32(x4);
}

// The row tile of groups [g, g + G) (of the groups before g1) over rows
// [r0, r1): each group's first packed byte (group_bytes apart) and the mask
// of its kPackedRows rows inside [r0, r1). A short last tile repeats its first
// group and stores nothing (mask 0).
template <int G>
inline void TileGroups(const uint8_t* packed, int64_t group_bytes, int64_t g, int64_t g1, int64_t r0,
                       int64_t r1, const uint8_t* (&grp)[G], __mmask16 (&masks)[G]) {
  for (int j = 0; j < G; ++j) {
    const int64_t gj = g + j < g1 ? g + j : g;
    grp[j] = packed + gj * group_bytes;
    const int64_t lo = std::max<int64_t>(r0, gj * kPackedRows) - gj * kPackedRows;
    const int64_t hi = std::min<int64_t>(r1, (gj + 1) * kPackedRows) - gj * kPackedRows;
    masks[j] = g + j < g1 ? static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1)) : 0;
  }
}

// The next unit's lines of a row tile's G groups, prefetched a few at a time
// over `steps` calls of Step() spread through the work on this unit. One
// core reads memory only as fast as its fill buffers turn over; a pass whose
// arithmetic issues no loads for a while leaves them idle, and a burst of a
// unit's prefetches up front waits for them instead: spread over the unit
// was faster than none and than a burst per half super-block or 2
// super-blocks ahead (docs/decisions/0007-spread-prefetch.md).
template <int G>
class SpreadPrefetch {
 public:
  SpreadPrefetch(const uint8_t* const* grp, int64_t unit_bytes)
      : unit_bytes_(unit_bytes), lines_(static_cast<int>((unit_bytes + 63) / 64)) {
    for (int g = 0; g < G; ++g) grp_[g] = reinterpret_cast<const char*>(grp[g]);
  }
  // Before unit u's work (of nu units): unit u + 1's lines, over `steps` steps.
  void Plan(int64_t u, int64_t nu, int steps) {
    offset_ = (u + 1) * unit_bytes_;
    next_ = 0;
    total_ = u + 1 < nu ? G * lines_ : 0;
    per_step_ = (total_ + steps - 1) / steps;
  }
  void Step() {
    for (int i = 0; i < per_step_ && next_ < total_; ++i, ++next_)
      _mm_prefetch(grp_[next_ % G] + offset_ + 64 * (next_ / G), _MM_HINT_T0);
  }

 private:
  const char* grp_[G];
  int64_t unit_bytes_, offset_ = 0;
  int lines_, next_ = 0, total_ = 0, per_step_ = 0;
};

// A unit source's hook for SpreadPrefetch: the units call Ahead() between
// their loads; with no prefetcher set it does nothing.
template <int G>
struct PrefetchHook {
  SpreadPrefetch<G>* ahead = nullptr;
  void Ahead() const {
    if (ahead != nullptr) ahead->Step();
  }
};

constexpr int kMaxTokens = 3;  // per token group (a kernel's kTileTokens may allow more)
// Tokens per stream: the weights come from memory once per stream.
constexpr int kStreamTokens = 20;

// A stream's tokens as the units read them (indices relative to the stream):
// their int8 pairs, their rows of Q8_0's block_bias or Q6_K's sub_bias, and
// Q4_K's ms lanes.
struct StreamTokens {
  const Int8Pair* xs[kStreamTokens];
  const int32_t* bias[kStreamTokens];
  const Float16x* ms[kStreamTokens];
};

// Each kernel's Unit<G, T>(grp, u, st, t, acc) adds unit u (a block of 32
// columns, or a super-block of 256) of G groups (grp[g]: the group's first
// unit) times tokens t .. t + T - 1 of the stream into acc[G][T], in the
// order of the contract (kernels/cpu_matmul_int8.h).
// kTileTokens: the most tokens one Tile takes; kSweepTileTokens: the most
// the kUnitSweep order runs as one Tile before it sweeps token groups.

// Q8_0, per block: the T integer dots of each group start from the token's
// bias -128 * S and take 8 vpdpbusd (4 values each, the token's 4 int8
// activations broadcast), then acc = fma(float(i), d_w * d_x, acc). Up to 3
// tokens all G groups' dots are live at once; for 4-5 tokens
// (kTileTokens), two groups' at a time, so that they fit in the 32 registers
// beside the G T float sums (the bits do not depend on the order of groups).
// A tile of 4-5 tokens from memory is as slow as two smaller ones (the
// second from L2) unless it prefetches (kPrefetchUnits: 8 units, 4 KiB a
// group, ahead): the more arithmetic per byte, the later the loads issue.
// Where the prefetch pays (PackedTilePrefetch) one prefetching tile beats
// 3 + 2 tokens; one token is the same either way
// (docs/decisions/0006-q8-0-tile-prefetch.md).
struct Q8_0Kernel {
  static constexpr int64_t kCols = 32, kBytes = kQ8_0PackedBytes;
  static constexpr int kTileTokens = 5;
  static constexpr int kSweepTileTokens = kMaxTokens;
  static constexpr int64_t kPrefetchUnits = 8;
  // No SpreadPrefetch: Q8_0's passes were slower with it, so Unit ignores
  // `ahead` (docs/decisions/0007-spread-prefetch.md).
  static constexpr int kSpreadTokens = 0;
  // Token-group tiles prefetch the next row tile through a pass of 6+
  // tokens (NextTilePrefetch in cpu_matmul_packed.cc), so that memory works
  // while the later token groups read this tile from L2
  // (docs/decisions/0008-next-tile-prefetch.md).
  static constexpr bool kNextTile = true;
  template <int G, int T>
  static inline void Unit(const uint8_t* const* grp, int64_t b, const StreamTokens& st, int t0,
                          __m512 (&acc)[G][T], [[maybe_unused]] SpreadPrefetch<G>* ahead = nullptr) {
    constexpr int GB = T <= 3 ? G : 2;  // groups whose dots are live together
    static_assert(G % GB == 0);
    const int h = static_cast<int>(b & 1);
#pragma GCC unroll 32
    for (int g0 = 0; g0 < G; g0 += GB) {
      __m512i ia[GB][T];
#pragma GCC unroll 32
      for (int t = 0; t < T; ++t) {
        const __m512i bi = _mm512_set1_epi32(st.bias[t0 + t][b]);
#pragma GCC unroll 32
        for (int g = 0; g < GB; ++g) ia[g][t] = bi;
      }
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
#pragma GCC unroll 32
        for (int g = 0; g < GB; ++g) {
          const __m512i w = _mm512_loadu_si512(grp[g0 + g] + kBytes * b + 32 + 64 * k);
#pragma GCC unroll 32
          for (int t = 0; t < T; ++t) {
            ia[g][t] = _mm512_dpbusd_epi32(ia[g][t], w, Broadcast4(st.xs[t0 + t][b >> 1].q + 32 * h + 4 * k));
          }
        }
      }
#pragma GCC unroll 32
      for (int g = 0; g < GB; ++g) {
        const __m512 sw = HalvesToFloats(grp[g0 + g] + kBytes * b);
#pragma GCC unroll 32
        for (int t = 0; t < T; ++t) {
          const __m512 s = _mm512_mul_ps(sw, _mm512_set1_ps(st.xs[t0 + t][b >> 1].d[8 * h]));
          acc[g0 + g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[g][t]), s, acc[g0 + g][t]);
        }
      }
    }
  }
};

// Q4_K, per super-block: per sub-block j of 32 values, the integer dot of the
// nibbles (low nibbles for even j, high for odd, of the same bytes) from
// zero, then acc = fma(float(i), (d * sc) * d_x, acc) and
// acc = fma(-(dmin * m), ms, acc) with ms = d_x * S (the activations' Q4_K ms
// lanes). UnitFrom reads the codes and row scales from a source: Q4Direct
// unpacks them from the packed bytes as it goes (one token group reads a
// unit once), Q4Decoded holds them unpacked (a sweep's token groups share
// one unpacking of the unit); both give the same values, so the same bits.
template <int G>
struct Q4Direct : PrefetchHook<G> {
  const uint8_t* base[G];
  __m512 d[G], dmin[G];
  Q4Direct(const uint8_t* const* grp, int64_t s, SpreadPrefetch<G>* ahead = nullptr) : PrefetchHook<G>{ahead} {
#pragma GCC unroll 32
    for (int g = 0; g < G; ++g) {
      base[g] = grp[g] + kQ4_KPackedBytes * s;
      d[g] = HalvesToFloats(base[g]);
      dmin[g] = HalvesToFloats(base[g] + 32);
    }
  }
  // Sub-block j = 2p + h, the 4 codes of each row at 4k .. 4k + 3.
  __m512i Codes(int g, int p, int h, int k) const {
    __m512i w = _mm512_loadu_si512(base[g] + 320 + 512 * p + 64 * k);
    if (h != 0) w = _mm512_srli_epi16(w, 4);
    return _mm512_and_si512(w, _mm512_set1_epi8(0x0F));
  }
  // Sub-blocks 2p (lo) and 2p + 1 (hi) from one load of their bytes.
  void CodePair(int g, int p, int k, __m512i& lo, __m512i& hi) const {
    const __m512i w = _mm512_loadu_si512(base[g] + 320 + 512 * p + 64 * k);
    lo = _mm512_and_si512(w, _mm512_set1_epi8(0x0F));
    hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), _mm512_set1_epi8(0x0F));
  }
  __m512 Scale(int g, int j) const { return _mm512_mul_ps(d[g], BytesToFloats(base[g] + 64 + 16 * j)); }
  __m512 Min(int g, int j) const { return _mm512_mul_ps(dmin[g], BytesToFloats(base[g] + 192 + 16 * j)); }
};
// A unit of G groups unpacked: 4 KiB of codes and 1 KiB of scales a group,
// in the order UnitFrom reads them (groups innermost: no two reads of a
// sub-block 4 KiB apart, which the store buffer would take for conflicts).
template <int G>
struct alignas(64) Q4Decoded : PrefetchHook<G> {  // ahead: set by the sweep
  __m512i q[8][8][G];
  __m512 ws[8][G], m1[8][G];
  void Fill(const uint8_t* const* grp, int64_t s) {
    const Q4Direct<G> src(grp, s);
#pragma GCC unroll 1
    for (int p = 0; p < 4; ++p) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
#pragma GCC unroll 32
          for (int g = 0; g < G; ++g) q[2 * p + h][k][g] = src.Codes(g, p, h, k);
#pragma GCC unroll 32
        for (int g = 0; g < G; ++g) {
          ws[2 * p + h][g] = src.Scale(g, 2 * p + h);
          m1[2 * p + h][g] = src.Min(g, 2 * p + h);
        }
      }
    }
  }
  __m512i Codes(int g, int p, int h, int k) const { return q[2 * p + h][k][g]; }
  void CodePair(int g, int p, int k, __m512i& lo, __m512i& hi) const {
    lo = q[2 * p][k][g];
    hi = q[2 * p + 1][k][g];
  }
  __m512 Scale(int g, int j) const { return ws[j][g]; }
  __m512 Min(int g, int j) const { return m1[j][g]; }
};
struct Q4_KKernel {
  static constexpr int64_t kCols = 256, kBytes = kQ4_KPackedBytes;
  static constexpr int kTileTokens = 5;
  // Under kUnitSweep passes of 4-5 tokens run as one tile too
  // (UnitOneGroupFrom): each group's codes unpacked once, where two token
  // groups unpacked them twice. (Sweeping 9 and 17 tokens in parts of 5
  // instead of 3 was no faster at 9 and slower at 17;
  // docs/decisions/0002-sweep-unpacks-once.md.)
  static constexpr int kSweepTileTokens = 5;
  static constexpr int64_t kPrefetchUnits = 0;
  // No NextTilePrefetch: with it Q4_K's 5 and 9 token passes ran slower and
  // 17 tokens no faster (docs/decisions/0008-next-tile-prefetch.md).
  static constexpr bool kNextTile = false;
  template <int G>
  using Decoded = Q4Decoded<G>;
  // SpreadPrefetch in tiles of 1-5 tokens and the parts of a sweep; the
  // calls of src.Ahead() per unit: one per 8 codes' loads, but one per
  // group and sub-block in the 4-5 token tile, whose registers are tight
  // (a call per 8 loads there spilled; docs/decisions/0007-spread-prefetch.md).
  static constexpr int kSpreadTokens = 5;
  template <int G, int T>
  static constexpr int AheadSteps() {
    return 3 * G * T <= 28 ? 4 * 8 : T >= 4 ? 4 * 2 * G : 4 * 2 * 8;
  }
  // Sub-block j = 2p + h's integer dots ia into the float sums:
  // acc = fma(float(i), (d * sc) * d_x, acc), then acc -= (dmin * m) * ms.
  template <int G, int T, class Src>
  static inline void AddSubBlock(const Src& src, int64_t s, int p, int h, const StreamTokens& st, int t0,
                                 const __m512i (&ia)[G][T], __m512 (&acc)[G][T]) {
    const int64_t pair = 4 * s + p;
    const int j = 2 * p + h;
#pragma GCC unroll 32
    for (int g = 0; g < G; ++g) {
      const __m512 ws = src.Scale(g, j);
      const __m512 m1 = src.Min(g, j);
#pragma GCC unroll 32
      for (int t = 0; t < T; ++t) {
        const __m512 sc = _mm512_mul_ps(ws, _mm512_set1_ps(st.xs[t0 + t][pair].d[8 * h]));
        acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[g][t]), sc, acc[g][t]);
        acc[g][t] = _mm512_fnmadd_ps(m1, _mm512_set1_ps(st.ms[t0 + t][s].v[8 + j]), acc[g][t]);
      }
    }
  }
  template <int G, int T, class Src>
  static inline void UnitFrom(const Src& src, int64_t s, const StreamTokens& st, int t0, __m512 (&acc)[G][T]) {
    if constexpr (3 * G * T <= 28) {
      UnitPairsFrom<G, T>(src, s, st, t0, acc);
      return;
    }
    if constexpr (T >= 4) {
      UnitOneGroupFrom<G, T>(src, s, st, t0, acc);
      return;
    }
#pragma GCC unroll 1
    for (int p = 0; p < 4; ++p) {
      const int64_t pair = 4 * s + p;
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m512i ia[G][T];
#pragma GCC unroll 32
        for (int g = 0; g < G; ++g)
#pragma GCC unroll 32
          for (int t = 0; t < T; ++t) ia[g][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          src.Ahead();
#pragma GCC unroll 32
          for (int g = 0; g < G; ++g) {
            const __m512i w = src.Codes(g, p, h, k);
#pragma GCC unroll 32
            for (int t = 0; t < T; ++t) {
              ia[g][t] = _mm512_dpbusd_epi32(ia[g][t], w, Broadcast4(st.xs[t0 + t][pair].q + 32 * h + 4 * k));
            }
          }
        }
        AddSubBlock<G, T>(src, s, p, h, st, t0, ia, acc);
      }
    }
  }
  // UnitFrom while the 2 G T dots of two sub-blocks fit in the registers
  // beside the G T float sums (G 4: 1-2 tokens): sub-blocks 2p and 2p + 1
  // at once, from one load of their bytes, so twice the dot chains run side
  // by side. The integer dots are exact and the float sums keep UnitFrom's
  // order: the same bits. Only for 1-2 tokens: with 2 groups at a time for
  // 3 tokens, 3 tokens ran slower (docs/decisions/0005-one-token-q4k-q6k.md).
  template <int G, int T, class Src>
  static inline void UnitPairsFrom(const Src& src, int64_t s, const StreamTokens& st, int t0,
                                   __m512 (&acc)[G][T]) {
#pragma GCC unroll 1
    for (int p = 0; p < 4; ++p) {
      const int64_t pair = 4 * s + p;
      __m512i ia[2][G][T];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
#pragma GCC unroll 32
        for (int g = 0; g < G; ++g)
#pragma GCC unroll 32
          for (int t = 0; t < T; ++t) ia[h][g][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        src.Ahead();
#pragma GCC unroll 32
        for (int g = 0; g < G; ++g) {
          __m512i w[2];
          src.CodePair(g, p, k, w[0], w[1]);
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h)
#pragma GCC unroll 32
            for (int t = 0; t < T; ++t) {
              ia[h][g][t] =
                  _mm512_dpbusd_epi32(ia[h][g][t], w[h], Broadcast4(st.xs[t0 + t][pair].q + 32 * h + 4 * k));
            }
        }
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) AddSubBlock<G, T>(src, s, p, h, st, t0, ia[h], acc);
    }
  }
  // UnitFrom for 4-5 tokens: one group's dots live at a time, so that the
  // G T float sums and the T dots fit in the registers; each group's codes
  // are unpacked once for all T tokens (two token groups, 3 + 2, unpacked
  // them twice). Same integers, same float order per (row, token): the same
  // bits.
  template <int G, int T, class Src>
  static inline void UnitOneGroupFrom(const Src& src, int64_t s, const StreamTokens& st, int t0,
                                      __m512 (&acc)[G][T]) {
#pragma GCC unroll 1
    for (int p = 0; p < 4; ++p) {
      const int64_t pair = 4 * s + p;
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 32
        for (int g = 0; g < G; ++g) {
          __m512i ia[1][T];
#pragma GCC unroll 32
          for (int t = 0; t < T; ++t) ia[0][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k) {
            const __m512i w = src.Codes(g, p, h, k);
#pragma GCC unroll 32
            for (int t = 0; t < T; ++t) {
              ia[0][t] = _mm512_dpbusd_epi32(ia[0][t], w, Broadcast4(st.xs[t0 + t][pair].q + 32 * h + 4 * k));
            }
          }
          src.Ahead();
          const __m512 ws = src.Scale(g, 2 * p + h);
          const __m512 m1 = src.Min(g, 2 * p + h);
#pragma GCC unroll 32
          for (int t = 0; t < T; ++t) {
            const __m512 sc = _mm512_mul_ps(ws, _mm512_set1_ps(st.xs[t0 + t][pair].d[8 * h]));
            acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[0][t]), sc, acc[g][t]);
            acc[g][t] = _mm512_fnmadd_ps(m1, _mm512_set1_ps(st.ms[t0 + t][s].v[8 + 2 * p + h]), acc[g][t]);
          }
        }
      }
    }
  }
  template <int G, int T>
  static inline void Unit(const uint8_t* const* grp, int64_t s, const StreamTokens& st, int t0,
                          __m512 (&acc)[G][T], SpreadPrefetch<G>* ahead = nullptr) {
    UnitFrom<G, T>(Q4Direct<G>(grp, s, ahead), s, st, t0, acc);
  }
};

// 64 6-bit codes from 48 bytes (8 per 6 bytes, little-endian; the Q6_K
// layout) to 64 bytes: vpermb spreads each 6 bytes over a qword, vpmultishiftqb
// takes byte m of the qword from bit 6m, and 0x3F drops the neighbours' bits.
// The 48 bytes come as a 32- and a 16-byte load (lanes 0-1 and 2), nothing
// read past them. (A byte-masked load, _mm512_maskz_loadu_epi8, made Q6_K
// about twice as slow; docs/decisions/0005-one-token-q4k-q6k.md.)
inline __m512i Unpack6(const uint8_t* p) {
  const __m512i v =
      _mm512_inserti32x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)), 2);
  const __m512i spread = _mm512_permutexvar_epi8(
      _mm512_set_epi64(0x2F2F2F2E2D2C2B2Aull, 0x2929292827262524ull, 0x2323232221201F1Eull, 0x1D1D1D1C1B1A1918ull,
                       0x1717171615141312ull, 0x111111100F0E0D0Cull, 0x0B0B0B0A09080706ull, 0x0505050403020100ull),
      v);
  const __m512i fields = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x2A241E18120C0600ull), spread);
  return _mm512_and_si512(fields, _mm512_set1_epi8(0x3F));
}

// Q6_K, per super-block, per block b of 32 values: the T integer dots of each
// group, one per 16-value sub-block, start from the token's bias -32 * S16
// and take 4 vpdpbusd each (the 6-bit codes unpacked to bytes, Unpack6);
// i = s0 * i0 + s1 * i1 (the rows' int8 scales, vpmulld), then
// acc = fma(float(i), d * d_x, acc). (Tiles of 4 groups x 3 tokens: faster
// than 2 x 5, 3 x 3 or 2 x 3; docs/decisions/0004-int8-token-groups.md.)
// Sources as for Q4_K: Q6Direct unpacks as it
// goes, Q6Decoded holds a unit unpacked for a sweep's token groups.
template <int G>
struct Q6Direct : PrefetchHook<G> {
  const uint8_t* base[G];
  __m512 d[G];
  Q6Direct(const uint8_t* const* grp, int64_t s, SpreadPrefetch<G>* ahead = nullptr) : PrefetchHook<G>{ahead} {
#pragma GCC unroll 32
    for (int g = 0; g < G; ++g) {
      base[g] = grp[g] + kQ6_KPackedBytes * s;
      d[g] = _mm512_loadu_ps(base[g]);
    }
  }
  // Block b, the 4 codes of each row at 4k .. 4k + 3.
  __m512i Codes(int g, int b, int k) const { return Unpack6(base[g] + 320 + 384 * b + 48 * k); }
  // Sub-block i (16 values) of the 16 rows, as int32 lanes.
  __m512i Scales(int g, int i) const {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base[g] + 64 + 16 * i)));
  }
  __m512 D(int g) const { return d[g]; }
};
// A unit of G groups unpacked, as Q4Decoded.
template <int G>
struct alignas(64) Q6Decoded : PrefetchHook<G> {  // ahead: set by the sweep
  __m512i q[8][8][G];
  __m512i sc[16][G];
  __m512 d[G];
  void Fill(const uint8_t* const* grp, int64_t s) {
    const Q6Direct<G> src(grp, s);
#pragma GCC unroll 1
    for (int b = 0; b < 8; ++b) {
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k)
#pragma GCC unroll 32
        for (int g = 0; g < G; ++g) q[b][k][g] = src.Codes(g, b, k);
    }
#pragma GCC unroll 1
    for (int i = 0; i < 16; ++i)
#pragma GCC unroll 32
      for (int g = 0; g < G; ++g) sc[i][g] = src.Scales(g, i);
#pragma GCC unroll 32
    for (int g = 0; g < G; ++g) d[g] = src.D(g);
  }
  __m512i Codes(int g, int b, int k) const { return q[b][k][g]; }
  __m512i Scales(int g, int i) const { return sc[i][g]; }
  __m512 D(int g) const { return d[g]; }
};
struct Q6_KKernel {
  static constexpr int64_t kCols = 256, kBytes = kQ6_KPackedBytes;
  static constexpr int kTileTokens = 5;
  static constexpr int kSweepTileTokens = 5;
  static constexpr int64_t kPrefetchUnits = 0;
  // No NextTilePrefetch, as Q4_K: 9 tokens ran slower with it, 17 tokens no
  // faster (docs/decisions/0008-next-tile-prefetch.md).
  static constexpr bool kNextTile = false;
  template <int G>
  using Decoded = Q6Decoded<G>;
  // SpreadPrefetch as for Q4_K; the calls of src.Ahead() per unit: one per
  // 4 codes' loads, or per block and group in the 4-5 token tile, whose
  // registers are tight (docs/decisions/0007-spread-prefetch.md).
  static constexpr int kSpreadTokens = 5;
  template <int G, int T>
  static constexpr int AheadSteps() {
    return T >= 4 ? 8 * G : 8 * 2 * 4;
  }
  // Per 32-value block, the integer dots of GC groups at a time are live:
  // all G for up to 3 tokens; one for 4-5 tokens, so that the G T float sums
  // and the T dots fit in the registers and each group's codes are unpacked
  // once for all T tokens (two token groups, 3 + 2, unpacked them twice).
  // The integers and the float order per (row, token) are the same either
  // way: the same bits, and one group at a time is the faster at 4-5
  // tokens (docs/decisions/0004-int8-token-groups.md).
  template <int G, int T, class Src>
  static inline void UnitFrom(const Src& src, int64_t s, const StreamTokens& st, int t0, __m512 (&acc)[G][T]) {
    constexpr int GC = T >= 4 ? 1 : G;
#pragma GCC unroll 1
    for (int b = 0; b < 8; ++b) {
      const int64_t pair = 4 * s + b / 2;
      const int h = b & 1;
#pragma GCC unroll 32
      for (int g0 = 0; g0 < G; g0 += GC) {
        if constexpr (T >= 4) src.Ahead();
        __m512i ia[GC][T];
#pragma GCC unroll 2
        for (int j = 0; j < 2; ++j) {
          __m512i ij[GC][T];
#pragma GCC unroll 32
          for (int t = 0; t < T; ++t) {
            const __m512i bi = _mm512_set1_epi32(st.bias[t0 + t][16 * s + 2 * b + j]);
#pragma GCC unroll 32
            for (int g = 0; g < GC; ++g) ij[g][t] = bi;
          }
#pragma GCC unroll 4
          for (int k = 4 * j; k < 4 * j + 4; ++k) {
            if constexpr (T <= 3) src.Ahead();
#pragma GCC unroll 32
            for (int g = 0; g < GC; ++g) {
              const __m512i w = src.Codes(g0 + g, b, k);
#pragma GCC unroll 32
              for (int t = 0; t < T; ++t) {
                ij[g][t] = _mm512_dpbusd_epi32(ij[g][t], w, Broadcast4(st.xs[t0 + t][pair].q + 32 * h + 4 * k));
              }
            }
          }
#pragma GCC unroll 32
          for (int g = 0; g < GC; ++g) {
            const __m512i sc = src.Scales(g0 + g, 2 * b + j);
#pragma GCC unroll 32
            for (int t = 0; t < T; ++t) {
              const __m512i p = _mm512_mullo_epi32(ij[g][t], sc);
              ia[g][t] = j == 0 ? p : _mm512_add_epi32(ia[g][t], p);
            }
          }
        }
#pragma GCC unroll 32
        for (int g = 0; g < GC; ++g) {
#pragma GCC unroll 32
          for (int t = 0; t < T; ++t) {
            const __m512 sx = _mm512_mul_ps(src.D(g0 + g), _mm512_set1_ps(st.xs[t0 + t][pair].d[8 * h]));
            acc[g0 + g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[g][t]), sx, acc[g0 + g][t]);
          }
        }
      }
    }
  }
  template <int G, int T>
  static inline void Unit(const uint8_t* const* grp, int64_t s, const StreamTokens& st, int t0,
                          __m512 (&acc)[G][T], SpreadPrefetch<G>* ahead = nullptr) {
    UnitFrom<G, T>(Q6Direct<G>(grp, s, ahead), s, st, t0, acc);
  }
};

}  // namespace
}  // namespace specserve::cpu
