// Makes the compute backend a service or tool asked for: CPU (cpu_backend.cc)
// or CUDA (cuda_backend.cu; cuda_backend_stub.cc in builds without CUDA).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/backend.h"

namespace specserve {

absl::StatusOr<std::unique_ptr<Backend>> MakeCpuBackend(const Model& model, const BackendOptions& opts);
// FAILED_PRECONDITION when the binary was built without CUDA or no device exists.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const Model& model, const BackendOptions& opts);
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const Model& model, const BackendOptions& opts);
// Makes CUDA device `device` the process's current one (cudaSetDevice), the
// first thing a service on --backend cuda does: FAILED_PRECONDITION without
// CUDA or a device (with the runtime's reason), INVALID_ARGUMENT naming the
// valid ordinals for any other --device.
absl::Status SelectCudaDevice(int device);

}  // namespace specserve
