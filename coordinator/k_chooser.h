// Choosing a round's K from a KCostModel: a fixed K, or adaptive K (the K
// of the highest predicted rate), under limits that compose. Stateless; the
// K policy (coordinator/k_policy.h) adds what needs memory (exploration, a
// first round). Why each part is as it is: docs/round_protocol.md
// "Speculation length" and "K under load".
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "coordinator/k_cost_model.h"
#include "spec/round.h"

namespace specserve {

// Why a round's K is what it is: counted as specserve_k_choices_total{reason}
// (docs/metrics.md, named by KReasonName).
enum class KReason {
  kFixed,        // a fixed or scripted K
  kInitial,      // a first round with nothing measured: the initial K
  kBest,         // the K of the highest predicted rate (K > 0)
  kExplore,      // K = 1 after a long plain streak
  kPlainRate,    // plain: no K > 0 predicts a higher rate
  kPlainMargin,  // plain: a K > 0 predicts more, but not kLoadMargin more
  kPlainLate,    // plain: a K > 0 predicts more, but not kLonePremium more
  kPlainLoad,    // plain: the target has PlainAtSessions' n or more sessions open
};
inline constexpr int kKReasons = 8;
const char* KReasonName(KReason r);

struct KChoice {
  int32_t k = 0;
  KReason reason = KReason::kFixed;
  // The best K > 0's predicted rate over plain decoding's, before any
  // premium (1.3: 30% more tokens a second); 0 where nothing was compared.
  double gain = 0;
};

inline constexpr int32_t kMinAdaptiveK = 1;  // without a load report K never falls below it
inline constexpr double kPlainMatesK = 0.5;  // batch-mates' mean K below this: they decode plainly
inline constexpr double kLonePremium = 0.40;
inline constexpr double kLoadMargin = 0.25;

// A limit asks a K to promise `factor` times plain decoding's rate or more;
// `reason` is reported when it alone keeps a round plain. Limits compose:
// a K's premium is the largest factor any limit asks of it.
struct KPremium {
  double factor = 1;
  KReason reason = KReason::kPlainMargin;
};
using KLimit = std::function<KPremium(int32_t k)>;

// In a batch (B >= 1.5 sessions a pass): 1 + kLoadMargin for every K > 0.
KLimit BatchMargin(const KCostModel& m);
// Among plain batch-mates (tokens_per_session < 1 + kPlainMatesK) in a
// batch, a K > 0 whose block drafted on demand comes after the target's
// gather (always in a request's first round, whose draft prefills first):
// 1 + kLonePremium, reason kPlainLate. `m` must outlive the limit.
KLimit LatePremium(const KCostModel& m, bool first_round);
// Whether the target's report has `n` or more sessions open (n <= 0: never).
bool PlainAtSessions(const TargetLoad& load, int32_t n);

inline KChoice ChooseFixed(int32_t k) { return KChoice{k, KReason::kFixed}; }
// The K in [k_min, kMaxRoundK] of the highest m.Rate(K) / premium, the
// smaller K on a tie; k_min is 0 with a load report, else kMinAdaptiveK.
// Reason kBest or, for K = 0, kPlainRate, or the binding limit's reason
// where a K > 0 predicted more than plain decoding before the premiums.
KChoice ChooseAdaptive(const KCostModel& m, std::span<const KLimit> limits);

}  // namespace specserve
