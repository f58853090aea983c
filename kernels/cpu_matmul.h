// Y = X W^T on the CPU for weights in any supported ggml type, reading the
// weights in place from the mapped file.
#pragma once

#include <cstdint>

#include "common/matmul_activations.h"
#include "common/thread_pool.h"
#include "common/weights.h"

namespace specserve {

// y: [T, w.rows] = x: [T, w.cols] times w^T. Rows are split across the pool.
// Each weight row is read once per call whatever T is (a verify pass of K+1
// tokens costs about what one decode token costs, which is the point).
// `activations` (common/matmul_activations.h): kInt8 quantizes x per token
// and uses integer dot products where the weight type has them
// (kernels/cpu_matmul_int8.h), fp32 otherwise.
void MatMul(const MatrixView& w, const float* x, int64_t T, float* y, ThreadPool& pool,
            MatMulActivations activations = MatMulActivations::kFp32);

// One row of w, widened to fp32 (embedding lookup).
void DequantizeMatrixRow(const MatrixView& w, int64_t r, float* out);

}  // namespace specserve
