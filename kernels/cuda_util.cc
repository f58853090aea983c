#include "kernels/cuda_util.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace specserve::cuda {

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

absl::Status CheckLaunch(const char* kernel) {
  return CudaStatus(cudaGetLastError(), kernel);
}

int DeviceCount(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky "no device" error for later calls
    return 0;
  }
  if (n == 0 && why != nullptr) *why = "the CUDA runtime reports 0 devices";
  return n;
}

absl::Status DeviceBuffer::Allocate(size_t bytes) {
  Reset();
  if (bytes == 0) return absl::OkStatus();
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(err, absl::StrCat("cudaMalloc(", bytes, " bytes)").c_str());
  }
  ptr_ = p;
  bytes_ = bytes;
  return absl::OkStatus();
}

void DeviceBuffer::Reset() {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace specserve::cuda
