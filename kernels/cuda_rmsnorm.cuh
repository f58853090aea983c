// RMSNorm on the device. CPU reference: cpu::RmsNorm (kernels/cpu_ops.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace specserve::cuda {

struct RmsNormArgs {
  const float* x = nullptr;  // [T, n] device
  const float* w = nullptr;  // [n] gains
  float* y = nullptr;        // [T, n]; may alias x
  int64_t T = 0;
  int64_t n = 0;
  float eps = 1e-5f;
};

// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w, the sum of squares in double
// as on the CPU. INVALID_ARGUMENT for bad shapes or null pointers.
absl::Status LaunchRmsNorm(const RmsNormArgs& a, cudaStream_t stream);

}  // namespace specserve::cuda
