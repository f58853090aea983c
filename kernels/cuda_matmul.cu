#include "kernels/cuda_matmul.cuh"

#include <cuda_fp16.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda_util.h"
#include "kernels/matmul_plan.h"

namespace specserve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

size_t Align256(size_t b) { return (b + 255) / 256 * 256; }

// scale[t] = 2^SplitScaleExponent(max_t |x[t, :]|), inv[t] its inverse: one
// block per row (kernels/matmul_plan.h: puts the row's largest entry in
// [2^14, 2^15), inside f16's range).
__global__ void RowScaleKernel(const float* __restrict__ x, int64_t cols, float* __restrict__ scale,
                               float* __restrict__ inv) {
  __shared__ float part[kThreads];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  float m = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, fabsf(row[c]));  // NaN ignored
  part[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const int e = SplitScaleExponent(part[0]);
    scale[blockIdx.x] = ldexpf(1.0f, e);
    inv[blockIdx.x] = ldexpf(1.0f, -e);
  }
}

// x [T, cols] fp32 -> x16 [parts * T, cols] of x scaled by its row's power
// of two: rows [0, T) hold hi = f16(s x), rows [T, 2T) (split only) hold
// lo = f16(s x - hi).
__global__ void SplitToHalfKernel(const float* __restrict__ x, const float* __restrict__ scale, int64_t cols,
                                  __half* __restrict__ x16, int64_t n, bool split) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i] * scale[i / cols];  // exact: a power of two
    const __half hi = __float2half_rn(v);
    x16[i] = hi;
    if (split) x16[n + i] = __float2half_rn(v - __half2float(hi));
  }
}

// y = (accumulate ? y : 0) + (y2[0:T] (+ y2[T:2T] when split)) / s per row,
// all [T, rows].
__global__ void CombineKernel(const float* __restrict__ y2, const float* __restrict__ inv, int64_t rows,
                              float* __restrict__ y, int64_t n, bool split, bool accumulate) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = (split ? y2[i] + y2[n + i] : y2[i]) * inv[i / rows];
    y[i] = accumulate ? y[i] + v : v;
  }
}

// The fixed-order product for passes of few tokens (kernels/matmul_plan.h):
// y[t, r] (+)= sum_c W[r, c] x[t, c] in fp32 with f16 weights widened
// exactly. Warp w of a block owns row r; lane l sums the columns
// c = 2l + 64j (pairs; c = l + 32j for odd widths), j ascending, with fmaf
// per token; lane 0 then adds the 32 lane sums by a xor butterfly
// (16, 8, 4, 2, 1). That order depends on cols alone: never on T, on the
// token's place in the pass, or on the other sequences of the batch.
constexpr int kFixedWarps = 8;  // rows per block
constexpr int kFixedTokens = 8; // tokens per sweep of a row (grid.y sweeps)

template <bool kPairs>
__global__ void __launch_bounds__(kFixedWarps * 32)
    FixedOrderMatmulKernel(const __half* __restrict__ w, int64_t rows, int64_t cols, const float* __restrict__ x,
                           int64_t T, float* __restrict__ y, bool accumulate) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kFixedWarps + warp;
  if (r >= rows) return;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kFixedTokens;
  const int nt = static_cast<int>(min(static_cast<int64_t>(kFixedTokens), T - t0));
  float acc[kFixedTokens];
#pragma unroll
  for (int j = 0; j < kFixedTokens; ++j) acc[j] = 0.0f;
  const __half* wr = w + r * cols;
  const float* xt = x + t0 * cols;
  if (kPairs) {
    const __half2* w2 = reinterpret_cast<const __half2*>(wr);
    const int64_t n2 = cols / 2;
#pragma unroll 4
    for (int64_t c2 = lane; c2 < n2; c2 += 32) {
      const float2 wv = __half22float2(w2[c2]);
#pragma unroll
      for (int j = 0; j < kFixedTokens; ++j) {
        if (j < nt) {
          const float2 xv = reinterpret_cast<const float2*>(xt + j * cols)[c2];
          acc[j] = fmaf(wv.x, xv.x, acc[j]);
          acc[j] = fmaf(wv.y, xv.y, acc[j]);
        }
      }
    }
  } else {
#pragma unroll 4
    for (int64_t c = lane; c < cols; c += 32) {
      const float wv = __half2float(wr[c]);
#pragma unroll
      for (int j = 0; j < kFixedTokens; ++j) {
        if (j < nt) acc[j] = fmaf(wv, xt[j * cols + c], acc[j]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kFixedTokens; ++j) {
    float v = acc[j];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && j < nt) {
      float* out = y + (t0 + j) * rows + r;
      *out = accumulate ? *out + v : v;
    }
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

// Workspace: [T] scales and [T] inverses, then x16 [parts * T, cols], then
// the GEMM's output [parts * T, rows] (each section 256-byte aligned; the
// first two depend on T and cols only, so a reused conversion is found).
struct MatmulLayout {
  size_t scale, inv, x16, out, total;
};

static MatmulLayout Layout(int64_t T, int64_t rows, int64_t cols, MatmulPrecision precision) {
  const int64_t parts = precision == MatmulPrecision::kSplitF16 ? 2 : 1;
  MatmulLayout l;
  l.scale = 0;
  l.inv = Align256(static_cast<size_t>(T) * sizeof(float));
  l.x16 = l.inv + Align256(static_cast<size_t>(T) * sizeof(float));
  l.out = l.x16 + Align256(static_cast<size_t>(parts * T * cols) * sizeof(__half));
  l.total = l.out + static_cast<size_t>(parts * T * rows) * sizeof(float);
  return l;
}

size_t MatmulWorkspaceBytes(int64_t T, int64_t rows, int64_t cols, MatmulPrecision precision) {
  if (T <= 0) return 0;
  if (UseFixedOrderMatmul(T)) return 0;
  return Layout(T, rows, cols, precision).total;
}

absl::Status LaunchMatmul(const MatmulArgs& a, cudaStream_t stream) {
  constexpr int64_t kIntMax = 0x7fffffff;
  const bool split = a.precision == MatmulPrecision::kSplitF16;
  if (a.T < 0 || a.rows < 1 || a.cols < 1 || a.rows > kIntMax || a.cols > kIntMax ||
      2 * a.T > kIntMax) {
    return absl::InvalidArgumentError("matmul: bad shape");
  }
  if (a.T == 0) return absl::OkStatus();
  if (a.w == nullptr || a.x == nullptr || a.y == nullptr) {
    return absl::InvalidArgumentError("matmul: null pointer");
  }
  if (UseFixedOrderMatmul(a.T)) {
    const dim3 grid(static_cast<unsigned>((a.rows + kFixedWarps - 1) / kFixedWarps),
                    static_cast<unsigned>((a.T + kFixedTokens - 1) / kFixedTokens));
    if (grid.x > kIntMax) return absl::InvalidArgumentError("matmul: too many rows");
    const __half* w = static_cast<const __half*>(a.w);
    if (a.cols % 2 == 0) {
      FixedOrderMatmulKernel<true><<<grid, kFixedWarps * 32, 0, stream>>>(w, a.rows, a.cols, a.x, a.T, a.y,
                                                                          a.accumulate);
    } else {
      FixedOrderMatmulKernel<false><<<grid, kFixedWarps * 32, 0, stream>>>(w, a.rows, a.cols, a.x, a.T, a.y,
                                                                           a.accumulate);
    }
    return CheckLaunch("FixedOrderMatmulKernel");
  }
  if (a.handle == nullptr) return absl::InvalidArgumentError("matmul: null cuBLAS handle");
  const MatmulLayout l = Layout(a.T, a.rows, a.cols, a.precision);
  if (a.workspace == nullptr || a.workspace_bytes < l.total) {
    return absl::InvalidArgumentError("matmul: workspace too small");
  }
  char* ws = static_cast<char*>(a.workspace);
  float* scale = reinterpret_cast<float*>(ws + l.scale);
  float* inv = reinterpret_cast<float*>(ws + l.inv);
  __half* x16 = reinterpret_cast<__half*>(ws + l.x16);
  float* out = reinterpret_cast<float*>(ws + l.out);
  const int64_t n_in = a.T * a.cols;
  if (!a.reuse_converted_x) {
    RowScaleKernel<<<static_cast<unsigned>(a.T), kThreads, 0, stream>>>(a.x, a.cols, scale, inv);
    RETURN_IF_ERROR(CheckLaunch("RowScaleKernel"));
    SplitToHalfKernel<<<Blocks(n_in), kThreads, 0, stream>>>(a.x, scale, a.cols, x16, n_in, split);
    RETURN_IF_ERROR(CheckLaunch("SplitToHalfKernel"));
  }
  RETURN_IF_ERROR(CublasStatus(cublasSetStream(a.handle, stream), "cublasSetStream"));
  const int parts = split ? 2 : 1;
  const float alpha = 1.0f, beta = 0.0f;
  // Column-major view: W (row-major [rows, cols]) is a cols x rows matrix, so
  // op(A) = A^T; X is cols x (parts*T); the result is rows x (parts*T), i.e.
  // row-major [parts*T, rows].
  RETURN_IF_ERROR(CublasStatus(
      cublasGemmEx(a.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(a.rows),
                   static_cast<int>(parts * a.T), static_cast<int>(a.cols), &alpha, a.w, CUDA_R_16F,
                   static_cast<int>(a.cols), x16, CUDA_R_16F, static_cast<int>(a.cols), &beta, out,
                   CUDA_R_32F, static_cast<int>(a.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx"));
  const int64_t n_out = a.T * a.rows;
  CombineKernel<<<Blocks(n_out), kThreads, 0, stream>>>(out, inv, a.rows, a.y, n_out, split, a.accumulate);
  return CheckLaunch("CombineKernel");
}

}  // namespace specserve::cuda
