#include "kernels/cuda_swiglu.cuh"

#include <algorithm>

#include "kernels/cuda_util.h"

namespace specserve::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void SwiGluKernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

}  // namespace

absl::Status LaunchSwiGlu(const SwiGluArgs& a, cudaStream_t stream) {
  if (a.n < 0) return absl::InvalidArgumentError("swiglu: negative length");
  if (a.n == 0) return absl::OkStatus();
  if (a.gate == nullptr || a.up == nullptr || a.out == nullptr) return absl::InvalidArgumentError("swiglu: null pointer");
  const int64_t blocks = std::min<int64_t>((a.n + kThreads - 1) / kThreads, 65536);
  SwiGluKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a.gate, a.up, a.out, a.n);
  return CheckLaunch("SwiGluKernel");
}

}  // namespace specserve::cuda
