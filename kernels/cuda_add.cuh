// Residual adds and bias adds on the device. CPU references: cpu::AddInPlace
// and cpu::AddBias (kernels/cpu_ops.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace specserve::cuda {

struct AddArgs {
  float* y = nullptr;        // [T, n] device, updated in place
  const float* x = nullptr;  // [T, n] (residual) or [n] (bias, broadcast over rows)
  int64_t T = 0;
  int64_t n = 0;
  bool broadcast = false;    // true: y[t, i] += x[i]; false: y[t, i] += x[t, i]
};

absl::Status LaunchAdd(const AddArgs& a, cudaStream_t stream);

}  // namespace specserve::cuda
