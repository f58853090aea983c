// Q8_0 weights repacked for the int8 kernel: 16 rows interleaved so that one
// zmm register holds 4 consecutive codes of each of 16 rows, and one vpdpbusd
// against a token's 4 activations (broadcast) advances all 16 rows' integer
// dot products. A row's block dot is then whole in one lane, so the float
// work (convert, scale, accumulate) is done once per 32 values instead of
// once per 4, and the matrix streams from memory as one sequential run per
// 16 rows.
//
// Layout (PackQ8_0), per group g of 16 rows (rows 16g .. 16g + 15; rows past
// w.rows are zero), per block b of 32 columns, kPackedBlockBytes bytes:
//   f16 d[16]           the 16 rows' block scales, row order
//   u8  u[8][16][4]     u[k][l][j] = qs of row 16g + l, value 32b + 4k + j,
//                       plus 128 (the code the kernel multiplies, 0..255)
// Groups follow each other; a group is n / 32 blocks.
//
// Numerics: kernels/cpu_matmul_int8.h (the Q8_0 contract).
#pragma once

#include <cstdint>

#include "common/weights.h"
#include "kernels/cpu_matmul_int8.h"

namespace specserve::cpu {

constexpr int64_t kPackedRows = 16;
constexpr int64_t kPackedBlockBytes = 32 + 8 * 64;

// Bytes PackQ8_0 writes for a [rows, cols] Q8_0 matrix (cols % 32 == 0).
int64_t PackedQ8_0Bytes(int64_t rows, int64_t cols);

// Writes w (Q8_0, cols % 32 == 0) in the layout above to out[0 ..
// PackedQ8_0Bytes). Portable code; out needs no alignment.
void PackQ8_0(const MatrixView& w, uint8_t* out);

// y[t, r] for r in [r0, r1) from w.packed (AVX-512 VNNI; only call when
// UseVnniInt8MatMul()). r0 and r1 need not be multiples of 16.
void MatMulQ8_0PackedVnni(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1);

}  // namespace specserve::cpu
