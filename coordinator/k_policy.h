// How many tokens to draft each round.
//
// With per-token acceptance a, a round of K drafted tokens commits on average
// E(K) = (1 - a^(K+1)) / (1 - a) tokens (Leviathan et al. 2023, eq. 1). Its
// cost is K draft steps plus one verify pass over K + 1 tokens. On a GPU the
// verify pass costs about the same for any small K (weights dominate); on a
// CPU it grows with K (arithmetic dominates). So both costs are measured:
// draft time per step, and verify time fitted as v0 + v1 * (K + 1) by a
// decayed least-squares line over the rounds seen. Adaptive K picks, every
// round, the K in [kMin, kMax] maximising E(K) / cost(K).
//
// Under load (docs/round_protocol.md "K under load"): a remote target reports
// its measured pass cost, pass(T) for a batched pass of T tokens (a table by
// width and a line, spec/target_load.h), the sessions B in its batched passes
// and the N sessions open on it. Assuming every session drafts the same K, a
// round then lasts at least
//   latency(K)    = network + pass(B * (K + 1)) + K * draft_step
//                   (this session's own chain; its pass holds B sessions), and
//   throughput(K) = N / B * pass(B * (K + 1))
//                   (the target's work for one round of all N sessions),
// and K maximises E(K) / max(latency, throughput), K = 0 (plain decoding)
// included. The draft's cost of a round of K, K * draft_step above, is a
// decayed line too, d0 + d1 K, over the rounds' measured wait for the
// proposal: through the services a round's wait has a fixed part (the
// verdict reaching the draft, a look-ahead pass being dropped) that a cost
// per step would charge K times.
//
// With the draft's look-ahead (coordinator --overlap) the block of a round
// that follows a fully accepted one is often ready at once: the draft
// service drafted it during the last verify, guessing the bonus token. So
// the line above is fitted over blocks drafted on demand only, and a round
// of K expects to wait
//   (1 - h(K)) * (d0 + d1 K) + h(K) * ready_wait,   h(K) = a^K * g,
// where g is the measured share of rounds after a fully accepted one whose
// block was ready (0 without a look-ahead). A request's first round waits
// for both services' prefill of the prompt: it teaches acceptance, and its
// costs stand in only until an ordinary round measures them.
//
// Plain rounds teach the policy nothing about acceptance or the draft's
// cost, so a K = 0 chosen on a few unlucky rounds would stay for good
// (docs/decisions/0009-adaptive-k-exploration.md).
// So after kExploreAfter plain rounds in a row the policy drafts K = 1 for one
// round, and doubles that wait (up to kExploreMax) each time the exploration
// does not bring K back; a K > 0 the policy chose itself resets it. A
// request that has not drafted yet explores too when alone on the target:
// it started from another request's figures (Seed), and its plain rounds
// post none, so every request after it would start from the same stale
// figures. Not in a batch: there its explorations set the batch flipping
// between plain and drafting rounds, late for each other's passes, for no
// throughput and a longer tail. In a
// target's batch of B sessions each waits B times as long, so that the batch
// as a whole explores about as often as one session alone: under a saturated
// target an exploring round costs the batch one more token in a pass of many.
//
// Batch synchronisation: the rates above assume every session of the batch
// drafts the same K, so that they all answer at about the same time and the
// target's batch gather (rpc/session_service.h) puts them in one pass. When
// the target reports that its decoding passes bring fewer than 1 +
// kPlainMatesK tokens a session (its batch-mates decode plainly), a round
// that drafts on demand (or a request's first round, whose draft prefills
// the prompt first) comes back after the others, later than the gather the
// target reports, and misses the pass they start: a whole pass more for this
// session and a stalled gather for the rest: even a few such rounds cost
// the batch throughput and double its inter-token tail. Those rounds
// must promise kLonePremium more than the rate above: a tie (the saturated
// target's case) stays plain, while at low load, where drafting together
// pays tens of percent, a plain batch still moves to drafting.
//
// A margin under load: in a batch of B >= 1.5 sessions a round of K > 0 must
// promise kLoadMargin more than its rate. The rates miss what drafting costs
// a batch beyond the mean: a session whose block comes late holds up the
// gather, the draft's wait varies, and the tails (p99 inter-token latency,
// which the rate does not weigh) grow with every drafted pass: a batch
// drafting together on a small predicted gain matched plain throughput
// with a much longer p99 inter-token latency. 25% rather than 10%: with
// 10% open-loop arrivals drafted and lost, with 25% they stayed level
// while a few closed-loop clients still drafted and gained
// (docs/decisions/0011-k-under-load-margins.md). A late round alone
// (above) must promise more than the margin.
//
// With one session the round time is the latency chain, as without a report;
// once the target is saturated and compute-bound, every drafted token costs
// a token's worth of target work, E(K) / (K + 1) < 1 loses to K = 0, and K
// falls to 0; when the load falls it rises again.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "spec/round.h"

namespace specserve {

class KPolicy {
 public:
  static KPolicy Fixed(int32_t k) { return KPolicy(k, false); }
  static KPolicy Adaptive(int32_t initial = 4) { return KPolicy(initial, true); }
  // K from `ks` in turn, one per round, cycling (tests and benchmarks: a
  // request that moves between plain and speculative rounds on cue).
  static KPolicy Scripted(std::vector<int32_t> ks) {
    KPolicy p(ks.empty() ? 0 : ks[0], false);
    p.script_ = std::move(ks);
    return p;
  }

  bool adaptive() const { return adaptive_; }

  // Why a round's K is what it is: the coordinator counts them
  // (specserve_k_choices_total{reason}, docs/metrics.md) so that an operator
  // reads off Prometheus why speculation is on or off under a given load.
  enum class Reason {
    kFixed,        // a fixed or scripted K
    kInitial,      // a first round with nothing measured: the initial K
    // Under a load report the reasons below hold from a request's first
    // round on; until the request has drafted, K is at most the initial K.
    kBest,         // the K of the highest predicted rate (K > 0)
    kExplore,      // K = 1 after a long plain streak (see above)
    kPlainRate,    // plain decoding: no K > 0 predicts a higher rate
    kPlainMargin,  // plain: a K > 0 predicts more, but not kLoadMargin more
    kPlainLate,    // plain: a K > 0 predicts more, but not kLonePremium more
    kPlainLoad,    // plain: the target has DisableAtSessions or more sessions open
  };
  static constexpr int kReasons = 8;
  static const char* ReasonName(Reason r);
  struct Choice {
    int32_t k = 0;
    Reason reason = Reason::kFixed;
    // The best K > 0's predicted rate over plain decoding's, before any
    // premium (1.3: drafting predicts 30% more tokens a second). 0 when the
    // policy did not compare them (fixed K, or a first round without a
    // measurement).
    double gain = 0;
  };
  Choice Choose() const;
  int32_t Next() const { return Choose().k; }
  // What a round's waits measured.
  enum class Wait {
    kOnDemand,      // the draft drafted the block when asked; the target verified it
    kDraftedAhead,  // the block was the look-ahead drafted during the last verify
    kWithPrefill,   // a request's first round: both waits include the prompt's prefill
  };
  // One round's outcome: k drafted, `accepted` of them taken; seconds spent
  // waiting for the proposal and verifying; `why`: the reason its K was
  // chosen, when known (a drafting round after a full plain streak is
  // otherwise taken for an exploration).
  void Observe(int32_t k, int32_t accepted, double draft_seconds, double verify_seconds,
               Wait wait = Wait::kOnDemand, std::optional<Reason> why = std::nullopt);
  double acceptance_estimate() const;
  // Predicted verify seconds for a pass over n tokens (0 before any round).
  double VerifyCost(int32_t n) const;
  // Predicted seconds waiting for a proposal of k tokens (0 for k = 0 or
  // before any round).
  double DraftCost(int32_t k) const;
  // The target's load with a round's verdict, and the seconds that round's
  // verify call spent outside the target service (network, this process);
  // ignored when not known (in-process targets).
  void ObserveTarget(const TargetLoad& load, double network_seconds);
  bool load_aware() const { return load_.known; }
  // Plain decoding, fixed K or adaptive, while the target reports `n` or
  // more sessions open (coordinator --speculation-max-sessions; vLLM's
  // disable-by-batch-size): for deployments that want plain decoding's
  // inter-token tail under load whatever drafting would gain. 0: never.
  void DisableAtSessions(int32_t n) { disable_at_ = n; }
  // Before its first round: start from what `other` (another request's
  // policy on the same services, coordinator/target_load_board.h) measured,
  // its acceptance and its lines for the draft's wait and the verify, in
  // place of the prior, each weighing at most kSeedRounds rounds so that
  // this request's own rounds soon outweigh it. Without it a new request
  // under load knew neither: it took acceptance 0.75 and a free draft and
  // drafted its first rounds among plain batch-mates, late for their pass
  // (docs/decisions/0010-seeding-new-requests.md). Ignored when `other` has not drafted yet
  // or this policy already has.
  void Seed(const KPolicy& other);
  bool learned() const { return rounds_ > 0; }

  static constexpr int32_t kMin = 1;
  static constexpr int32_t kMax = kMaxRoundK;
  static constexpr int32_t kExploreAfter = 8;
  static constexpr int32_t kExploreMax = 256;
  static constexpr double kPlainMatesK = 0.5;   // batch-mates' mean K below this: plain
  static constexpr double kLonePremium = 0.40;  // what a late round alone must promise more
  static constexpr double kLoadMargin = 0.25;   // what drafting in a batch must promise more
  static constexpr double kSeedRounds = 4;      // the weight of a Seed (the prior's: acc 3 + rej 1)

 private:
  KPolicy(int32_t k, bool adaptive) : k_(k), adaptive_(adaptive) {}
  int32_t k_;
  bool adaptive_;
  std::vector<int32_t> script_;  // Scripted: K per round, cycling
  size_t script_round_ = 0;
  // Exponentially decayed counts: accepted tokens and first rejections (the
  // censored-geometric estimate of a is accepted / (accepted + rejections)).
  double acc_ = 3.0, rej_ = 1.0;
  // Decayed sums for a line y = y0 + y1 x over the rounds seen.
  struct DecayedLine {
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    void Add(double x, double y);
    void Scale(double f);  // weighs f times as much (the line itself unchanged)
    // y at x; with a single x seen so far the slope is `lone_slope` of the
    // mean y per unit of x.
    double At(double x, double lone_slope) const;
  };
  DecayedLine verify_;  // x = tokens in the pass, y = verify seconds
  DecayedLine draft_;   // x = k drafted on demand, y = seconds waiting for the proposal
  // A first round's waits (with the prefill) stand in only until a round
  // measures the line itself.
  bool verify_provisional_ = false, draft_provisional_ = false;
  bool seeded_ = false;  // the lines came from Seed
  // The look-ahead: of the rounds after a fully accepted one, the decayed
  // share whose block was ready (the guessed bonus token was right too), and
  // the decayed mean wait for such a block.
  double ahead_hits_ = 0, ahead_chances_ = 0, ahead_wait_ = 0;
  bool last_full_ = false;  // the last round accepted all it drafted
  int64_t rounds_ = 0;
  int32_t plain_streak_ = 0;               // plain rounds in a row
  int32_t explore_after_ = kExploreAfter;  // ... before an exploring K = 1, times the batch:
  int64_t ExploreWait() const;
  TargetLoad load_;           // the latest report
  int32_t disable_at_ = 0;    // DisableAtSessions
  double network_s_ = 0;      // decayed mean seconds of a verify call outside the target
};

}  // namespace specserve
