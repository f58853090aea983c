#include "kernels/cuda_rmsnorm.cuh"

#include <cmath>

#include "kernels/cuda_device_utils.cuh"
#include "kernels/cuda_util.h"

namespace specserve::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row. x may be y (the forward pass normalises in place), so
// neither is __restrict__.
__global__ void RmsNormKernel(const float* x, const float* __restrict__ w, float* y,
                              int64_t n, float eps) {
  __shared__ double scratch[32];
  const float* xr = x + blockIdx.x * n;
  float* yr = y + blockIdx.x * n;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += static_cast<double>(xr[i]) * xr[i];
  ss = device::BlockSum(ss, scratch);
  const float scale = static_cast<float>(1.0 / sqrt(ss / n + eps));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * scale * w[i];
}

}  // namespace

absl::Status LaunchRmsNorm(const RmsNormArgs& a, cudaStream_t stream) {
  if (a.T < 0 || a.n < 1 || a.T > 0x7fffffff) return absl::InvalidArgumentError("rmsnorm: bad shape");
  if (!(a.eps >= 0.0f) || !std::isfinite(a.eps)) return absl::InvalidArgumentError("rmsnorm: eps must be finite and >= 0");
  if (a.T == 0) return absl::OkStatus();
  if (a.x == nullptr || a.w == nullptr || a.y == nullptr) return absl::InvalidArgumentError("rmsnorm: null pointer");
  RmsNormKernel<<<static_cast<unsigned>(a.T), kThreads, 0, stream>>>(a.x, a.w, a.y, a.n, a.eps);
  return CheckLaunch("RmsNormKernel");
}

}  // namespace specserve::cuda
