#include "coordinator/k_chooser.h"

namespace specserve {
namespace {

KPremium Premium(std::span<const KLimit> limits, int32_t k) {
  KPremium p;
  for (const KLimit& limit : limits) {
    const KPremium q = limit(k);
    if (q.factor > p.factor) p = q;
  }
  return p;
}

}  // namespace

const char* KReasonName(KReason r) {
  switch (r) {
    case KReason::kFixed: return "fixed";
    case KReason::kInitial: return "initial";
    case KReason::kBest: return "best";
    case KReason::kExplore: return "explore";
    case KReason::kPlainRate: return "plain_rate";
    case KReason::kPlainMargin: return "plain_margin";
    case KReason::kPlainLate: return "plain_late";
    case KReason::kPlainLoad: return "plain_load";
  }
  return "unknown";
}

KLimit BatchMargin(const KCostModel& m) {
  const bool batched = m.batched();
  return [batched](int32_t k) {
    return batched && k > 0 ? KPremium{1 + kLoadMargin, KReason::kPlainMargin} : KPremium{};
  };
}

KLimit LatePremium(const KCostModel& m, bool first_round) {
  const TargetLoad& load = m.load();
  const bool plain_mates =
      m.batched() && load.tokens_per_session > 0 && load.tokens_per_session < 1 + kPlainMatesK;
  return [&m, plain_mates, first_round](int32_t k) {
    const bool late = plain_mates && k > 0 && (first_round || m.OnDemandDraftSeconds(k) > m.load().gather_seconds);
    return late ? KPremium{1 + kLonePremium, KReason::kPlainLate} : KPremium{};
  };
}

bool PlainAtSessions(const TargetLoad& load, int32_t n) {
  return n > 0 && load.known && load.active_sessions >= n;
}

KChoice ChooseAdaptive(const KCostModel& m, std::span<const KLimit> limits) {
  const int32_t k_min = m.load().known ? 0 : kMinAdaptiveK;
  const double plain_rate = m.Rate(0);
  int32_t best = k_min;
  double best_rate = -1;
  double best_drafting = 0;  // the highest rate of a K > 0, before premiums
  int32_t best_drafting_k = kMinAdaptiveK;
  for (int32_t k = k_min; k <= kMaxRoundK; ++k) {
    const double r = k == 0 ? plain_rate : m.Rate(k);
    if (k > 0 && r > best_drafting) {
      best_drafting = r;
      best_drafting_k = k;
    }
    const double priced = r / Premium(limits, k).factor;
    if (priced > best_rate * (1 + 1e-9)) {
      best_rate = priced;
      best = k;
    }
  }
  KChoice c{best, best > 0 ? KReason::kBest : KReason::kPlainRate, best_drafting / plain_rate};
  if (best == 0 && best_drafting > plain_rate * (1 + 1e-9)) c.reason = Premium(limits, best_drafting_k).reason;
  return c;
}

}  // namespace specserve
