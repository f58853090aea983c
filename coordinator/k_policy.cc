#include "coordinator/k_policy.h"

#include <algorithm>
#include <cmath>

namespace specserve {
namespace {
constexpr double kDecay = 0.95;  // ~20-round memory: follows a prompt's changing difficulty
}

int64_t KPolicy::ExploreWait() const {
  const TargetLoad& load = measured_.load;
  const double b = load.known ? std::max(1.0, std::round(load.sessions_per_pass)) : 1.0;
  return static_cast<int64_t>(explore_after_ * b);
}

void KPolicy::Observe(int32_t k, int32_t accepted, double draft_seconds, double verify_seconds, Wait wait,
                      std::optional<Reason> why) {
  if (!script_.empty()) ++script_round_;
  if (!adaptive_) return;
  if (k <= 0) {
    ++plain_streak_;
    return;
  }
  const bool explored = why ? *why == Reason::kExplore : plain_streak_ >= ExploreWait();
  explore_after_ = explored ? std::min(2 * explore_after_, kExploreMax) : kExploreAfter;
  plain_streak_ = 0;
  KCostInputs& m = measured_;
  m.accepted = m.accepted * kDecay + accepted;
  m.rejections = m.rejections * kDecay + (accepted < k ? 1 : 0);
  const bool ahead = wait == Wait::kDraftedAhead;
  if (last_full_) {
    m.ahead_chances = m.ahead_chances * kDecay + 1;
    m.ahead_hits = m.ahead_hits * kDecay + (ahead ? 1 : 0);
  }
  last_full_ = accepted == k;
  if (ahead) m.ahead_wait += (m.ahead_hits <= 1 ? 1.0 : 1.0 - kDecay) * (draft_seconds - m.ahead_wait);
  // A line holding only a first round's figures gives way to the first
  // ordinary round's; a seeded line keeps out a first round's altogether.
  const bool prefill = wait == Wait::kWithPrefill;
  auto add = [&](DecayedLine& line, bool& provisional, double x, double y) {
    if (prefill && seeded_) return;
    if (provisional) line = DecayedLine{};
    provisional = prefill;
    line.Add(x, y, kDecay);
  };
  if (!ahead) add(m.draft, draft_provisional_, k, draft_seconds);
  add(m.verify, verify_provisional_, k + 1, verify_seconds);
  ++rounds_;
}

void KPolicy::Seed(const KPolicy& other) {
  if (!adaptive_ || rounds_ > 0 || !other.learned()) return;
  auto weight = [](double w) { return w > kSeedRounds ? kSeedRounds / w : 1.0; };
  const KCostInputs& o = other.measured_;
  KCostInputs& m = measured_;
  const double f = weight(o.accepted + o.rejections);
  m.accepted = o.accepted * f;
  m.rejections = o.rejections * f;
  m.draft = o.draft;
  m.draft.Scale(weight(m.draft.sw));
  draft_provisional_ = false;
  m.verify = o.verify;
  m.verify.Scale(weight(m.verify.sw));
  verify_provisional_ = false;
  seeded_ = true;
  const double g = weight(o.ahead_chances);
  m.ahead_chances = o.ahead_chances * g;
  m.ahead_hits = o.ahead_hits * g;
  m.ahead_wait = o.ahead_wait;
}

void KPolicy::ObserveTarget(const TargetLoad& load, double network_seconds) {
  if ((!adaptive_ && disable_at_ <= 0) || !load.known) return;
  const bool first = !measured_.load.known;
  measured_.load = load;
  measured_.network_seconds +=
      (first ? 1.0 : 1.0 - kDecay) * (std::max(0.0, network_seconds) - measured_.network_seconds);
}

KPolicy::Choice KPolicy::Choose() const {
  if (!script_.empty()) return Choice{script_[script_round_ % script_.size()], Reason::kFixed};
  if (PlainAtSessions(measured_.load, disable_at_)) return Choice{0, Reason::kPlainLoad};
  if (!adaptive_) return ChooseFixed(k_);
  if (rounds_ == 0 && !measured_.load.known) return Choice{k_, Reason::kInitial};
  const KCostModel model = Model();
  const KLimit limits[] = {BatchMargin(model), LatePremium(model, rounds_ == 0)};
  Choice c = ChooseAdaptive(model, limits);
  // A request that has not drafted explores only alone on the target: in a
  // batch its explorations set the batch flipping between plain and drafting.
  const bool may_explore = rounds_ > 0 || !model.batched();
  if (c.k == 0 && may_explore && plain_streak_ >= ExploreWait()) return Choice{1, Reason::kExplore, c.gain};
  // A first round knows the load, not the draft's cost: the load may lower
  // the initial K, never raise it.
  if (rounds_ == 0) c.k = std::min(c.k, k_);
  return c;
}

}  // namespace specserve
