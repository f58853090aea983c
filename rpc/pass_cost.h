// What a batched forward pass costs on this service, measured, and how loaded
// the service is. The target sends it with every verdict so that the
// coordinator's adaptive K can weigh what its drafted tokens cost the whole
// batch (coordinator/k_policy.h, docs/round_protocol.md "K under load"):
// - a table by pass width (tokens in the pass, all sessions together): the
//   decayed mean seconds of recent passes of each width, widths 1..16 each
//   their own, wider ones in buckets 25% apart, blended with the line
//   (spec/target_load.h reads it);
// - a line, seconds = fixed + per_token * tokens, fitted by decayed least
//   squares over all decoding passes, for widths the table has not seen;
// - sessions per pass, a decayed mean.
#pragma once

#include <array>
#include <cstdint>

#include "spec/target_load.h"

namespace specserve::rpc {

class PassCostModel {
 public:
  // One batched pass: `sessions` passes of `tokens` tokens in all took
  // `seconds`. Decoding passes only (the caller leaves out batches holding a
  // prompt's prefill: a long prefill costs more per token than a verify
  // block, and would make every drafted token look dearer than it is).
  void Observe(int64_t tokens, int64_t sessions, double seconds);
  // The current estimate; known = false before the first pass. Each width's
  // mean is blended with the line's price for it: a width with weight w
  // (its passes, each fading by kAge with every later pass of any width)
  // counts w against the line's kPrior, so one outlier, or a width nobody
  // has chosen since (a width priced dear is seldom chosen again, so its
  // own mean would never heal), drifts back to the line. Widths whose
  // weight fell below kForgetWeight drop out. By increasing width, each at
  // least as dear as the narrower ones (a wider pass never costs less; a
  // dip is noise).
  TargetLoad Estimate() const;

  static constexpr int kBuckets = 40;  // widths up to 16 * 1.25^23, about 2700 tokens
  static constexpr double kAge = 0.99;         // per pass: ~100 passes of memory
  static constexpr double kPrior = 2.0;        // the line's weight in a width's price
  static constexpr double kForgetWeight = 0.05;  // ~300 passes after a width's last

 private:
  struct Bucket {
    // Sums over the width's passes, each weighted kAge^(passes since), as of
    // last_pass (passes_ when last observed).
    double w = 0, tokens = 0, seconds = 0;
    int64_t last_pass = 0;
  };
  // Decayed sums of the points (x = tokens, y = seconds) and of the load.
  double sw_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0, ss_ = 0;
  std::array<Bucket, kBuckets> buckets_{};
  int64_t passes_ = 0;
};

}  // namespace specserve::rpc
