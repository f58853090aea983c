// The packed Q8_0, Q4_K and Q6_K int8 kernels for CPUs with AVX2 but without
// AVX-512 VNNI (AMD cores before AVX-512, Intel before Ice Lake): the same packed
// layout as the VNNI kernels (kernels/cpu_matmul_packed.h), read as two ymm
// halves of 8 rows per 64-byte line, and the same integers and float
// operations (kernels/cpu_matmul_int8.h), so the same bits.
//
// AVX2 has no u8 x s8 dot into int32 (vpdpbusd); vpmaddubsw multiplies u8 by
// s8 and adds pairs into int16 with saturation, so each type keeps its pair
// sums below 2^15 to stay exact:
//   Q8_0: w = u - 128 in [-128, 127], q in [-127, 127]:
//         maddubs(|w|, sign(q, w)) = |w| * (q sgn w) pairs, each pair
//         <= 2 * 128 * 127 = 32512; vpmaddwd by 1 adds them into int32, so
//         i = sum of w * q = sum of u * q - 128 * S, exactly the contract's.
//   Q4_K: u in [0, 15]: maddubs(u, q) pairs <= 2 * 15 * 127 = 3810, and the
//         8 steps of a 32-value sub-block add in int16 (<= 30480) before one
//         vpmaddwd by 1.
//   Q6_K: u in [0, 63]: maddubs(u, q) pairs <= 16002, vpmaddwd by 1 per step;
//         the 6-bit codes are unpacked with vpshufb and vpmullw (Unpack6Half).
// Registers: 16 ymm. A tile is G groups of 16 rows (2 G halves) x T tokens,
// 2 G T float and 2 G T integer accumulators: G = 2 for one token, G = 1 and
// token groups of up to 3 otherwise (Q6_K, with a third set of integer
// accumulators: G = 1 and up to 2).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "kernels/cpu_matmul_packed.h"

namespace specserve::cpu {

bool PackedAvx2Runs(GgmlType type) {
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  }();
  return avx2 && (type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K || type == GgmlType::kQ6_K);
}

}  // namespace specserve::cpu

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace specserve::cpu {
namespace {

constexpr int kHalfRows = 8;  // rows per ymm

inline __m256i Broadcast4(const int8_t* p) {
  int32_t x4;
  std::memcpy(&x4, p, 4);
  return _mm256_set1_epi32(x4);
}
// 8 f16 / 8 u8 values to 8 floats.
inline __m256 Halves8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 Bytes8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256i Load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

template <int H, int T>
inline void Zero(__m256 (&acc)[H][T]) {
  for (int hh = 0; hh < H; ++hh)
    for (int t = 0; t < T; ++t) acc[hh][t] = _mm256_setzero_ps();
}

// Half hh of a tile: group hh / 2, rows 8 (hh % 2) .. of it; lo / hi: the
// half's rows to store (0 / 8 for a full half, lo == hi for none).
struct HalfRows {
  int lo = 0, hi = 0;
};
template <int H, int T>
inline void Store(const __m256 (&acc)[H][T], const HalfRows* rows, float* y, int64_t ldy) {
  for (int hh = 0; hh < H; ++hh) {
    for (int t = 0; t < T; ++t) {
      float* dst = y + t * ldy + kHalfRows * hh;
      if (rows[hh].lo == 0 && rows[hh].hi == kHalfRows) {
        _mm256_storeu_ps(dst, acc[hh][t]);
      } else if (rows[hh].lo < rows[hh].hi) {
        alignas(32) float lanes[kHalfRows];
        _mm256_store_ps(lanes, acc[hh][t]);
        for (int l = rows[hh].lo; l < rows[hh].hi; ++l) dst[l] = lanes[l];
      }
    }
  }
}

// Q8_0, G groups x T tokens: per block, i = sum over the 8 steps of
// madd(maddubs(|w|, sign(q, w)), 1), then acc = fma(float(i), d_w * d_x, acc).
struct Q8_0Avx2 {
  static constexpr int64_t kCols = 32, kBytes = kQ8_0PackedBytes;
  static constexpr int kOneTokenGroups = 2, kMaxTokens = 3;
  template <int G, int T>
  static void Tile(const uint8_t* const* grp, const HalfRows* rows, int64_t nb, const Int8Activations& a, int64_t t0,
                   float* y, int64_t ldy) {
    constexpr int H = 2 * G;
    __m256 acc[H][T];
    Zero<H, T>(acc);
    const Int8Pair* xs[T];
    for (int t = 0; t < T; ++t) xs[t] = a.token(t0 + t);
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nb; ++b) {
      const int h = static_cast<int>(b & 1);
      __m256i ia[H][T];
      for (int hh = 0; hh < H; ++hh)
        for (int t = 0; t < T; ++t) ia[hh][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
#pragma GCC unroll 4
        for (int hh = 0; hh < H; ++hh) {
          const __m256i w = _mm256_xor_si256(Load32(grp[hh / 2] + kBytes * b + 32 + 64 * k + 32 * (hh & 1)), flip);
          const __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const __m256i sx = _mm256_sign_epi8(Broadcast4(xs[t][b >> 1].q + 32 * h + 4 * k), w);
            ia[hh][t] = _mm256_add_epi32(ia[hh][t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones));
          }
        }
      }
#pragma GCC unroll 4
      for (int hh = 0; hh < H; ++hh) {
        const __m256 sw = Halves8(grp[hh / 2] + kBytes * b + 16 * (hh & 1));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256 s = _mm256_mul_ps(sw, _mm256_set1_ps(xs[t][b >> 1].d[8 * h]));
          acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[hh][t]), s, acc[hh][t]);
        }
      }
    }
    Store<H, T>(acc, rows, y, ldy);
  }
};

// Q4_K, G groups x T tokens: per sub-block j of 32 values, the nibbles' 8
// maddubs steps add in int16, one madd by 1 makes i, then
// acc = fma(float(i), (d * sc) * d_x, acc) and acc = fma(-(dmin * m), ms, acc).
struct Q4_KAvx2 {
  static constexpr int64_t kCols = 256, kBytes = kQ4_KPackedBytes;
  // Up to 3 tokens spills a few ymm here, yet was no slower than groups of
  // 2 (docs/decisions/0004-int8-token-groups.md).
  static constexpr int kOneTokenGroups = 2, kMaxTokens = 3;
  template <int G, int T>
  static void Tile(const uint8_t* const* grp, const HalfRows* rows, int64_t ns, const Int8Activations& a, int64_t t0,
                   float* y, int64_t ldy) {
    constexpr int H = 2 * G;
    __m256 acc[H][T];
    Zero<H, T>(acc);
    const Int8Pair* xs[T];
    const Float16x* ms[T];
    for (int t = 0; t < T; ++t) {
      xs[t] = a.token(t0 + t);
      ms[t] = a.token_ms(t0 + t);
    }
    const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    for (int64_t s = 0; s < ns; ++s) {
#pragma GCC unroll 1
      for (int p = 0; p < 4; ++p) {
        const int64_t pair = 4 * s + p;
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const int j = 2 * p + h;
          __m256i i16[H][T];
          for (int hh = 0; hh < H; ++hh)
            for (int t = 0; t < T; ++t) i16[hh][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k) {
#pragma GCC unroll 4
            for (int hh = 0; hh < H; ++hh) {
              __m256i w = Load32(grp[hh / 2] + kBytes * s + 320 + 512 * p + 64 * k + 32 * (hh & 1));
              if (h != 0) w = _mm256_srli_epi16(w, 4);
              w = _mm256_and_si256(w, low4);
#pragma GCC unroll 4
              for (int t = 0; t < T; ++t) {
                i16[hh][t] = _mm256_add_epi16(
                    i16[hh][t], _mm256_maddubs_epi16(w, Broadcast4(xs[t][pair].q + 32 * h + 4 * k)));
              }
            }
          }
#pragma GCC unroll 4
          for (int hh = 0; hh < H; ++hh) {
            const uint8_t* base = grp[hh / 2] + kBytes * s;
            const int half = hh & 1;
            const __m256 ws = _mm256_mul_ps(Halves8(base + 16 * half), Bytes8(base + 64 + 16 * j + 8 * half));
            const __m256 m1 = _mm256_mul_ps(Halves8(base + 32 + 16 * half), Bytes8(base + 192 + 16 * j + 8 * half));
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
              const __m256i i = _mm256_madd_epi16(i16[hh][t], ones);
              const __m256 sc = _mm256_mul_ps(ws, _mm256_set1_ps(xs[t][pair].d[8 * h]));
              acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), sc, acc[hh][t]);
              acc[hh][t] = _mm256_fnmadd_ps(m1, _mm256_set1_ps(ms[t][s].v[8 + j]), acc[hh][t]);
            }
          }
        }
      }
    }
    Store<H, T>(acc, rows, y, ldy);
  }
};

// 32 6-bit codes (one half: 8 rows x 4 values) from 24 bytes (the Q6_K
// packing, 8 codes per 6 bytes): lane 0 of the ymm from bytes 0..15, lane 1
// from bytes 8..23 (nothing read past the 24); per lane two vpshufb put each
// code's two bytes in a 16-bit lane (words 0 and 2 in a, 1 and 3 in b),
// vpmullw by 2^(10 - shift) moves its 6 bits to the top and a shift by 10
// brings them down; vpackuswb interleaves a and b back into code order.
inline __m256i Unpack6Half(const uint8_t* p) {
  const __m256i v = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)), 1);
  // Code m of a word at byte o: bytes o + 6m / 8 and the next (m = 0..7).
  const __m256i take_a = _mm256_setr_epi8(0, 1, 0, 1, 1, 2, 2, 3, 3, 4, 3, 4, 4, 5, 5, 6,  //
                                          4, 5, 4, 5, 5, 6, 6, 7, 7, 8, 7, 8, 8, 9, 9, 10);
  const __m256i take_b = _mm256_setr_epi8(6, 7, 6, 7, 7, 8, 8, 9, 9, 10, 9, 10, 10, 11, 11, 12,  //
                                          10, 11, 10, 11, 11, 12, 12, 13, 13, 14, 13, 14, 14, 15, 15, 15);
  const __m256i up = _mm256_setr_epi16(1024, 16, 64, 256, 1024, 16, 64, 256, 1024, 16, 64, 256, 1024, 16, 64, 256);
  const __m256i a = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(v, take_a), up), 10);
  const __m256i b = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(v, take_b), up), 10);
  return _mm256_packus_epi16(a, b);
}

// Q6_K, G groups x T tokens: per block b of 32 values and each of its two
// 16-value sub-blocks, the dot starts from the token's bias -32 * S16 and
// adds madd(maddubs(u, q), 1) over 4 steps (u <= 63: pairs <= 16002); i =
// s0 * i0 + s1 * i1 (vpmulld by the rows' int8 scales), then
// acc = fma(float(i), d * d_x, acc).
struct Q6_KAvx2 {
  static constexpr int64_t kCols = 256, kBytes = kQ6_KPackedBytes;
  // 3 accumulators per (half, token): two groups, or 3 tokens, would spill.
  static constexpr int kOneTokenGroups = 1, kMaxTokens = 2;
  template <int G, int T>
  static void Tile(const uint8_t* const* grp, const HalfRows* rows, int64_t ns, const Int8Activations& a, int64_t t0,
                   float* y, int64_t ldy) {
    constexpr int H = 2 * G;
    __m256 acc[H][T];
    Zero<H, T>(acc);
    const Int8Pair* xs[T];
    const int32_t* bias[T];
    for (int t = 0; t < T; ++t) {
      xs[t] = a.token(t0 + t);
      bias[t] = a.sub_bias.data() + (t0 + t) * a.subs;
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t s = 0; s < ns; ++s) {
#pragma GCC unroll 1
      for (int b = 0; b < 8; ++b) {
        const int64_t pair = 4 * s + b / 2;
        const int h = b & 1;
        __m256i ia[H][T];
#pragma GCC unroll 2
        for (int j = 0; j < 2; ++j) {
          __m256i ij[H][T];
          for (int t = 0; t < T; ++t) {
            const __m256i bi = _mm256_set1_epi32(bias[t][16 * s + 2 * b + j]);
            for (int hh = 0; hh < H; ++hh) ij[hh][t] = bi;
          }
#pragma GCC unroll 4
          for (int k = 4 * j; k < 4 * j + 4; ++k) {
#pragma GCC unroll 4
            for (int hh = 0; hh < H; ++hh) {
              const __m256i w = Unpack6Half(grp[hh / 2] + kBytes * s + 320 + 384 * b + 48 * k + 24 * (hh & 1));
#pragma GCC unroll 4
              for (int t = 0; t < T; ++t) {
                ij[hh][t] = _mm256_add_epi32(
                    ij[hh][t],
                    _mm256_madd_epi16(_mm256_maddubs_epi16(w, Broadcast4(xs[t][pair].q + 32 * h + 4 * k)), ones));
              }
            }
          }
#pragma GCC unroll 4
          for (int hh = 0; hh < H; ++hh) {
            const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(
                grp[hh / 2] + kBytes * s + 64 + 16 * (2 * b + j) + 8 * (hh & 1))));
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
              const __m256i p = _mm256_mullo_epi32(ij[hh][t], sc);
              ia[hh][t] = j == 0 ? p : _mm256_add_epi32(ia[hh][t], p);
            }
          }
        }
#pragma GCC unroll 4
        for (int hh = 0; hh < H; ++hh) {
          const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(grp[hh / 2] + kBytes * s) + 8 * (hh & 1));
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const __m256 sx = _mm256_mul_ps(d, _mm256_set1_ps(xs[t][pair].d[8 * h]));
            acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[hh][t]), sx, acc[hh][t]);
          }
        }
      }
    }
    Store<H, T>(acc, rows, y, ldy);
  }
};

// Every token group of a chunk of kStreamTokens tokens reads a tile's rows
// while they are in L1 / L2; the weights come from memory once per chunk.
constexpr int64_t kStreamTokens = 20;

template <class K, int G, int MaxT>
void Rows(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  const int64_t nb = w.cols / K::kCols, group_bytes = nb * K::kBytes;
  const int64_t g0 = r0 / kPackedRows, g1 = (r1 + kPackedRows - 1) / kPackedRows;
  for (int64_t t0 = 0; t0 < a.T; t0 += kStreamTokens) {
    const int64_t nt = std::min<int64_t>(kStreamTokens, a.T - t0);
    for (int64_t g = g0; g < g1; g += G) {
      const uint8_t* grp[G];
      HalfRows rows[2 * G];
      for (int j = 0; j < G; ++j) {
        const bool real = g + j < g1;
        const int64_t gj = real ? g + j : g;  // a short last tile repeats its first group, stores nothing
        grp[j] = w.packed + gj * group_bytes;
        const int64_t lo = std::max<int64_t>(r0, gj * kPackedRows) - gj * kPackedRows;
        const int64_t hi = std::min<int64_t>(r1, (gj + 1) * kPackedRows) - gj * kPackedRows;
        for (int half = 0; half < 2; ++half) {
          HalfRows& r = rows[2 * j + half];
          r.lo = static_cast<int>(std::clamp<int64_t>(lo - kHalfRows * half, 0, kHalfRows));
          r.hi = static_cast<int>(std::clamp<int64_t>(hi - kHalfRows * half, 0, kHalfRows));
          if (!real || r.hi < r.lo) r.lo = r.hi = 0;
        }
      }
      float* yg = y + g * kPackedRows;
      // Token groups as even as possible, each of at most MaxT.
      const int64_t parts = (nt + MaxT - 1) / MaxT;
      for (int64_t p = 0, t = 0; p < parts; ++p) {
        const int64_t size = (nt - t) / (parts - p);
        float* yt = yg + (t0 + t) * w.rows;
        if constexpr (MaxT >= 3) {
          if (size == 3) K::template Tile<G, 3>(grp, rows, nb, a, t0 + t, yt, w.rows);
        }
        if constexpr (MaxT >= 2) {
          if (size == 2) K::template Tile<G, 2>(grp, rows, nb, a, t0 + t, yt, w.rows);
        }
        if (size == 1) K::template Tile<G, 1>(grp, rows, nb, a, t0 + t, yt, w.rows);
        t += size;
      }
    }
  }
}

template <class K>
void Run(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  // One token: two groups (4 halves) in flight keep more loads going;
  // otherwise one group and token groups of up to K::kMaxTokens.
  if constexpr (K::kOneTokenGroups == 2) {
    if (a.T == 1) return Rows<K, 2, 1>(w, a, y, r0, r1);
  }
  Rows<K, 1, K::kMaxTokens>(w, a, y, r0, r1);
}

}  // namespace

void MatMulPackedAvx2(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  SPECSERVE_CHECK(w.packed != nullptr && PackableForInt8(w) && PackedAvx2Runs(w.type) && a.type == w.type &&
                  a.n == w.cols);
  if (a.T == 0 || r0 >= r1) return;
  switch (w.type) {
    case GgmlType::kQ8_0: return Run<Q8_0Avx2>(w, a, y, r0, r1);
    case GgmlType::kQ4_K: return Run<Q4_KAvx2>(w, a, y, r0, r1);
    default: return Run<Q6_KAvx2>(w, a, y, r0, r1);
  }
}

}  // namespace specserve::cpu

#pragma GCC pop_options
