#include "coordinator/k_policy.h"

#include <algorithm>
#include <cmath>

namespace specserve {
namespace {
constexpr double kDecay = 0.95;  // ~20-round memory: follows a prompt's changing difficulty
}

double KPolicy::acceptance_estimate() const { return acc_ / (acc_ + rej_); }

// Each session of a batch of B waits B times as long: the batch explores
// about as often as one session alone would.
int64_t KPolicy::ExploreWait() const {
  const double b = load_.known ? std::max(1.0, std::round(load_.sessions_per_pass)) : 1.0;
  return static_cast<int64_t>(explore_after_ * b);
}

void KPolicy::DecayedLine::Add(double x, double y) {
  sw = sw * kDecay + 1;
  sx = sx * kDecay + x;
  sy = sy * kDecay + y;
  sxx = sxx * kDecay + x * x;
  sxy = sxy * kDecay + x * y;
}

void KPolicy::DecayedLine::Scale(double f) {
  sw *= f;
  sx *= f;
  sy *= f;
  sxx *= f;
  sxy *= f;
}

double KPolicy::DecayedLine::At(double x, double lone_slope) const {
  if (sw == 0) return 0;
  const double mx = sx / sw, my = sy / sw;
  const double var = sxx / sw - mx * mx;
  double slope = var > 1e-9 ? (sxy / sw - mx * my) / var : lone_slope * my / mx;
  slope = std::max(0.0, slope);
  return std::max(1e-9, my + slope * (x - mx));
}

void KPolicy::Observe(int32_t k, int32_t accepted, double draft_seconds, double verify_seconds, Wait wait,
                      std::optional<Reason> why) {
  if (!script_.empty()) ++script_round_;
  if (!adaptive_) return;
  if (k <= 0) {
    ++plain_streak_;
    return;
  }
  // An exploration (a drafting round after a full wait, when the reason is
  // not known): wait twice as long next time. A K the policy chose itself:
  // back to the shortest wait.
  const bool explored = why ? *why == Reason::kExplore : plain_streak_ >= ExploreWait();
  explore_after_ = explored ? std::min(2 * explore_after_, kExploreMax) : kExploreAfter;
  plain_streak_ = 0;
  acc_ = acc_ * kDecay + accepted;
  rej_ = rej_ * kDecay + (accepted < k ? 1 : 0);
  const bool ahead = wait == Wait::kDraftedAhead;
  if (last_full_) {
    ahead_chances_ = ahead_chances_ * kDecay + 1;
    ahead_hits_ = ahead_hits_ * kDecay + (ahead ? 1 : 0);
  }
  last_full_ = accepted == k;
  if (ahead) {
    ahead_wait_ += (ahead_hits_ <= 1 ? 1.0 : 1.0 - kDecay) * (draft_seconds - ahead_wait_);
  }
  // A line that holds only a first round's figures (the lines are empty
  // before it) is replaced by the first ordinary one.
  const bool prefill = wait == Wait::kWithPrefill;
  // A seeded line (Seed) measured ordinary rounds: a first round's figures,
  // with the prefill, would only blur it.
  auto add = [&](DecayedLine& line, bool& provisional, double x, double y) {
    if (prefill && seeded_) return;
    if (provisional) line = DecayedLine{};
    provisional = prefill;
    line.Add(x, y);
  };
  if (!ahead) add(draft_, draft_provisional_, k, draft_seconds);
  add(verify_, verify_provisional_, k + 1, verify_seconds);
  ++rounds_;
}

// Until two different K have been seen the verify slope is unknown: assume a
// quarter of a pass per extra token (between GPU ~0 and CPU ~1), so that the
// policy explores instead of locking onto its first K.
double KPolicy::VerifyCost(int32_t n) const { return verify_.At(n, 0.25); }

// With one K seen, all of its wait counts per drafted token (the dearer
// guess for larger K; a second K fits the fixed part).
// The look-ahead is ready with probability h(k) = a^k g (see the header).
double KPolicy::DraftCost(int32_t k) const {
  if (k <= 0) return 0;
  const double on_demand = draft_.At(k, 1.0);
  if (ahead_chances_ <= 0 || ahead_hits_ <= 0) return on_demand;
  const double g = ahead_hits_ / ahead_chances_;
  const double h = std::pow(std::clamp(acceptance_estimate(), 0.0, 1.0), k) * g;
  return (1 - h) * on_demand + h * ahead_wait_;
}

void KPolicy::Seed(const KPolicy& other) {
  if (!adaptive_ || rounds_ > 0 || !other.learned()) return;
  auto weight = [](double w) { return w > kSeedRounds ? kSeedRounds / w : 1.0; };
  const double f = weight(other.acc_ + other.rej_);
  acc_ = other.acc_ * f;
  rej_ = other.rej_ * f;
  draft_ = other.draft_;
  draft_.Scale(weight(draft_.sw));
  draft_provisional_ = false;
  verify_ = other.verify_;
  verify_.Scale(weight(verify_.sw));
  verify_provisional_ = false;
  seeded_ = true;
  const double g = weight(other.ahead_chances_);
  ahead_chances_ = other.ahead_chances_ * g;
  ahead_hits_ = other.ahead_hits_ * g;
  ahead_wait_ = other.ahead_wait_;
}

void KPolicy::ObserveTarget(const TargetLoad& load, double network_seconds) {
  if ((!adaptive_ && disable_at_ <= 0) || !load.known) return;
  const bool first = !load_.known;
  load_ = load;
  network_s_ += (first ? 1.0 : 1.0 - kDecay) * (std::max(0.0, network_seconds) - network_s_);
}

const char* KPolicy::ReasonName(Reason r) {
  switch (r) {
    case Reason::kFixed: return "fixed";
    case Reason::kInitial: return "initial";
    case Reason::kBest: return "best";
    case Reason::kExplore: return "explore";
    case Reason::kPlainRate: return "plain_rate";
    case Reason::kPlainMargin: return "plain_margin";
    case Reason::kPlainLate: return "plain_late";
    case Reason::kPlainLoad: return "plain_load";
  }
  return "unknown";
}

KPolicy::Choice KPolicy::Choose() const {
  if (!script_.empty()) return Choice{script_[script_round_ % script_.size()], Reason::kFixed};
  if (disable_at_ > 0 && load_.known && load_.active_sessions >= disable_at_) return Choice{0, Reason::kPlainLoad};
  if (!adaptive_) return Choice{k_, Reason::kFixed};
  // Before its first round a policy has only its initial K, unless it was
  // given the target's load (a new request under load: coordinator/target_load_board.h).
  if (rounds_ == 0 && !load_.known) return Choice{k_, Reason::kInitial};
  const double a = std::clamp(acceptance_estimate(), 0.01, 0.995);
  // With the target's report, K = 0 competes and a token's verify cost is
  // what it costs the whole batch; without it, the fitted own-pass line.
  const int32_t k_min = load_.known ? 0 : kMin;
  const double batch = std::max(1.0, load_.sessions_per_pass);
  const double sessions = std::max(1.0, load_.active_sessions);
  auto round_seconds = [&](int32_t k) {
    if (!load_.known) return VerifyCost(k + 1) + DraftCost(k);
    const double pass = PassSeconds(load_, batch * (k + 1));
    const double latency = network_s_ + pass + DraftCost(k);
    const double throughput = sessions / batch * pass;
    return std::max(latency, throughput);
  };
  // Among plain batch-mates (the target's decoding passes bring about one
  // token per session), a session that drafts on demand answers later than
  // they do; later than the target's gather, it misses the pass they start
  // and waits for it to end. Its first round is always that late: the draft
  // prefills the prompt before it drafts. So such a round must promise
  // kLonePremium more than the rate above (see the header).
  const bool plain_mates = load_.known && load_.tokens_per_session > 0 &&
                           load_.tokens_per_session < 1 + kPlainMatesK && batch >= 1.5;
  auto alone_and_late = [&](int32_t k) {
    return plain_mates && k > 0 && (rounds_ == 0 || draft_.At(k, 1.0) > load_.gather_seconds);
  };
  // In a batch, drafting must promise kLoadMargin more than plain decoding
  // (see the header); a late round alone, kLonePremium.
  const bool batched = load_.known && batch >= 1.5;
  auto premium = [&](int32_t k) {
    if (alone_and_late(k)) return 1 + kLonePremium;
    return batched && k > 0 ? 1 + kLoadMargin : 1.0;
  };
  auto rate = [&](int32_t k) { return (1 - std::pow(a, k + 1)) / (1 - a) / std::max(1e-9, round_seconds(k)); };
  const double plain_rate = rate(0);
  int32_t best = k_min;
  double best_rate = -1;
  double best_drafting = 0;  // the highest rate of a K > 0, before premiums
  int32_t best_drafting_k = kMin;
  for (int32_t k = k_min; k <= kMax; ++k) {
    const double r = k == 0 ? plain_rate : rate(k);
    if (k > 0 && r > best_drafting) {
      best_drafting = r;
      best_drafting_k = k;
    }
    const double priced = r / premium(k);
    if (priced > best_rate * (1 + 1e-9)) {
      best_rate = priced;
      best = k;
    }
  }
  Choice c{best, best > 0 ? Reason::kBest : Reason::kPlainRate, best_drafting / plain_rate};
  if (best == 0 && best_drafting > plain_rate * (1 + 1e-9)) {
    c.reason = alone_and_late(best_drafting_k) ? Reason::kPlainLate : Reason::kPlainMargin;
  }
  // Plain for a while: one round of K = 1 measures acceptance and the
  // draft's cost again (see the header). Also in a request that has not
  // drafted yet, alone on the target: it started from another request's
  // figures (Seed), and its plain rounds post nothing, so without it every
  // later request would start from the same stale figures. In a batch such
  // a request does not: its exploration set the batch flipping between
  // plain and drafting rounds, late for each other's passes (see the header).
  const bool may_explore = rounds_ > 0 || !batched;
  if (c.k == 0 && may_explore && plain_streak_ >= ExploreWait()) return Choice{1, Reason::kExplore, c.gain};
  // A first round knows the load but not the draft's step cost: the load
  // may lower the initial K, never raise it.
  if (rounds_ == 0) c.k = std::min(c.k, k_);
  return c;
}

}  // namespace specserve
