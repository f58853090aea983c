// One scheduler iteration's forward pass: every queued session's pass as one
// ragged batch (continuous batching). If the batch is refused as a whole
// (one session's bad input, or the KV pool), each pass is retried alone so
// only the faulty session fails; the others are never corrupted because
// Backend::Forward changes nothing on error. Passes that carry a verify
// block (the target's rounds) go through Backend::ForwardVerify, which
// verifies where the backend keeps its logits; passes that carry a draft
// rule (the draft's steps) through Backend::ForwardSample, which samples
// there.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "common/backend.h"
#include "rpc/service_metrics.h"
#include "spec/forward_sample.h"
#include "spec/verify.h"

namespace specserve::rpc {

struct BatchOutput {
  std::vector<absl::Status> status;  // [passes]
  std::vector<int64_t> first_row;    // [passes]: a pass without a verify block: its first row in logits
  std::vector<float> logits;         // [rows, vocab]
  std::vector<VerifyResult> results; // [passes]: a pass with a verify block: what the backend decided
  std::vector<DraftSample> samples;  // [passes]: a pass with a draft rule: the token and q the backend sampled
  double seconds = 0;                // wall time of the forward work (and verify step)
};

// verify: empty (every pass wants its logits: Backend::Forward), or
// [passes] blocks for Backend::ForwardVerify (nullptr: that pass's logits).
// sample: likewise, [passes] draft rules for Backend::ForwardSample. A batch
// carries verify blocks or draft rules, not both (a service is a target or
// a draft); with both, the rules are ignored and their passes get logits.
void RunBatch(Backend& backend, const std::vector<ForwardSeq>& passes, const std::vector<const VerifyInput*>& verify,
              const std::vector<const DraftSampleInput*>& sample, ServiceMetrics& metrics, BatchOutput* out);

}  // namespace specserve::rpc
