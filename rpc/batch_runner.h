// One scheduler iteration's forward pass: every queued session's pass as one
// ragged batch (continuous batching). If the batch is refused as a whole
// (one session's bad input, or the KV pool), each pass is retried alone so
// only the faulty session fails; the others are never corrupted because
// Backend::Forward changes nothing on error.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "common/backend.h"
#include "rpc/service_metrics.h"

namespace specserve::rpc {

struct BatchOutput {
  std::vector<absl::Status> status;  // [passes]
  std::vector<int64_t> first_row;    // [passes]: the pass's first logits row
  std::vector<float> logits;         // [sum(n_logits), vocab]
  double seconds = 0;                // wall time of the forward work
};

void RunBatch(Backend& backend, const std::vector<ForwardSeq>& passes, ServiceMetrics& metrics, BatchOutput* out);

}  // namespace specserve::rpc
