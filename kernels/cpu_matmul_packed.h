// Q8_0, Q4_K and Q6_K weights repacked for the int8 kernel: 16 rows interleaved so
// that one zmm register holds 4 consecutive codes of each of 16 rows, and one
// vpdpbusd against a token's 4 activations (broadcast) advances all 16 rows'
// integer dot products. A row's block dot is then whole in one lane, so the
// float work (convert, scale, accumulate) is done once per 32 values instead
// of once per 4, and the matrix streams from memory as one sequential run per
// 16 rows. The CPU backend packs every such matrix once at load
// (backends/cpu_packed_weights.h) and sets MatrixView::packed.
//
// Layouts, per group g of 16 rows (rows 16g .. 16g + 15; rows past w.rows are
// zero); groups follow each other:
//
// Q8_0, per block b of 32 columns, kQ8_0PackedBytes bytes:
//   f16 d[16]           the 16 rows' block scales, row order
//   u8  u[8][16][4]     u[k][l][j] = qs of row 16g + l, value 32b + 4k + j,
//                       plus 128 (the code the kernel multiplies, 0..255)
//
// Q4_K, per super-block s of 256 columns, kQ4_KPackedBytes bytes:
//   f16 d[16], dmin[16]   the 16 rows' super-block scales
//   u8  sc[8][16]         sc[j][l]: the 6-bit scale of sub-block j, row l
//   u8  m[8][16]          the 6-bit mins, likewise
//   u8  q[4][8][16][4]    q[p][k][l][j]: low nibble value 32 (2p) + 4k + j of
//                         row l, high nibble value 32 (2p + 1) + 4k + j
//
// Q6_K, per super-block s of 256 columns, kQ6_KPackedBytes bytes:
//   f32 d[16]             the 16 rows' super-block scales (f16 -> fp32)
//   i8  sc[16][16]        sc[j][l]: the scale of sub-block j (16 values), row l
//   u8  u[8][8][48]       u[b][k]: the 64 6-bit codes (0..63) c[4l + j] =
//                         value 32b + 4k + j of row l, 8 per 6 bytes: c[m]
//                         at bits 6 (m % 8) of the little-endian 48-bit word
//                         at byte 6 (m / 8). 212 bytes per row and 256
//                         values (the file's 210); the kernel unpacks a chunk
//                         to 64 bytes in 3 instructions. (One byte per code,
//                         276 bytes, needed no unpacking but was 15-20%
//                         slower for one token, reading 31% more.)
//
// Numerics: kernels/cpu_matmul_int8.h (the Q8_0, Q4_K and Q6_K contracts).
#pragma once

#include <cstdint>

#include "common/weights.h"
#include "kernels/cpu_matmul_int8.h"

namespace specserve::cpu {

constexpr int64_t kPackedRows = 16;
constexpr int64_t kQ8_0PackedBytes = 32 + 8 * 64;
constexpr int64_t kQ4_KPackedBytes = 64 + 2 * 128 + 4 * 8 * 64;
constexpr int64_t kQ6_KPackedBytes = 64 + 256 + 8 * 8 * 48;  // 3392, 53 cache lines

// True for the types PackForInt8 takes (Q8_0, Q4_K, Q6_K) when w.cols fits them.
bool PackableForInt8(const MatrixView& w);

// Bytes PackForInt8 writes for w.
int64_t PackedBytes(const MatrixView& w);

// Writes w (PackableForInt8) in its layout above to out[0 .. PackedBytes).
// Portable code; out needs no alignment.
void PackForInt8(const MatrixView& w, uint8_t* out);

// True when MatMulPackedVnni runs w's type on this CPU: UseVnniInt8MatMul(),
// and for Q6_K (whose kernel unpacks 6-bit codes with vpermb and
// vpmultishiftqb) AVX-512 VBMI too. Elsewhere the portable kernel runs it
// (the same bits) and the backend leaves it unpacked.
bool PackedVnniRuns(GgmlType type);

// y[t, r] for r in [r0, r1) from w.packed (only call when
// PackedVnniRuns(w.type)). r0 and r1 need not be multiples of 16.
void MatMulPackedVnni(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1);

// How MatMulPackedVnni reads a row tile (64 rows) for a pass of 4 to 20
// tokens. All give the same bits (each (row, token) sum in the contract's
// order), only the speed differs, and which is faster depends on the CPU:
//   kUnitSweep        the tile is read once, a unit (32 or 256 columns) at a
//                     time, each unit going to every token group of <= 3
//                     while it is in L1; the float sums live in L1 between
//                     units (Q4_K and Q6_K units of 4+ groups unpacked once).
//   kTokenGroupTiles  each token group runs the whole tile with its sums in
//                     registers: the first group (Q8_0: up to 5 tokens, with
//                     software prefetch; else up to 3) reads the tile from
//                     memory, the others (<= 3 tokens) from L2.
//   kAmxTiles         Q8_0 and Q4_K passes of AmxMinTokens(type) or more run
//                     MatMulPackedAmx (up to 16 tokens per tile pass); Q6_K
//                     and smaller passes as kUnitSweep. Only where
//                     PackedAmxRuns.
// Which order is the faster depends on the core: the sweep on the Intel
// VNNI cores measured, the tiles on the AMD ones, at every width from 4
// tokens (docs/decisions/0001-wide-pass-order.md). Chosen once per
// process: SPECSERVE_CPU_WIDE_PASS=amx|sweep|tiles when set, else AMX where
// it runs, the tiles on AMD CPUs and the sweep elsewhere.
enum class PackedWidePass { kUnitSweep, kTokenGroupTiles, kAmxTiles };
PackedWidePass CurrentPackedWidePass();
// Overrides the choice for the process (tests, benchmarks); takes effect for
// passes started after it. kAmxTiles only where AmxInt8Runs().
void SetPackedWidePass(PackedWidePass order);

// Whether Q8_0's token-group tiles of 2-5 tokens prefetch ahead (decided
// once per process from the CPU; SPECSERVE_CPU_TILE_PREFETCH=0|1 overrides).
bool PackedTilePrefetch();

// True when the CPU has AMX-TILE and AMX-INT8 and the OS lets this process
// use the tiles (Linux: arch_prctl ARCH_REQ_XCOMP_PERM, asked on the first
// call).
bool AmxInt8Runs();

// True when MatMulPackedAmx runs w's type: Q8_0 or Q4_K, AmxInt8Runs() and
// UseVnniInt8MatMul() (its float epilogue is the VNNI kernel's).
bool PackedAmxRuns(GgmlType type);

// Passes of at least AmxMinTokens(type) tokens take MatMulPackedAmx under
// kAmxTiles (Q8_0: prefill chunks; Q4_K: also verify passes of 7+ tokens;
// smaller passes stay on the VNNI kernel). A tile pass costs about the same
// for 2 tokens as for 16: each block's int32 dots go through a tile store
// before the float epilogue, and the tiles are not renamed, so the stores and
// the next block's products wait on each other. So AMX takes a pass only
// from the width where it beats the VNNI sweep: 32 tokens for Q8_0, 7 for
// Q4_K, whose sweep spends a vpmulld per sub-block, token and group besides
// the dots, which AMX's epilogue does in floats once per tile pass
// (docs/decisions/0003-amx-pass-widths.md).
constexpr int64_t kAmxMinTokensQ8_0 = 32;
constexpr int64_t kAmxMinTokensQ4_K = 7;
constexpr int64_t AmxMinTokens(GgmlType type) {
  return type == GgmlType::kQ4_K ? kAmxMinTokensQ4_K : kAmxMinTokensQ8_0;
}

// The same products as MatMulPackedVnni, the same bits, with AMX tiles
// (kernels/cpu_matmul_packed_amx.cc; only call when PackedAmxRuns(w.type)).
void MatMulPackedAmx(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1);

// True when MatMulPackedAvx2 runs w's type on this CPU: AVX2, FMA and F16C,
// for Q8_0, Q4_K and Q6_K (kernels/cpu_matmul_packed_avx2.cc; it runs on
// AVX-512 CPUs too, which tests use).
bool PackedAvx2Runs(GgmlType type);

// The same products as MatMulPackedVnni, the same bits, with AVX2 (only call
// when PackedAvx2Runs(w.type)).
void MatMulPackedAvx2(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1);

// True when MatMulInt8Rows runs a packed kernel for `type` on this CPU: the
// VNNI one where the CPU has VNNI (PackedVnniRuns), else the AVX2 one. The
// CPU backend packs exactly these types.
bool PackedKernelRuns(GgmlType type);

}  // namespace specserve::cpu
