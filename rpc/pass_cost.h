// What a batched forward pass costs on this service, measured: a line
// seconds = fixed + per_token * tokens fitted by decayed least squares over
// the scheduler's decoding passes, and how loaded the service is (sessions
// per pass, a decayed mean). The target sends it with every verdict so that
// the coordinator's adaptive K can weigh what its drafted tokens cost the
// whole batch (coordinator/k_policy.h, docs/round_protocol.md "K under load").
#pragma once

#include <cstdint>

#include "spec/round.h"

namespace specserve::rpc {

class PassCostModel {
 public:
  // One batched pass: `sessions` passes of `tokens` tokens in all took
  // `seconds`. Decoding passes only (the caller leaves out batches holding a
  // prompt's prefill: a long prefill costs more per token than a verify
  // block, and would make every drafted token look dearer than it is).
  void Observe(int64_t tokens, int64_t sessions, double seconds);
  // The current estimate; known = false before the first pass.
  TargetLoad Estimate() const;

 private:
  // Decayed sums of the points (x = tokens, y = seconds) and of the load.
  double sw_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0, ss_ = 0;
};

}  // namespace specserve::rpc
