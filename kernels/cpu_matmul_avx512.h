// Y = X W^T for passes of any number of tokens with AVX-512, weights read in
// place: every weight block is read from memory once per 16 tokens and
// widened to fp32 in registers, then multiplied into all of the pass's
// tokens (kernels/cpu_matmul_avx512.cc). Used by MatMul (kernels/cpu_matmul.h)
// when the CPU has AVX-512 F/BW/DQ/VL, which is checked at run time.
//
// Numerics: fp32 products of exactly the values ggml dequantizes, summed in
// 16 lanes over the row in column order, then lane-reduced in a fixed order.
// The order does not depend on the number of tokens in the pass, the rows
// grouped with a row or the thread that runs it, so a verify pass of K+1
// tokens gives each token the bits one-token decoding gives it.
//
// These are the default (--cpu-activations fp32). int8 activations, as
// llama.cpp uses, are opt-in (kernels/cpu_matmul_int8.h): faster, but they
// move the logits by up to ~0.26 on the bundled quantized models
// (docs/performance_model.md).
#pragma once

#include <cstdint>

#include "common/weights.h"

namespace specserve::cpu {

// True when this CPU runs the AVX-512 kernels (and SPECSERVE_CPU_KERNELS is
// not "avx2", which forces the AVX2 path for comparisons).
bool UseAvx512MatMul();

// True when MatMulRowsAvx512 takes this matrix: F32, F16, Q8_0, Q5_0, Q4_K
// or Q6_K with w.cols a multiple of 32.
bool Avx512MatMulSupports(const MatrixView& w);

// y[t, r] = dot(row r of w, x[t, :]) for r in [r0, r1), t in [0, T), with
// y: [T, w.rows] and x: [T, w.cols]. Requires Avx512MatMulSupports(w).
void MatMulRowsAvx512(const MatrixView& w, const float* x, int64_t T, float* y, int64_t r0, int64_t r1);

}  // namespace specserve::cpu
