// Linked when the build has no CUDA toolkit: asking for CUDA fails clearly.
#include "backends/make_backend.h"
#include "common/backend.h"

namespace specserve {

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const Model&, const BackendOptions&) {
  return absl::FailedPreconditionError(
      "this specserve binary was built without CUDA (configure with -DSPECSERVE_CUDA=ON)");
}

absl::Status SelectCudaDevice(int) {
  return absl::FailedPreconditionError(
      "this specserve binary was built without CUDA (configure with -DSPECSERVE_CUDA=ON)");
}

}  // namespace specserve
