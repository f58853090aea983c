#include "kernels/cuda_matmul.cuh"

#include <cuda_fp16.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda_util.h"

namespace specserve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

size_t Align256(size_t b) { return (b + 255) / 256 * 256; }

// x [T, cols] fp32 -> x16 [parts * T, cols]: rows [0, T) hold hi = f16(x),
// rows [T, 2T) (split only) hold lo = f16(x - hi).
__global__ void SplitToHalfKernel(const float* __restrict__ x, __half* __restrict__ x16,
                                  int64_t n, bool split) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    const __half hi = __float2half_rn(v);
    x16[i] = hi;
    if (split) x16[n + i] = __float2half_rn(v - __half2float(hi));
  }
}

// y = (accumulate ? y : 0) + y2[0:T] + y2[T:2T], all [T, rows].
__global__ void CombineKernel(const float* __restrict__ y2, float* __restrict__ y, int64_t n,
                              bool accumulate) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = y2[i] + y2[n + i];
    y[i] = accumulate ? y[i] + v : v;
  }
}

unsigned Blocks(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

}  // namespace

absl::Status CublasStatus(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": ", cublasGetStatusName(s), " (", cublasGetStatusString(s), ")");
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

size_t MatmulWorkspaceBytes(int64_t T, int64_t rows, int64_t cols, MatmulPrecision precision) {
  if (T <= 0) return 0;
  const int64_t parts = precision == MatmulPrecision::kSplitF16 ? 2 : 1;
  size_t b = Align256(static_cast<size_t>(parts * T * cols) * sizeof(__half));
  if (precision == MatmulPrecision::kSplitF16) b += static_cast<size_t>(2 * T * rows) * sizeof(float);
  return b;
}

absl::Status LaunchMatmul(const MatmulArgs& a, cudaStream_t stream) {
  constexpr int64_t kIntMax = 0x7fffffff;
  const bool split = a.precision == MatmulPrecision::kSplitF16;
  if (a.T < 0 || a.rows < 1 || a.cols < 1 || a.rows > kIntMax || a.cols > kIntMax ||
      2 * a.T > kIntMax) {
    return absl::InvalidArgumentError("matmul: bad shape");
  }
  if (a.T == 0) return absl::OkStatus();
  if (a.w == nullptr || a.x == nullptr || a.y == nullptr || a.handle == nullptr) {
    return absl::InvalidArgumentError("matmul: null pointer or cuBLAS handle");
  }
  if (a.workspace == nullptr || a.workspace_bytes < MatmulWorkspaceBytes(a.T, a.rows, a.cols, a.precision)) {
    return absl::InvalidArgumentError("matmul: workspace too small");
  }
  const int64_t n_in = a.T * a.cols;
  __half* x16 = static_cast<__half*>(a.workspace);
  if (!a.reuse_converted_x) {
    SplitToHalfKernel<<<Blocks(n_in), kThreads, 0, stream>>>(a.x, x16, n_in, split);
    RETURN_IF_ERROR(CheckLaunch("SplitToHalfKernel"));
  }
  RETURN_IF_ERROR(CublasStatus(cublasSetStream(a.handle, stream), "cublasSetStream"));
  const int parts = split ? 2 : 1;
  float* out = a.y;
  float beta = a.accumulate ? 1.0f : 0.0f;
  if (split) {
    out = reinterpret_cast<float*>(static_cast<char*>(a.workspace) +
                                   Align256(static_cast<size_t>(2 * n_in) * sizeof(__half)));
    beta = 0.0f;
  }
  const float alpha = 1.0f;
  // Column-major view: W (row-major [rows, cols]) is a cols x rows matrix, so
  // op(A) = A^T; X is cols x (parts*T); the result is rows x (parts*T), i.e.
  // row-major [parts*T, rows].
  RETURN_IF_ERROR(CublasStatus(
      cublasGemmEx(a.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(a.rows),
                   static_cast<int>(parts * a.T), static_cast<int>(a.cols), &alpha, a.w, CUDA_R_16F,
                   static_cast<int>(a.cols), x16, CUDA_R_16F, static_cast<int>(a.cols), &beta, out,
                   CUDA_R_32F, static_cast<int>(a.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx"));
  if (!split) return absl::OkStatus();
  const int64_t n_out = a.T * a.rows;
  CombineKernel<<<Blocks(n_out), kThreads, 0, stream>>>(out, a.y, n_out, a.accumulate);
  return CheckLaunch("CombineKernel");
}

}  // namespace specserve::cuda
