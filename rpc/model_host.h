// A model service's model: the GGUF loaded, its backend built, and its
// description (tokenizer included) for GetModelInfo.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/weights.h"
#include "rpc/service_flags.h"
#include "specserve/v1/internal.pb.h"

namespace specserve::rpc {

struct ModelHost {
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> backend;
  v1::ModelInfo info;

  static absl::StatusOr<std::unique_ptr<ModelHost>> Load(const ServiceFlags& flags);
};

}  // namespace specserve::rpc
