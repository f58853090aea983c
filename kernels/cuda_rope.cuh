// Rotary position embedding on the device, interleaved or NEOX pairs.
// CPU reference: cpu::Rope (kernels/cpu_ops.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu_ops.h"

namespace specserve::cuda {

struct RopeArgs {
  float* x = nullptr;                  // [T, p.n_heads * p.head_dim] device, rotated in place
  const int32_t* positions = nullptr;  // [T] device, absolute positions
  int64_t T = 0;
  int64_t row_stride = 0;              // floats between rows of x; 0 = n_heads * head_dim
  cpu::RopeParams p;                   // p.freq_factors, when set, is a DEVICE pointer [rope_dim / 2]
};

// theta_i = pos * base^(-2i / rope_dim) * freq_scale / freq_factors[i], in
// double (pow, sin, cos) and rounded to float as on the CPU. INVALID_ARGUMENT
// for bad shapes (rope_dim odd or > head_dim, ...).
absl::Status LaunchRope(const RopeArgs& a, cudaStream_t stream);

}  // namespace specserve::cuda
