// Quantized weight rows read in place from the mapped file (AVX2 + FMA +
// F16C, the project's CPU floor): a Q8_0 product that widens blocks in
// registers, and fast row dequantizers for the K-quant mix of Q4_K_M files.
#pragma once

#include <cstdint>

#include "common/weights.h"

namespace specserve {

// y[t, r] = dot(row r of w, x[t, :]) for r in [r0, r1), t in [0, T), with
// y: [T, w.rows] and x: [T, w.cols]; w.type must be Q8_0 (w.cols a multiple
// of 32). Each block's 32 int8 values are widened and scaled in registers
// (d * q, as ggml dequantizes) and reused for up to 3 tokens at a time, so the result
// is bit-identical to dequantizing the row and taking fp32 dot products in
// the same order, and the weights are read at 34 bytes per 32 values.
void MatMulQ8_0Rows(const MatrixView& w, const float* x, int64_t T, float* y, int64_t r0,
                    int64_t r1);

// dst[0..n) = one row dequantized, bit-identical to DequantizeRow (the same
// float operations in the same order) but vectorised for Q8_0, Q5_0, Q4_K and
// Q6_K; other types go to DequantizeRow. n is a multiple of the block size.
void DequantizeRowFast(GgmlType t, const uint8_t* src, float* dst, int64_t n);

}  // namespace specserve
