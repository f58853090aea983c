// What a round of K drafted tokens is predicted to bring and to cost, from
// what was measured (docs/round_protocol.md "Speculation length"). Pure: a
// KCostModel is a function of its KCostInputs; the K policy
// (coordinator/k_policy.h) keeps and updates the inputs.
#pragma once

#include <cstdint>
#include <utility>

#include "spec/target_load.h"

namespace specserve {

// A line y = y0 + y1 x fitted by least squares over decayed sums.
struct DecayedLine {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  // Every earlier point weighs `decay` times as much, then (x, y) is added.
  void Add(double x, double y, double decay);
  void Scale(double f);  // weighs f times as much; the line is unchanged
  // y at x, at least 1e-9; 0 before any point. With one x seen so far the
  // slope is `lone_slope` times the mean y per unit of x. Never falls with x.
  double At(double x, double lone_slope) const;
};

struct KCostInputs {
  // Decayed accepted tokens and first rejections: a = accepted / (accepted + rejections).
  double accepted = 3, rejections = 1;
  DecayedLine verify;  // x: tokens in the pass (K + 1); y: seconds verifying
  DecayedLine draft;   // x: K drafted on demand; y: seconds waiting for the block
  // The look-ahead (docs/round_protocol.md "Overlap"): of the rounds after a
  // fully accepted one, the decayed count whose block was ready (hits) and
  // of all (chances); the mean seconds waiting for a ready block.
  double ahead_hits = 0, ahead_chances = 0, ahead_wait = 0;
  double network_seconds = 0;  // a verify call's seconds outside the target
  TargetLoad load;             // the target's report; load.known false: none
};

class KCostModel {
 public:
  explicit KCostModel(KCostInputs in) : in_(std::move(in)) {}

  const TargetLoad& load() const { return in_.load; }
  double Acceptance() const { return in_.accepted / (in_.accepted + in_.rejections); }
  // E(K) = (1 - a^(K+1)) / (1 - a), a clamped to [0.01, 0.995].
  double ExpectedTokens(int32_t k) const;
  // Seconds of this session's verify pass over n tokens (0 before any round).
  double VerifySeconds(int32_t n) const;
  // Seconds waiting for a block of k drafted on demand (0 for k = 0).
  double OnDemandDraftSeconds(int32_t k) const;
  // The same with the look-ahead: ready at once with probability a^k g.
  double DraftSeconds(int32_t k) const;
  // Sessions in a pass (B) and open on the target (N), each at least 1.
  double batch() const;
  double sessions() const;
  // A report of B >= 1.5: the premiums of coordinator/k_chooser.h apply.
  bool batched() const { return in_.load.known && batch() >= 1.5; }
  // A round's seconds. Without a report: verify(K + 1) + draft(K). With one,
  // every session drafting K: max(latency, throughput), where latency =
  // network + pass(B (K + 1)) + draft(K) and throughput = N / B pass(B (K + 1)).
  double RoundSeconds(int32_t k) const;
  // Tokens a second: E(K) / RoundSeconds(K).
  double Rate(int32_t k) const;

 private:
  KCostInputs in_;
};

}  // namespace specserve
