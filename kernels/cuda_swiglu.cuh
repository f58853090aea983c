// SwiGLU activation on the device. CPU reference: cpu::SwiGlu (kernels/cpu_ops.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace specserve::cuda {

struct SwiGluArgs {
  const float* gate = nullptr;  // [n] device
  const float* up = nullptr;    // [n]
  float* out = nullptr;         // [n]; may alias gate or up
  int64_t n = 0;
};

// out[i] = silu(gate[i]) * up[i] with the accurate expf (no fast math).
absl::Status LaunchSwiGlu(const SwiGluArgs& a, cudaStream_t stream);

}  // namespace specserve::cuda
