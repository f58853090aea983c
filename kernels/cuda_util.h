// Host-side CUDA helpers shared by the kernel launchers, the CUDA backend and
// the tests: cudaError_t -> absl::Status, device presence, and an owning
// device buffer. Plain C++ (no kernels), so .cc files may include it.
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace specserve::cuda {

// OK for cudaSuccess, otherwise INTERNAL naming `what` and the CUDA error.
absl::Status CudaStatus(cudaError_t err, const char* what);

// What a launcher returns after a kernel launch: the launch error, if any
// (cudaGetLastError; asynchronous faults surface at the next sync).
absl::Status CheckLaunch(const char* kernel);

// Number of CUDA devices; 0 when the driver or runtime reports none or fails
// (a machine without a GPU). Never aborts.
// Devices the CUDA runtime sees; 0 when it cannot start (no driver, an old
// driver, no device nodes), with the runtime's reason in *why when given.
int DeviceCount(std::string* why = nullptr);

// The message tests print when they skip.
inline constexpr char kNoDeviceMessage[] = "no CUDA device";

// An owning device allocation of `bytes` bytes (cudaMalloc on the current
// device). Move-only; freed in the destructor.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Frees any old allocation and allocates `bytes` (RESOURCE_EXHAUSTED when
  // the device is out of memory). bytes == 0 leaves the buffer empty.
  absl::Status Allocate(size_t bytes);
  // Allocate only when the current allocation is smaller than `bytes`.
  absl::Status Reserve(size_t bytes) { return bytes <= bytes_ ? absl::OkStatus() : Allocate(bytes); }
  void Reset();

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Synchronous helpers for tests and setup paths (not for the hot loop).
template <typename T>
absl::StatusOr<DeviceBuffer> Upload(const std::vector<T>& host) {
  DeviceBuffer b;
  absl::Status s = b.Allocate(host.size() * sizeof(T));
  if (!s.ok()) return s;
  if (!host.empty()) {
    s = CudaStatus(cudaMemcpy(b.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
                   "cudaMemcpy H2D");
    if (!s.ok()) return s;
  }
  return b;
}

template <typename T>
absl::Status Download(const DeviceBuffer& b, size_t count, std::vector<T>* host) {
  host->resize(count);
  if (count == 0) return absl::OkStatus();
  return CudaStatus(cudaMemcpy(host->data(), b.get(), count * sizeof(T), cudaMemcpyDeviceToHost),
                    "cudaMemcpy D2H");
}

}  // namespace specserve::cuda

// Returns from the enclosing function (absl::Status or StatusOr) on a CUDA error.
#define SPECSERVE_CUDA_RETURN_IF_ERROR(expr)                                         \
  do {                                                                              \
    const ::absl::Status specserve_cuda_status_ = ::specserve::cuda::CudaStatus((expr), #expr); \
    if (!specserve_cuda_status_.ok()) return specserve_cuda_status_;               \
  } while (0)

namespace specserve::cuda {

// A small step's launch and its answer (the verify and draft-sampling
// kernels): records `start`, runs launch() on `stream`, records `stop`,
// copies `bytes` from `device` into `*out` (pageable: O(K) bytes per
// sequence) and waits for the stream; `*kernel_seconds` is the device time
// between the two events.
template <class Launch>
absl::Status TimedLaunchThenCopyBack(cudaEvent_t start, cudaEvent_t stop, cudaStream_t stream, Launch launch,
                                     const void* device, size_t bytes, std::vector<char>* out,
                                     double* kernel_seconds) {
  SPECSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
  if (absl::Status s = launch(); !s.ok()) return s;
  SPECSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
  out->resize(bytes);
  SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out->data(), device, bytes, cudaMemcpyDeviceToHost, stream));
  SPECSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  float ms = 0.0f;
  SPECSERVE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
  *kernel_seconds = ms * 1e-3;
  return absl::OkStatus();
}

}  // namespace specserve::cuda
