// Embedding lookup (a row gather) on the device: out[t] = table[ids[t]]
// widened to fp32. The CPU backend's reference is DequantizeMatrixRow
// (kernels/cpu_matmul.h) per token. The CUDA backend also uses it to gather
// the hidden rows whose logits are asked for (an fp32 "table").
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "common/tensor_types.h"

namespace specserve::cuda {

struct EmbeddingArgs {
  const void* table = nullptr;   // [rows, cols] device, row-major, F16 or F32
  GgmlType type = GgmlType::kF16;
  int64_t rows = 0;
  int64_t cols = 0;
  const int32_t* ids = nullptr;  // [T] device
  int64_t T = 0;
  float* out = nullptr;          // [T, cols]
};

// An id outside [0, rows) yields a row of NaN (callers validate ids on the
// host first; the kernel never reads out of bounds). UNIMPLEMENTED for table
// types other than F16 and F32.
absl::Status LaunchEmbedding(const EmbeddingArgs& a, cudaStream_t stream);

}  // namespace specserve::cuda
