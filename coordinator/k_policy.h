// How many tokens to draft each round.
//
// With per-token acceptance a, a round of K drafted tokens commits on average
// E(K) = (1 - a^(K+1)) / (1 - a) tokens (Leviathan et al. 2023, eq. 1) and
// costs about verify + K * draft_step. Adaptive K picks, every round, the K in
// [k_min, k_max] that maximises E(K) / (verify + K * draft_step), from running
// estimates of a and of the two costs.
#pragma once

#include <cstdint>

namespace specserve {

class KPolicy {
 public:
  static KPolicy Fixed(int32_t k) { return KPolicy(k, false); }
  static KPolicy Adaptive(int32_t initial = 4) { return KPolicy(initial, true); }

  bool adaptive() const { return adaptive_; }
  int32_t Next() const;
  // One round's outcome: k drafted, `accepted` of them taken; seconds spent
  // drafting (all k tokens) and verifying.
  void Observe(int32_t k, int32_t accepted, double draft_seconds, double verify_seconds);
  double acceptance_estimate() const;

  static constexpr int32_t kMin = 1;
  static constexpr int32_t kMax = 16;

 private:
  KPolicy(int32_t k, bool adaptive) : k_(k), adaptive_(adaptive) {}
  int32_t k_;
  bool adaptive_;
  // Exponentially decayed counts: accepted tokens and first rejections (the
  // censored-geometric estimate of a is accepted / (accepted + rejections)).
  double acc_ = 3.0, rej_ = 1.0;
  double draft_step_s_ = 0, verify_s_ = 0;  // decayed means; 0 until observed
  int64_t rounds_ = 0;
};

}  // namespace specserve
