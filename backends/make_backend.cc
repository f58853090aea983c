#include "backends/make_backend.h"

#include "absl/strings/str_cat.h"

namespace specserve {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const Model& model, const BackendOptions& opts) {
  if (opts.kind == "cpu") return MakeCpuBackend(model, opts);
  if (opts.kind == "cuda") return MakeCudaBackend(model, opts);
  return absl::InvalidArgumentError(absl::StrCat("unknown backend '", opts.kind, "' (cpu or cuda)"));
}

}  // namespace specserve
