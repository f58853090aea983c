// One Generate request from start to end, on the request's worker thread:
// validate it, pick the drafter and K, open sessions on the services, run
// RunSpeculative, turn committed tokens into deltas (stop strings, max
// tokens) and produce the final statistics.
#pragma once

#include <chrono>
#include <functional>

#include "absl/status/statusor.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/remote_engines.h"
#include "coordinator/upstreams.h"
#include "specserve/v1/generation.pb.h"

namespace specserve {

struct CoordinatorOptions {
  int default_k = 4;          // -1: adaptive
  int default_max_tokens = 128;
  int max_stop_strings = 16;
  int max_stop_bytes = 256;   // per stop string
  // A draft call slower than this counts as a draft failure (0: no limit).
  std::chrono::milliseconds draft_timeout{2000};
  // Draft service: draft the next block while the target verifies (docs/round_protocol.md).
  bool overlap = true;
  // DraftRule::lookup_min_ngram of every session (greedy drafts only; 0: off).
  int draft_lookup = 2;
};

struct RequestContext {
  Upstreams* upstreams = nullptr;
  CoordinatorMetrics* metrics = nullptr;  // may be null
  CancelGroup* cancel = nullptr;
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
  // Receives each delta in order; false when the client is gone.
  std::function<bool(v1::Delta)> on_delta;
};

// Errors: INVALID_ARGUMENT for a bad request; UNAVAILABLE when the target
// fails (or another code the target chose for the request, e.g.
// RESOURCE_EXHAUSTED); CANCELLED / DEADLINE_EXCEEDED.
absl::StatusOr<v1::Final> RunGeneration(const v1::GenerateRequest& req, const CoordinatorOptions& opts,
                                        RequestContext& rc);

}  // namespace specserve
