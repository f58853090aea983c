// What the target service reports about its load with every verdict
// (rpc/pass_cost.h measures it; coordinator/k_policy.h reads it), and what a
// batched pass of a given width costs by that report.
//
// A batched pass over T tokens (all its sessions' tokens together) costs
//   table: the measured mean seconds of recent passes of about T tokens,
//          linearly interpolated between the widths seen;
//   line:  fixed_seconds + seconds_per_token * T, fitted over all of them,
//          used where the table has nothing (no pass yet near T).
// The table matters where the cost is a staircase (a CPU's kernels take
// tokens in groups: on the 1B Q4_K_M target at 1 thread, passes of 1 / 3 / 5
// / 17 tokens cost 40 / 46 / 67 / 169 ms), which no single line fits.
#pragma once

#include <vector>

namespace specserve {

// The mean cost of recent passes of about `tokens` tokens.
struct PassCostPoint {
  double tokens = 0;
  double seconds = 0;
};

struct TargetLoad {
  bool known = false;             // false: in process, or an older target
  double fixed_seconds = 0;
  double seconds_per_token = 0;
  double sessions_per_pass = 0;
  double active_sessions = 0;
  std::vector<PassCostPoint> passes;  // by increasing tokens; may be empty
  // Batch synchronisation (0 from an older target, which reports neither):
  // the mean tokens a session brings to a decoding pass (1 + the mean K of
  // the sessions in the batch), and the target's batch gather now (rpc/
  // session_service.h GatherLastPass: min(--batch-gather-ms, half the last
  // pass)). A session whose next block comes later than that after its
  // verdict misses the pass its batch starts, and waits for it to end.
  double tokens_per_session = 0;
  double gather_seconds = 0;
};

// Seconds of one batched pass over `tokens` tokens (> 0) by `load`:
// - between two points of the table, the line through them;
// - past its last point, that point's cost plus the line's per-token cost
//   for the extra tokens, at least the last two points' slope, so a wide pass
//   nobody measured costs at least what the measured ones suggest;
// - below its first point, that point's cost scaled down along the line
//   (never below the line's fixed cost);
// - with no table, the line.
// At least 1 ns: callers divide by it.
double PassSeconds(const TargetLoad& load, double tokens);

}  // namespace specserve
