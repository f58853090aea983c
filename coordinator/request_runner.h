// One Generate request from start to end, on the request's worker thread:
// validate it, pick the drafter and K, open sessions on the services, run
// RunSpeculative, turn committed tokens into deltas (stop strings, max
// tokens) and produce the final statistics.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/trace_context.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/request_plan.h"
#include "coordinator/remote_engines.h"
#include "coordinator/upstreams.h"
#include "specserve/v1/generation.pb.h"

namespace specserve {

struct RequestContext {
  Upstreams* upstreams = nullptr;
  CoordinatorMetrics* metrics = nullptr;  // may be null
  CancelGroup* cancel = nullptr;
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
  // The request's id and trace: its log lines carry them, and both services'
  // sessions get them as x-request-id and traceparent metadata.
  std::string request_id;
  TraceContext trace;  // trace_id empty: none sent
  // Receives each delta in order; false when the client is gone.
  std::function<bool(v1::Delta)> on_delta;
};

// Errors: INVALID_ARGUMENT for a bad request; UNAVAILABLE when the target
// fails (or another code the target chose for the request, e.g.
// RESOURCE_EXHAUSTED); CANCELLED / DEADLINE_EXCEEDED.
absl::StatusOr<v1::Final> RunGeneration(const v1::GenerateRequest& req, const CoordinatorOptions& opts,
                                        RequestContext& rc);

}  // namespace specserve
