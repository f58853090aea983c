// Passes of several tokens over packed Q8_0 and Q4_K matrices with Intel AMX
// (Advanced Matrix Extensions: eight 1 KiB tile registers and TDPBSUD, which
// multiplies a tile of up to 16 x 64 int8 by one of 16 x 64 uint8 into 16 x
// 16 int32 sums). The packed layouts (kernels/cpu_matmul_packed.h) are
// already what TDPBSUD takes as its second operand: a block's 8 rows of 64
// bytes, row k holding the 4 codes 4k .. 4k + 3 of each of 16 weight rows. So
// per 32-value block (Q8_0) or sub-block (Q4_K, its nibbles unpacked to bytes
// first) and group of 16 weight rows, one instruction makes the integer dots
// of all the pass's tokens (up to 16), where the VNNI kernel takes 8 vpdpbusd
// per token; the float epilogue is the VNNI kernel's, operation for operation
// (kernels/cpu_matmul_int8.h), so the bits are the same.
//
// Tiles: 0-3 the int32 sums of the 4 groups of a row tile (nt x 16), 4 the
// tokens' int8 values of one block (nt x 32 bytes, read in place from
// Int8Activations with the token stride), 5-6 the weight codes (8 x 64).
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/check.h"
#include "kernels/cpu_matmul_packed.h"

namespace specserve::cpu {
namespace {
// CPUID leaf 7 EDX: AMX-TILE (bit 24) and AMX-INT8 (bit 25); then Linux must
// let the process use the tile data state (ARCH_REQ_XCOMP_PERM, since 5.16),
// which is per process: asked once, before any tile instruction.
bool DetectAmxInt8() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 25)) == 0) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
}  // namespace

bool AmxInt8Runs() {
  static const bool runs = DetectAmxInt8();
  return runs;
}

bool PackedAmxRuns(GgmlType type) {
  return (type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K) && UseVnniInt8MatMul() && AmxInt8Runs();
}

}  // namespace specserve::cpu

// ---------------------------------------------------------------------------
// The kernels: compiled for AMX and AVX-512, only called after PackedAmxRuns.
#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("amx-tile,amx-int8,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c")

#include <immintrin.h>

#include "kernels/cpu_matmul_packed_units.h"

namespace specserve::cpu {
namespace {

constexpr int kGroups = 4;       // groups of 16 rows per row tile: tiles 0-3
constexpr int kTileTokens = 16;  // tokens per tile pass (a tile's rows)
constexpr int kStageBlocks = 4;  // 32-value blocks whose products are made before their epilogue

// The palette-1 tile configuration (64 bytes, as LDTILECFG reads it).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void ConfigureTiles(int nt) {
  TileConfig c;
  for (int i = 0; i < kGroups; ++i) {
    c.rows[i] = static_cast<uint8_t>(nt);
    c.colsb[i] = 64;
  }
  c.rows[4] = static_cast<uint8_t>(nt);
  c.colsb[4] = 32;
  c.rows[5] = c.rows[6] = 8;
  c.colsb[5] = c.colsb[6] = 64;
  _tile_loadconfig(&c);
}

// What a stage leaves for its epilogue: the int32 dots of each (block, group,
// token, row), dots[j][g][t][0..16).
struct alignas(64) StageDots {
  int32_t v[kStageBlocks][kGroups][kTileTokens][16];
};

// One block's dots: tokens' values from x (token t at x + t * x_stride, 32
// bytes), group g's codes from codes[g] (8 rows of 64 bytes), into dots[g].
inline void BlockDots(const void* x, int64_t x_stride, const uint8_t* const (&codes)[kGroups],
                      int32_t (&dots)[kGroups][kTileTokens][16]) {
  _tile_loadd(4, x, x_stride);
  _tile_zero(0);
  _tile_loadd(5, codes[0], 64);
  _tile_dpbsud(0, 4, 5);
  _tile_zero(1);
  _tile_loadd(6, codes[1], 64);
  _tile_dpbsud(1, 4, 6);
  _tile_zero(2);
  _tile_loadd(5, codes[2], 64);
  _tile_dpbsud(2, 4, 5);
  _tile_zero(3);
  _tile_loadd(6, codes[3], 64);
  _tile_dpbsud(3, 4, 6);
  _tile_stored(0, dots[0], 64);
  _tile_stored(1, dots[1], 64);
  _tile_stored(2, dots[2], 64);
  _tile_stored(3, dots[3], 64);
}

// A row tile's float sums for the tile pass's tokens, sums[g][t], in L1.
using Sums = __m512[kGroups][kTileTokens];

// Tokens t0 .. t0 + nt - 1 of a: where block b's 32 values of the first
// token are, and the stride to the next token's.
inline const uint8_t* BlockValues(const Int8Activations& a, int64_t t0, int64_t b) {
  return reinterpret_cast<const uint8_t*>(a.token(t0) + (b >> 1)) + 32 * (b & 1);
}
inline int64_t TokenStride(const Int8Activations& a) { return a.pairs * static_cast<int64_t>(sizeof(Int8Pair)); }

// Q8_0: per block, i = dot + bias (-128 S), acc = fma(float(i), d_w * d_x,
// acc): Q8_0Kernel's epilogue.
void Q8_0Row(const uint8_t* const (&grp)[kGroups], int64_t nb, const Int8Activations& a, int64_t t0, int nt,
             Sums& sums, StageDots& dots) {
  const int64_t stride = TokenStride(a);
  for (int64_t b0 = 0; b0 < nb; b0 += kStageBlocks) {
    const int n = static_cast<int>(std::min<int64_t>(kStageBlocks, nb - b0));
    for (int j = 0; j < n; ++j) {
      const int64_t b = b0 + j;
      const uint8_t* codes[kGroups];
      for (int g = 0; g < kGroups; ++g) codes[g] = grp[g] + kQ8_0PackedBytes * b + 32;
      BlockDots(BlockValues(a, t0, b), stride, codes, dots.v[j]);
    }
    for (int g = 0; g < kGroups; ++g) {
      __m512 sw[kStageBlocks];
      for (int j = 0; j < n; ++j) sw[j] = HalvesToFloats(grp[g] + kQ8_0PackedBytes * (b0 + j));
      for (int t = 0; t < nt; ++t) {
        const Int8Pair* x = a.token(t0 + t);
        const int32_t* bias = a.block_bias.data() + (t0 + t) * a.blocks;
        __m512 acc = sums[g][t];
        for (int j = 0; j < n; ++j) {
          const int64_t b = b0 + j;
          const __m512i i = _mm512_add_epi32(_mm512_load_si512(dots.v[j][g][t]), _mm512_set1_epi32(bias[b]));
          const __m512 s = _mm512_mul_ps(sw[j], _mm512_set1_ps(x[b >> 1].d[8 * (b & 1)]));
          acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), s, acc);
        }
        sums[g][t] = acc;
      }
    }
  }
}

// Q4_K, per half super-block (sub-blocks 4 half .. 4 half + 3, pairs 2 half
// and 2 half + 1): the nibbles unpacked to bytes (codes[pp][h][g][k]), the
// dots from zero, then acc = fma(float(i), (d * sc) * d_x, acc) and acc -=
// (dmin * m) * ms: Q4_KKernel::AddSubBlock's epilogue.
struct alignas(64) Q4Codes {
  uint8_t v[2][2][kGroups][8][64];
};
// (prefetch: the row tile comes from memory, this being its first tile
// pass: SpreadPrefetch over each half's 4 blocks' dots and nt G epilogues.)
void Q4_KRow(const uint8_t* const (&grp)[kGroups], int64_t ns, const Int8Activations& a, int64_t t0, int nt,
             bool prefetch, Sums& sums, StageDots& dots, Q4Codes& codes) {
  const int64_t stride = TokenStride(a);
  const __m512i low = _mm512_set1_epi8(0x0F);
  SpreadPrefetch<kGroups> ahead(grp, kQ4_KPackedBytes);
  for (int64_t s = 0; s < ns; ++s) {
    ahead.Plan(s, prefetch ? ns : 0, 2 * (4 + kGroups * nt));
    for (int half = 0; half < 2; ++half) {
      for (int pp = 0; pp < 2; ++pp) {
        const int p = 2 * half + pp;
        for (int g = 0; g < kGroups; ++g) {
          const uint8_t* q = grp[g] + kQ4_KPackedBytes * s + 320 + 512 * p;
          for (int k = 0; k < 8; ++k) {
            const __m512i w = _mm512_loadu_si512(q + 64 * k);
            _mm512_store_si512(codes.v[pp][0][g][k], _mm512_and_si512(w, low));
            _mm512_store_si512(codes.v[pp][1][g][k], _mm512_and_si512(_mm512_srli_epi16(w, 4), low));
          }
        }
      }
      // The tile loads read codes, which the compiler does not see.
      asm volatile("" ::: "memory");
      for (int jj = 0; jj < 4; ++jj) {
        const int pp = jj >> 1, h = jj & 1;
        const int64_t pair = 4 * s + 2 * half + pp;
        const uint8_t* from[kGroups];
        for (int g = 0; g < kGroups; ++g) from[g] = codes.v[pp][h][g][0];
        ahead.Step();
        BlockDots(BlockValues(a, t0, 2 * pair + h), stride, from, dots.v[jj]);
      }
      for (int g = 0; g < kGroups; ++g) {
        const uint8_t* base = grp[g] + kQ4_KPackedBytes * s;
        const __m512 d = HalvesToFloats(base), dmin = HalvesToFloats(base + 32);
        __m512 ws[4], m1[4];
        for (int jj = 0; jj < 4; ++jj) {
          const int j = 4 * half + jj;
          ws[jj] = _mm512_mul_ps(d, BytesToFloats(base + 64 + 16 * j));
          m1[jj] = _mm512_mul_ps(dmin, BytesToFloats(base + 192 + 16 * j));
        }
        for (int t = 0; t < nt; ++t) {
          ahead.Step();
          const Int8Pair* x = a.token(t0 + t);
          const Float16x& ms = a.token_ms(t0 + t)[s];
          __m512 acc = sums[g][t];
          for (int jj = 0; jj < 4; ++jj) {
            const int j = 4 * half + jj;
            const __m512 sc = _mm512_mul_ps(ws[jj], _mm512_set1_ps(x[4 * s + (j >> 1)].d[8 * (j & 1)]));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(dots.v[jj][g][t])), sc, acc);
            acc = _mm512_fnmadd_ps(m1[jj], _mm512_set1_ps(ms.v[8 + j]), acc);
          }
          sums[g][t] = acc;
        }
      }
    }
  }
}

}  // namespace

void MatMulPackedAmx(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  SPECSERVE_CHECK(w.packed != nullptr && PackableForInt8(w) && PackedAmxRuns(w.type) && a.type == w.type &&
                  a.n == w.cols);
  if (a.T == 0 || r0 >= r1) return;
  const bool q8 = w.type == GgmlType::kQ8_0;
  const int64_t nu = q8 ? w.cols / 32 : w.cols / 256;
  const int64_t group_bytes = nu * (q8 ? kQ8_0PackedBytes : kQ4_KPackedBytes);
  const int64_t g0 = r0 / kPackedRows, g1 = (r1 + kPackedRows - 1) / kPackedRows;
  // Tile passes of sizes as even as they go; a row tile stays in L2 while
  // every pass reads it (the first from memory).
  const int64_t passes = (a.T + kTileTokens - 1) / kTileTokens;
  Sums sums;
  StageDots dots;
  Q4Codes codes;
  int configured = 0;
  for (int64_t g = g0; g < g1; g += kGroups) {
    const uint8_t* grp[kGroups];
    __mmask16 masks[kGroups];
    TileGroups<kGroups>(w.packed, group_bytes, g, g1, r0, r1, grp, masks);
    for (int64_t p = 0, t0 = 0; p < passes; ++p) {
      const int nt = static_cast<int>((a.T - t0) / (passes - p));
      if (nt != configured) {
        ConfigureTiles(nt);
        configured = nt;
      }
      for (int j = 0; j < kGroups; ++j)
        for (int t = 0; t < nt; ++t) sums[j][t] = _mm512_setzero_ps();
      if (q8) {
        Q8_0Row(grp, nu, a, t0, nt, sums, dots);
      } else {
        Q4_KRow(grp, nu, a, t0, nt, p == 0 && passes <= 2, sums, dots, codes);
      }
      float* yt = y + t0 * w.rows + g * kPackedRows;
      for (int j = 0; j < kGroups; ++j)
        for (int t = 0; t < nt; ++t) _mm512_mask_storeu_ps(yt + t * w.rows + kPackedRows * j, masks[j], sums[j][t]);
      t0 += nt;
    }
  }
  // Leave no tile state behind: a thread holding it saves 8 KiB more on every
  // context switch.
  _tile_release();
}

}  // namespace specserve::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
