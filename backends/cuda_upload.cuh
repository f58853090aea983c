// The CUDA backend's host <-> device transfer helpers (backends/cuda_backend.cu):
// pinned host memory for the per-call copies (the batch's metadata going up,
// logits coming back), and the one-time upload of the model's weights:
// fp32 vectors as they are, matrices as row-major f16 (F16 rows as stored,
// every other GGML type widened and rounded to f16 on the host,
// backends/weight_convert.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "common/thread_pool.h"
#include "common/weights.h"
#include "kernels/cuda_util.h"

namespace specserve {

// Pinned host memory (cudaMallocHost), grown on demand.
class PinnedBuffer {
 public:
  ~PinnedBuffer() { Reset(); }
  absl::Status Reserve(size_t bytes) {
    if (bytes <= bytes_) return absl::OkStatus();
    Reset();
    void* p = nullptr;
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, bytes));
    ptr_ = p;
    bytes_ = bytes;
    return absl::OkStatus();
  }
  void Reset() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  char* get() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceMatrix {
  cuda::DeviceBuffer data;  // [rows, cols] f16, row-major
  int64_t rows = 0;
  int64_t cols = 0;
};

// host [n] f32 -> *out [n] f32 on the current device (allocated here).
absl::Status UploadVector(const float* host, int64_t n, cuda::DeviceBuffer* out);

// m [m.rows, m.cols] of any GGML type -> *out [m.rows, m.cols] f16 on the
// current device (allocated here). F16 rows go up as stored; other types are
// widened and rounded to f16 a slab of rows at a time, on `pool`
// (backends/weight_convert.h: F16C).
absl::Status UploadMatrix(const MatrixView& m, ThreadPool& pool, DeviceMatrix* out);

}  // namespace specserve
