// How many tokens to draft each round: a fixed K, a scripted one, or
// adaptive K. A policy keeps what its request's rounds measured (the
// inputs of coordinator/k_cost_model.h), chooses with coordinator/k_chooser.h,
// and adds what needs memory: exploring after a plain streak, and a first
// round's limits. The reasoning and the measurements behind it:
// docs/round_protocol.md "Speculation length". Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "coordinator/k_chooser.h"
#include "coordinator/k_cost_model.h"
#include "spec/round.h"

namespace specserve {

class KPolicy {
 public:
  static KPolicy Fixed(int32_t k) { return KPolicy(k, false); }
  static KPolicy Adaptive(int32_t initial = 4) { return KPolicy(initial, true); }
  // K from `ks` in turn, one per round, cycling (tests and benchmarks).
  static KPolicy Scripted(std::vector<int32_t> ks) {
    KPolicy p(ks.empty() ? 0 : ks[0], false);
    p.script_ = std::move(ks);
    return p;
  }

  bool adaptive() const { return adaptive_; }

  using Reason = KReason;
  using Choice = KChoice;
  static constexpr int kReasons = kKReasons;
  static const char* ReasonName(Reason r) { return KReasonName(r); }

  // In order: the script; plain under PlainAtSessions; the fixed K. Adaptive:
  // the initial K until a round drafted or a load report came; else
  // ChooseAdaptive under BatchMargin and LatePremium, except K = 1 (reason
  // kExplore) after kExploreAfter x B plain rounds in a row (not in a batch
  // before the request has drafted), and at most the initial K before it has.
  Choice Choose() const;
  int32_t Next() const { return Choose().k; }

  // What a round's waits measured.
  enum class Wait {
    kOnDemand,      // the draft drafted the block when asked; the target verified it
    kDraftedAhead,  // the block was the look-ahead drafted during the last verify
    kWithPrefill,   // a request's first round: both waits include the prompt's prefill
  };
  // One round: k drafted, `accepted` of them taken, seconds waiting for the
  // proposal and verifying; `why`: its K's reason when known (otherwise a
  // drafting round after a full plain streak counts as an exploration).
  void Observe(int32_t k, int32_t accepted, double draft_seconds, double verify_seconds,
               Wait wait = Wait::kOnDemand, std::optional<Reason> why = std::nullopt);
  // The target's report with a verdict, and that verify call's seconds
  // outside the target; ignored when not known (in-process targets).
  void ObserveTarget(const TargetLoad& load, double network_seconds);
  // Plain decoding, fixed K or adaptive, while the target reports `n` or
  // more sessions open (coordinator --speculation-max-sessions). 0: never.
  void DisableAtSessions(int32_t n) { disable_at_ = n; }
  // Before a first round: start from `other`'s measurements (another
  // request's on the same services), each weighing at most kSeedRounds
  // rounds. Ignored when `other` has not drafted or this policy has.
  void Seed(const KPolicy& other);

  KCostModel Model() const { return KCostModel(measured_); }
  double acceptance_estimate() const { return Model().Acceptance(); }
  double VerifyCost(int32_t n) const { return Model().VerifySeconds(n); }  // seconds; 0 before any round
  double DraftCost(int32_t k) const { return Model().DraftSeconds(k); }    // seconds; 0 for k = 0
  bool load_aware() const { return measured_.load.known; }
  bool learned() const { return rounds_ > 0; }

  static constexpr int32_t kMin = kMinAdaptiveK;
  static constexpr int32_t kMax = kMaxRoundK;
  static constexpr int32_t kExploreAfter = 8;  // plain rounds (times B) before an exploring K = 1
  static constexpr int32_t kExploreMax = 256;
  static constexpr double kPlainMatesK = specserve::kPlainMatesK;
  static constexpr double kLonePremium = specserve::kLonePremium;
  static constexpr double kLoadMargin = specserve::kLoadMargin;
  static constexpr double kSeedRounds = 4;  // the weight of a Seed (the prior's: accepted 3 + rejections 1)

 private:
  KPolicy(int32_t k, bool adaptive) : k_(k), adaptive_(adaptive) {}
  int64_t ExploreWait() const;

  int32_t k_;  // fixed: the K; adaptive: the initial K
  bool adaptive_;
  std::vector<int32_t> script_;
  size_t script_round_ = 0;
  KCostInputs measured_;
  // A first round's waits (with the prefill) stand in only until an
  // ordinary round measures the line.
  bool verify_provisional_ = false, draft_provisional_ = false;
  bool seeded_ = false;     // the lines came from Seed
  bool last_full_ = false;  // the last round accepted all it drafted
  int64_t rounds_ = 0;      // rounds that drafted
  int32_t plain_streak_ = 0;
  int32_t explore_after_ = kExploreAfter;  // doubles while explorations find plain right
  int32_t disable_at_ = 0;
};

}  // namespace specserve
