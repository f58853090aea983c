// One scheduler iteration's forward pass: every queued session's pass as one
// ragged batch (continuous batching). If the batch is refused as a whole
// (one session's bad input, or the KV pool), each pass is retried alone so
// only the faulty session fails; the others are never corrupted because
// Backend::Forward changes nothing on error. Passes that carry a verify
// block (the target's rounds) go through Backend::ForwardVerify, which
// verifies where the backend keeps its logits.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "common/backend.h"
#include "rpc/service_metrics.h"
#include "spec/verify.h"

namespace specserve::rpc {

struct BatchOutput {
  std::vector<absl::Status> status;  // [passes]
  std::vector<int64_t> first_row;    // [passes]: a pass without a verify block: its first row in logits
  std::vector<float> logits;         // [rows, vocab]
  std::vector<VerifyResult> results; // [passes]: a pass with a verify block: what the backend decided
  double seconds = 0;                // wall time of the forward work (and verify step)
};

// verify: empty (every pass wants its logits: Backend::Forward), or
// [passes] blocks for Backend::ForwardVerify (nullptr: that pass's logits).
void RunBatch(Backend& backend, const std::vector<ForwardSeq>& passes, const std::vector<const VerifyInput*>& verify,
              ServiceMetrics& metrics, BatchOutput* out);

}  // namespace specserve::rpc
