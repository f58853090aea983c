// Y = X W^T for f16 weights on the device and fp32 activations.
// CPU reference: MatMul (kernels/cpu_matmul.h).
//
// Passes of at most kFixedOrderMaxTokens tokens (decode, verify) run a
// fixed-order fp32 kernel of this folder, batch-invariant: every output
// element is summed in an order fixed by the width alone
// (kernels/matmul_plan.h). Larger passes go through cuBLAS (cublasGemmEx:
// f16 operands, fp32 accumulation and output), as follows.
//
// cublasGemmEx needs both operands in one type, so the fp32 activations are
// converted per call. kSplitF16 (the default) sends x as two f16 halves,
// x = hi + lo with hi = f16(x) and lo = f16(x - hi), stacked as 2T columns of
// one GEMM, and adds the two results: about 21 bits of x survive instead of
// 11, for twice the (cheap) arithmetic and the same weight reads, so a decode
// or verify pass, which is bound by reading the weights, costs about the same.
// kF16 rounds x to f16 once (the usual inference trade, llama.cpp's cuBLAS
// path). Each row of x is first scaled by a power of two that puts its
// largest entry in [2^14, 2^15) and the output row scaled back (exact), so
// no finite activation overflows f16.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace specserve::cuda {

enum class MatmulPrecision { kSplitF16, kF16 };

struct MatmulArgs {
  const void* w = nullptr;   // [rows, cols] device, f16 bits, row-major
  int64_t rows = 0;
  int64_t cols = 0;
  const float* x = nullptr;  // [T, cols] device
  int64_t T = 0;
  float* y = nullptr;        // [T, rows] device; must not alias x
  bool accumulate = false;   // y += X W^T (a residual add folded in) instead of y = X W^T
  // The workspace already holds this x converted by the previous call (same
  // x, T, cols and precision): skip the conversion (q/k/v and gate/up share
  // their input).
  bool reuse_converted_x = false;
  MatmulPrecision precision = MatmulPrecision::kSplitF16;
  void* workspace = nullptr; // >= MatmulWorkspaceBytes(T, rows, cols, precision) bytes, device (0 for small T)
  size_t workspace_bytes = 0;
  cublasHandle_t handle = nullptr;  // needed above kFixedOrderMaxTokens
};

size_t MatmulWorkspaceBytes(int64_t T, int64_t rows, int64_t cols, MatmulPrecision precision);

absl::Status LaunchMatmul(const MatmulArgs& a, cudaStream_t stream);

// INTERNAL naming `what` unless CUBLAS_STATUS_SUCCESS.
absl::Status CublasStatus(cublasStatus_t s, const char* what);

}  // namespace specserve::cuda
