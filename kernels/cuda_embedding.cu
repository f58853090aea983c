#include "kernels/cuda_embedding.cuh"

#include <cuda_fp16.h>

#include <cmath>

#include "kernels/cuda_util.h"

namespace specserve::cuda {
namespace {

constexpr int kThreads = 256;

template <typename W>
__device__ __forceinline__ float Widen(W v);
template <>
__device__ __forceinline__ float Widen(float v) { return v; }
template <>
__device__ __forceinline__ float Widen(__half v) { return __half2float(v); }

// One block per token.
template <typename W>
__global__ void EmbeddingKernel(const W* __restrict__ table, int64_t rows, int64_t cols,
                                const int32_t* __restrict__ ids, float* __restrict__ out) {
  const int32_t id = ids[blockIdx.x];
  float* o = out + blockIdx.x * cols;
  if (id < 0 || id >= rows) {
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) o[i] = NAN;
    return;
  }
  const W* r = table + static_cast<int64_t>(id) * cols;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) o[i] = Widen(r[i]);
}

}  // namespace

absl::Status LaunchEmbedding(const EmbeddingArgs& a, cudaStream_t stream) {
  if (a.T < 0 || a.rows < 1 || a.cols < 1 || a.T > 0x7fffffff) {
    return absl::InvalidArgumentError("embedding: bad shape");
  }
  if (a.type != GgmlType::kF16 && a.type != GgmlType::kF32) {
    return absl::UnimplementedError("embedding: the device table must be F16 or F32");
  }
  if (a.T == 0) return absl::OkStatus();
  if (a.table == nullptr || a.ids == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("embedding: null pointer");
  }
  const unsigned blocks = static_cast<unsigned>(a.T);
  if (a.type == GgmlType::kF16) {
    EmbeddingKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(a.table), a.rows,
                                                     a.cols, a.ids, a.out);
  } else {
    EmbeddingKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(a.table), a.rows,
                                                     a.cols, a.ids, a.out);
  }
  return CheckLaunch("EmbeddingKernel");
}

}  // namespace specserve::cuda
