#include "kernels/cuda_add.cuh"

#include <algorithm>

#include "kernels/cuda_util.h"

namespace specserve::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void AddKernel(float* y, const float* x, int64_t total, int64_t n, bool broadcast) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += x[broadcast ? i % n : i];
  }
}

}  // namespace

absl::Status LaunchAdd(const AddArgs& a, cudaStream_t stream) {
  if (a.T < 0 || a.n < 0) return absl::InvalidArgumentError("add: negative shape");
  const int64_t total = a.T * a.n;
  if (total == 0) return absl::OkStatus();
  if (a.y == nullptr || a.x == nullptr) return absl::InvalidArgumentError("add: null pointer");
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 65536);
  AddKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a.y, a.x, total, a.n, a.broadcast);
  return CheckLaunch("AddKernel");
}

}  // namespace specserve::cuda
